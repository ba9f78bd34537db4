#!lua flags=allow-cross-slot-keys,no-writes
--[[
  How full the outbox streams of several shards on one master are, in one call: the relay's idle polls and its
  backlog sweep ask this instead of one XREADGROUP (or XLEN and XRANGE) per shard. An instance serving 10,000
  coupons of 4 shards otherwise sent ~40,000 commands a second while nothing was sold (one poll per idle shard
  and second) and 80,000 per sweep, at ~15 µs of its own CPU each.

  The streams are in different slots. KEYS[1], the first stream, routes the call; the shebang flag lets it
  read the others, which Redis still checks are served by this node at each access: a stream whose slot is not
  here (moved, failed over) is answered -1, and the caller asks about it on its own.

  KEYS[1]    the first stream   <ns>:{<tag>}:outbox   (routing only; it is ARGV[1] too)
  ARGV[1..n] outbox streams     <ns>:{<tag>}:outbox   all served by the node KEYS[1] routes to

  Returns one integer per stream, in ARGV order, then one string per stream that holds entries:
    length_1 .. length_n      the stream's XLEN; -1 when the node does not serve its slot (or reading it failed)
    oldest_i ...              for each stream with length > 0, in order: its first entry's id
  (Integers first: a reply of mostly empty streams then holds no strings, which the client decodes dearer.)
]]
local out = {}
local oldest = {}
for i = 1, #ARGV do
  local ok, n = pcall(redis.call, 'XLEN', ARGV[i])
  if not ok then
    out[i] = -1
  else
    out[i] = n
    if n > 0 then
      local first = redis.call('XRANGE', ARGV[i], '-', '+', 'COUNT', 1)[1]
      oldest[#oldest + 1] = first and first[1] or ''
    end
  end
end
for _, id in ipairs(oldest) do out[#out + 1] = id end
return out
