--[[
  Gives the units of one recorded deduction back to the shard that served it, restores the user's count and
  appends the outbox event. The request record stays (marked compensated), so a replay of the deduction can
  never take the units again and a second compensation is recognised.

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>   buckets first .. first + 2 (lua/includes/buckets.lua)
  KEYS[5] user counts       <ns>:{<tag>}:users         (touched only when limited = 1)
  KEYS[6] outbox stream     <ns>:{<tag>}:outbox

  ARGV[1] requestId
  ARGV[2] recordField       the request id as a record field (keys.ts recordField)
  ARGV[3] reason            free text for the ledger
  ARGV[4] couponId
  ARGV[5] shardIndex
  ARGV[6] nowMs
  ARGV[7] limited           1 when the coupon has a per-user limit
  ARGV[8] windowSec         idempotency window, seconds (the bucket width)
  ARGV[9] firstBucket       bucket of KEYS[2]

  Returns
    { 1, avail, quantity }  compensated; avail = shard avail after it
    { 2, avail }            already compensated
    { 3 }                   no deduction is recorded for requestId (never made, or older than the window)
    {-4 }                   the shard hash is missing: recover the coupon, then retry
    {-5, waitMs }           the coupon is paused for recovery; retry after waitMs
    {-8 }                   the caller's clock is too far off the server's (lua/includes/buckets.lua): nothing
                            changed

  A deduction that settlement refused (record flag x: MySQL never had its units) is closed without putting
  anything back on sale: its units were sold beyond the record, so returning them would create stock. The
  event still goes out; settlement knows the deduction was refused and settles nothing for it.
]]
-- @include paused-for
-- @include buckets
-- @include shard-ops
local shardKey = KEYS[1]

local requestId = ARGV[1]
local field = ARGV[2]
local reason = ARGV[3]
local couponId = ARGV[4]
local shardIndex = ARGV[5]
local nowMs = ARGV[6]
local limited = ARGV[7] == '1'

-- The shard first: after a loss the request record is gone too, and "never deducted" would be a lie.
local state = redis.call('HMGET', shardKey, 'avail', 'net', 'ep', 'pz')
if not state[1] then
  return { -4 }
end
local wait = pausedFor(state[4])
if wait > 0 then return { -5, wait } end
local windowSec = tonumber(ARGV[8])
local firstBucket = tonumber(ARGV[9])
local slot = writeSlot(windowSec, firstBucket)
if not slot then return { -8 } end
local run = openRun(state, windowSec, firstBucket, slot, shardIndex, couponId, nowMs)
local reply = { compensateRecorded(run, requestId, field, reason, limited) }
closeRun(run)
return reply
