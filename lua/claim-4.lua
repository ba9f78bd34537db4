--[[
  Claims a request id for "user|quantity" on the request id's own shard (limited coupons), unless it is
  claimed already, but refused when the shard itself is gone — its claims were lost with it, and a claim made
  now could hand the id to another user before the recovery puts the old claim back.

  A claim is a field of the shard's claim hashes, bucketed like request records (lua/includes/buckets.lua).
  Its value is "user|quantity|holdUntilMs" while only held (it lapses at holdUntilMs, server time, unless
  claim-keep-3.lua keeps it once the deduction is made), and "user|quantity" once kept for the window.

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] claim hashes   <ns>:{<tag>}:cl:<bucket>   buckets first .. first + 2; field = request id

  ARGV[1] claimField        the request id as a field (keys.ts recordField)
  ARGV[2] value             "user|quantity"
  ARGV[3] holdMs            how long a new claim is held (kept for the window once the deduction is made)
  ARGV[4] windowSec         idempotency window, seconds (the bucket width)
  ARGV[5] firstBucket       bucket of KEYS[2]

  Returns
    { 0 }          claimed now
    { 1, value }   claimed before, by `value` ("user|quantity")
    {-4 }          the shard hash is missing: recover the coupon, then retry
    {-8 }          the caller's clock is more than half a window off the server's: nothing changed
]]
-- @include paused-for
-- @include buckets
local field = ARGV[1]
local windowSec = tonumber(ARGV[4])
local firstBucket = tonumber(ARGV[5])
if redis.call('EXISTS', KEYS[1]) == 0 then
  return { -4 }
end
local slot = writeSlot(windowSec, firstBucket)
if not slot then return { -8 } end
local prev, at = findField(2, field)
if prev then
  local who, hold = string.match(prev, '^([^|]*|[^|]*)|?(%d*)$')
  if hold == '' or tonumber(hold) > serverNowMs() then
    return { 1, who }
  end
  -- Held, never kept, and lapsed: as if it were not there.
  redis.call('HDEL', KEYS[2 + at], field)
end
writeField(2, slot, firstBucket, windowSec, field, ARGV[2] .. '|' .. (serverNowMs() + tonumber(ARGV[3])))
return { 0 }
