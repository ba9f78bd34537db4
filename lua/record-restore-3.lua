--[[
  Puts back one request record that a lost shard took with it, from the ledger or an event still in flight,
  so a retry of that request replays instead of deducting again. Never overwrites a record that exists.

  KEYS[1..3] record hashes  <ns>:{<tag>}:rq:<bucket>   buckets first .. first + 2 (lua/includes/buckets.lua)

  ARGV[1] recordField       the request id as a record field (keys.ts recordField)
  ARGV[2] userId
  ARGV[3] quantity
  ARGV[4] occurredMs
  ARGV[5] flags             the record's flags: x when settlement refused the deduction, c when it was
                            compensated since, h when it confirmed a hold (any of them, in that order)
  ARGV[6] windowSec         idempotency window, seconds (the bucket width)
  ARGV[7] firstBucket       bucket of KEYS[1]

  Returns
    1  restored
    0  a record exists: nothing changed
   -8  the caller's clock is more than half a window off the server's: nothing changed
]]
-- @include buckets
local field = ARGV[1]
local windowSec = tonumber(ARGV[6])
local firstBucket = tonumber(ARGV[7])
local slot = writeSlot(windowSec, firstBucket)
if not slot then return -8 end
if findField(1, field) then return 0 end
-- Into the bucket of its own time when that bucket is still kept (it then lasts as long as the original
-- would have), else the oldest kept one: never shorter than what is left of its window.
local own = math.floor(math.floor(tonumber(ARGV[4]) / 1000) / windowSec) - firstBucket + 1
local at = math.max(slot - 1, math.min(slot, own))
writeField(1, at, firstBucket, windowSec, field,
  packRecord({ q = ARGV[3], r = 0, t = ARGV[4], f = ARGV[5], u = ARGV[2] }))
return 1
