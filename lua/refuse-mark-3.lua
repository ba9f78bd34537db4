--[[
  Marks a deduction that settlement refused (MySQL did not have its units): its units are NOT put back on
  sale — the caller holds them and they never existed in the record — but a later Compensate must know not
  to return them either (compensate-6.lua reads the mark).

  KEYS[1..3] record hashes  <ns>:{<tag>}:rq:<bucket>   buckets first .. first + 2 (lua/includes/buckets.lua)

  ARGV[1] recordField       the request id as a record field (keys.ts recordField)
  ARGV[2] windowSec         idempotency window, seconds (the bucket width)
  ARGV[3] firstBucket       bucket of KEYS[1]

  Returns
    1  marked (or marked before)
    2  marked now, but the deduction had been compensated before the mark: that Compensate found no mark and
       put its units back on sale, which the caller must take away again (it asks for a repair of the coupon)
    0  no record (expired or lost)
   -8  the caller's clock is too far off the server's (lua/includes/buckets.lua): nothing changed
]]
-- @include buckets
local field = ARGV[1]
if not writeSlot(tonumber(ARGV[2]), tonumber(ARGV[3])) then return -8 end
local packed, at = findField(1, field)
if not packed then return 0 end
local rec = unpackRecord(packed)
if not hasFlag(rec, 'x') then
  local givenBack = hasFlag(rec, 'c')
  rec.f = rec.f .. 'x'
  redis.call('HSET', KEYS[1 + at], field, packRecord(rec))
  if givenBack then return 2 end
end
return 1
