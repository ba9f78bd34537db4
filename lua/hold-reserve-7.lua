--[[
  Reserve: takes `quantity` units of one shard out of available stock into a hold that ends confirmed
  (hold-confirm-7.lua), released (hold-release-6.lua) or expired (hold-expire-6.lua) at expiresMs, taken from
  the Redis server's clock so that every instance judges expiry alike. The same checks as deduct-7.lua, in the
  same order: pause, record bucket, fallback credits, idempotency record, per-user limit (held units count),
  stock. No outbox event: MySQL's remaining still includes held units; only a confirmation is a deduction.

  KEYS[1] shard hash        <ns>:{<tag>}:shard        fields avail, transit, net, held
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>  buckets first .. first + 2 (includes/buckets.lua); the
                                                      hold is a field there (includes/hold-record.lua)
  KEYS[5] user counts       <ns>:{<tag>}:users        (touched only when limit > 0)
  KEYS[6] credits           <ns>:{<tag>}:credits
  KEYS[7] hold expiries     <ns>:{<tag>}:holds        zset "<requestId>|<userId>" -> expiresMs

  ARGV[1] requestId
  ARGV[2] recordField       the request id as a record field (keys.ts recordField)
  ARGV[3] userId            may be empty when limit = 0
  ARGV[4] quantity          integer >= 1
  ARGV[5] limit             per-user limit, 0 = unlimited
  ARGV[6] windowSec         idempotency window (bucket width), seconds; longer than any hold
  ARGV[7] firstBucket
  ARGV[8] shardIndex
  ARGV[9] ttlMs             how long the hold lasts from now (server time)
  ARGV[10] nowMs            client clock, recorded as the request's time
  ARGV[11] creditRetentionMs
  ARGV[12] creditEpoch      as in deduct-7.lua
  ARGV[13], ARGV[14], ...   optional pairs creditId, quantity

  Returns (the steps from the idempotency record on are lua/includes/shard-reserve.lua's, which the group
  commit, shard-batch-8.lua, runs too)
    { 1, remaining, expiresMs }        held; remaining = shard avail after it
    { 2, remaining, state }            replay of this hold (state h | c | r | x: c once confirmed)
    {-1, avail, epoch }                the shard holds fewer than `quantity` units
    {-2, held }                        the user's units (deducted + held) would pass the limit
    {-3, field, recorded }             request_id was used with another user_id or quantity, or by a Deduct
                                       (field 'kind', recorded 'deduct')
    {-4 }                              the shard hash is missing: recover the coupon, then retry
    {-5, waitMs }                      the coupon is paused for recovery
    {-7 }                              stale credits (as deduct-7.lua)
    {-8 }                              the caller's clock is more than half a window off the server's
]]
-- @include credits
-- @include paused-for
-- @include buckets
-- @include hold-record
-- @include shard-ops
-- @include shard-reserve
local shardKey = KEYS[1]
local creditsKey = KEYS[6]

local requestId = ARGV[1]
local field = ARGV[2]
local userId = ARGV[3]
local quantity = ARGV[4]
local limit = tonumber(ARGV[5])
local windowSec = tonumber(ARGV[6])
local firstBucket = tonumber(ARGV[7])
local shardIndex = ARGV[8]
local ttlMs = tonumber(ARGV[9])
local nowMs = ARGV[10]
local creditRetentionMs = tonumber(ARGV[11])

local state = redis.call('HMGET', shardKey, 'avail', 'net', 'ep', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[4])
if wait > 0 then return { -5, wait } end
local slot = writeSlot(windowSec, firstBucket)
if not slot then return { -8 } end

if not applyCredits(shardKey, creditsKey, ARGV[12], 13, tonumber(nowMs), creditRetentionMs) then return { -7 } end

if #ARGV >= 13 then state[1] = redis.call('HGET', shardKey, 'avail') end
-- No outbox event (MySQL's remaining still includes held units), so the coupon id is not needed.
local run = openRun(state, windowSec, firstBucket, slot, shardIndex, '', nowMs)
run.holdsKey = KEYS[7]
local reply = { reserveRecorded(run, requestId, field, userId, quantity, limit, ttlMs) }
closeRun(run)
return reply
