--[[
  Reads who claimed a request id (limited coupons), telling "never claimed" apart from "the shard holding the
  claims is gone": Compensate must not answer NOT_DEDUCTED for a deduction whose claim was lost.

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] claim hashes   <ns>:{<tag>}:cl:<bucket>   buckets first .. first + 2 (claim-4.lua)

  ARGV[1] claimField        the request id as a field (keys.ts recordField)
  ARGV[2] windowSec         idempotency window, seconds (the bucket width)
  ARGV[3] firstBucket       bucket of KEYS[2]

  Returns
    { 1, value }   claimed by "user|quantity"
    { 0 }          not claimed (or only held, and the hold lapsed)
    {-4 }          the shard hash is missing: recover the coupon, then read again
    {-8 }          the caller's clock is too far off the server's (lua/includes/buckets.lua)
]]
-- @include paused-for
-- @include buckets
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { -4 }
end
if not writeSlot(tonumber(ARGV[2]), tonumber(ARGV[3])) then return { -8 } end
local value = findField(2, ARGV[1])
if value then
  local who, hold = string.match(value, '^([^|]*|[^|]*)|?(%d*)$')
  if hold == '' or tonumber(hold) > serverNowMs() then
    return { 1, who }
  end
end
return { 0 }
