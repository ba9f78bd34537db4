--[[
  Reads who claimed a request id (limited coupons), telling "never claimed" apart from "the shard holding the
  claims is gone": Compensate must not answer NOT_DEDUCTED for a deduction whose claim was lost.

  KEYS[1] shard hash   <ns>:{<tag>}:shard
  KEYS[2] claim        <ns>:{<tag>}:claim:<requestId>

  Returns
    { 1, value }   claimed by "user|quantity"
    { 0 }          not claimed
    {-4 }          the shard hash is missing: recover the coupon, then read again
]]
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { -4 }
end
local value = redis.call('GET', KEYS[2])
if value then
  return { 1, value }
end
return { 0 }
