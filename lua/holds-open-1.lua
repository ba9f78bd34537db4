#!lua flags=allow-cross-slot-keys,no-writes
--[[
  The hold sweeper's backstop pass (src/domain/hold-sweeper.ts fullPass), one call per master and slice: how
  many holds each of many shards has, so that looking at every shard of 10,000 coupons is a few hundred calls
  every 30 s instead of 40,000 ZCARDs, each a command of its own for the client to build, route and answer.
  Reads only.

  The holds sets are in different slots. The script declares one key, the first set, which routes it; the
  shebang flag lets it read the others, which Redis still checks are served by this node at each access. A set
  whose slot is not here (moved, failed over) answers -1 for the caller to ask the cluster for it alone.

  KEYS[1]   the first holds set (routing only; it is also ARGV[1])
  ARGV      holds sets  <ns>:{<tag>}:holds, all expected on this node

  Returns one integer per ARGV entry, in order: the set's ZCARD, or -1 where this node does not serve its slot.
]]
local out = {}
for i = 1, #ARGV do
  local ok, n = pcall(redis.call, 'ZCARD', ARGV[i])
  out[i] = ok and n or -1
end
return out
