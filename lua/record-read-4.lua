--[[
  Reads request records (the sold-out fast path's replays, batched per shard; the audit API). Writes nothing.

  KEYS[1]    shard hash     <ns>:{<tag>}:shard                 only whether it exists
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>           buckets first .. first + 2 (lua/includes/buckets.lua)

  ARGV[1] windowSec         idempotency window, seconds (the bucket width)
  ARGV[2] firstBucket       bucket of KEYS[2]
  ARGV[3..] recordField     one request id per argument, as a record field (keys.ts recordField)

  Returns
    { 1, packed_1, ..., packed_n }  per request in ARGV order: the packed record "q|r|t|flags|u"
                                    (lua/includes/buckets.lua), or '' when it has none
    {-4 }                           the shard hash is gone (its master lost its data): its records went with it,
                                    so "no record" would be a guess; the caller recovers the shard first
    {-8 }                           the caller's clock is too far off the server's: the three hashes may not
                                    be the live ones
]]
-- @include buckets
if redis.call('EXISTS', KEYS[1]) == 0 then return { -4 } end
if not writeSlot(tonumber(ARGV[1]), tonumber(ARGV[2])) then return { -8 } end
-- One HMGET per hash for the whole batch: the first hash holding a field wins, as findField reads them.
local fields = { unpack(ARGV, 3) }
local out = { 1 }
for i = 1, #fields do out[i + 1] = '' end
for k = 2, 4 do
  local vals = redis.call('HMGET', KEYS[k], unpack(fields))
  for i = 1, #fields do
    if vals[i] and out[i + 1] == '' then out[i + 1] = vals[i] end
  end
end
return out
