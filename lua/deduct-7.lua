--[[
  Takes `quantity` units from one shard for one request, atomically: idempotency record, per-user limit,
  stock, decrement, and the outbox event that settlement will carry to MySQL. Credits listed after the fixed
  arguments (fallback moves landing here) are applied first, each at most once. The key count is fixed: the
  request record and the user's count are fields of per-shard hashes (lua/includes/buckets.lua).

  KEYS[1] shard hash        <ns>:{<tag>}:shard         fields avail, transit, net
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>   buckets first .. first + 2; field = request id (keys.ts
                                                       recordField), value = packed record (buckets.lua)
  KEYS[5] user counts       <ns>:{<tag>}:users         field = user id (touched only when limit > 0)
  KEYS[6] outbox stream     <ns>:{<tag>}:outbox
  KEYS[7] credits           <ns>:{<tag>}:credits       (zset of applied credit ids)

  ARGV[1] requestId
  ARGV[2] recordField       the request id as a record field (keys.ts recordField)
  ARGV[3] userId            may be empty when limit = 0
  ARGV[4] quantity          integer >= 1
  ARGV[5] limit             per-user limit, 0 = unlimited
  ARGV[6] windowSec         idempotency window, seconds (the bucket width)
  ARGV[7] firstBucket       bucket of KEYS[2]
  ARGV[8] shardIndex
  ARGV[9] couponId
  ARGV[10] nowMs
  ARGV[11] creditRetentionMs  how long applied credit ids are remembered
  ARGV[12] creditEpoch      the shard's recovery epoch the credits were planned under (from a 'short' answer;
                            empty without credits)
  ARGV[13], ARGV[14], ...   optional pairs creditId, quantity

  Returns
    { 1, remaining }                   deducted; remaining = shard avail after it
    { 2, remaining, compensated }      replay of a recorded deduction (compensated: 1 if given back since)
    {-1, avail, epoch }                the shard holds fewer than `quantity` units; epoch: its recovery epoch
    {-2, held }                        the user already holds `held` units; quantity would pass the limit
    {-3, field, recorded }             request_id was first used with another user_id or quantity, or by a
                                       Reserve (field 'kind', recorded 'reserve': a record value that does not
                                       start with a digit)
    {-4 }                              the shard hash is missing (evicted or lost): recover the coupon, then retry
    {-5, waitMs }                      the coupon is paused for recovery (shard-pause-1.lua); retry after waitMs
    {-7 }                              a recovery ran since the credits were planned: none applied. It counted
                                       their units where they were (a live source's transit, which the sweeper
                                       lands later, or a lost source's stock, which it rebuilt): drop them
    {-8 }                              the caller's clock is more than half a window off the server's: nothing
                                       changed
]]
-- @include credits
-- @include paused-for
-- @include buckets
-- @include shard-ops
local shardKey = KEYS[1]
local creditsKey = KEYS[7]

local requestId = ARGV[1]
local field = ARGV[2]
local userId = ARGV[3]
local quantity = ARGV[4]
local limit = tonumber(ARGV[5])
local windowSec = tonumber(ARGV[6])
local firstBucket = tonumber(ARGV[7])
local shardIndex = ARGV[8]
local couponId = ARGV[9]
local nowMs = tonumber(ARGV[10])
local creditRetentionMs = tonumber(ARGV[11])

local state = redis.call('HMGET', shardKey, 'avail', 'net', 'ep', 'pz')
if not state[1] then
  return { -4 }
end
-- A recovery holds the coupon still while it measures and rebuilds it.
local wait = pausedFor(state[4])
if wait > 0 then return { -5, wait } end
local slot = writeSlot(windowSec, firstBucket)
if not slot then return { -8 } end

-- Credits first: units moved here for this request must land even when it turns out to be a replay.
if not applyCredits(shardKey, creditsKey, ARGV[12], 13, nowMs, creditRetentionMs) then return { -7 } end

if #ARGV >= 13 then state[1] = redis.call('HGET', shardKey, 'avail') end
local run = openRun(state, windowSec, firstBucket, slot, shardIndex, couponId, ARGV[10])
local reply = { deductRecorded(run, requestId, field, userId, quantity, limit) }
closeRun(run)
return reply
