--[[
  Claims a request id for "user|quantity" on the request id's own shard (limited coupons), unless it is
  claimed already: SET NX GET, but refused when the shard itself is gone — its claims were lost with it, and a
  claim made now could hand the id to another user before the recovery puts the old claim back.

  KEYS[1] shard hash   <ns>:{<tag>}:shard
  KEYS[2] claim        <ns>:{<tag>}:claim:<requestId>

  ARGV[1] value        "user|quantity"
  ARGV[2] holdSec      how long a new claim is held (extended once the deduction is made)

  Returns
    { 0 }          claimed now
    { 1, value }   claimed before, by `value`
    {-4 }          the shard hash is missing: recover the coupon, then retry
]]
local shardKey = KEYS[1]
local claimKey = KEYS[2]
if redis.call('EXISTS', shardKey) == 0 then
  return { -4 }
end
local prev = redis.call('GET', claimKey)
if prev then
  return { 1, prev }
end
redis.call('SET', claimKey, ARGV[1], 'EX', ARGV[2])
return { 0 }
