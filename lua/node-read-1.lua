#!lua flags=allow-cross-slot-keys,no-writes
--[[
  The sold-out fast path's record reads of every shard one master holds, in one call: record-read-4.lua's
  work once per shard, so that a sold-out storm costs the service one client command per master and round
  instead of one per shard (the cluster client's per-command work and the socket write were most of a
  refusal's cost beyond the RPC itself). Writes nothing.

  Shards are in different slots. The script declares one key, the first shard's hash, which routes it; the
  shebang flag lets it read the other shards' keys, which Redis still checks are served by this node at each
  access. A shard whose keys are not here (moved, failed over), or whose read failed otherwise, is answered
  -10 for the caller to read on its own: nothing else of the call depends on it.

  KEYS[1]      the first shard's hash (routing only; every shard's keys are in ARGV)
  ARGV, per shard, one after another:
    4 key names   record-read-4.lua's KEYS[1..4]: shard hash, record hashes of buckets first .. first + 2
    windowSec     idempotency window, seconds (the bucket width)
    firstBucket   bucket of the first record hash
    count         how many request ids follow
    count values  record fields (keys.ts recordField)

  Returns per shard, in order, a code and then `count` values:
    1, packed_1 .. packed_n   the packed record "q|r|t|flags|u" (lua/includes/buckets.lua) or '' when none
    -4, '' x count            the shard hash is gone (its master lost its data): "no record" would be a guess
    -8, '' x count            the caller's clock is too far off the server's
    -10, '' x count           this node does not serve the shard's keys, or reading them failed
]]
-- @include buckets
local out = {}

-- Appends shard code and values; `a`: the shard's first ARGV index.
local function readShard(a, count)
  if redis.call('EXISTS', ARGV[a]) == 0 then return -4 end
  if not writeSlot(tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])) then return -8 end
  local fields = { unpack(ARGV, a + 7, a + 6 + count) }
  local vals = {}
  for i = 1, count do vals[i] = '' end
  -- The first hash holding a field wins, as findField reads them.
  for k = 1, 3 do
    local got = redis.call('HMGET', ARGV[a + k], unpack(fields))
    for i = 1, count do
      if got[i] and vals[i] == '' then vals[i] = got[i] end
    end
  end
  return 1, vals
end

local a = 1
while a <= #ARGV do
  local count = tonumber(ARGV[a + 6])
  local ok, code, vals = pcall(readShard, a, count)
  local n = #out
  if not ok then code = -10 end
  out[n + 1] = code
  for i = 1, count do out[n + 1 + i] = (ok and vals and vals[i]) or '' end
  a = a + 7 + count
end
return out
