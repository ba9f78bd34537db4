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

  Returns
    { 1, remaining, expiresMs }        held; remaining = shard avail after it
    { 2, remaining, state, expiresMs } replay of this hold (state h | c | r | x; expiresMs 0 once confirmed)
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
local shardKey = KEYS[1]
local usersKey = KEYS[5]
local creditsKey = KEYS[6]
local holdsKey = KEYS[7]

local requestId = ARGV[1]
local field = ARGV[2]
local userId = ARGV[3]
local quantity = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local windowSec = tonumber(ARGV[6])
local firstBucket = tonumber(ARGV[7])
local ttlMs = tonumber(ARGV[9])
local nowMs = ARGV[10]
local creditRetentionMs = tonumber(ARGV[11])

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end
local slot = writeSlot(windowSec, firstBucket)
if not slot then return { -8 } end

if not applyCredits(shardKey, creditsKey, ARGV[12], 13, tonumber(nowMs), creditRetentionMs) then return { -7 } end

local packed = findField(2, field)
if packed then
  local h = unpackHold(packed)
  if h then
    if h.u ~= userId then return { -3, 'user_id', h.u } end
    if h.hq ~= quantity then return { -3, 'quantity', tostring(h.hq) } end
    return { 2, tonumber(h.r), h.st, h.e }
  end
  local rec = unpackRecord(packed)
  -- A confirmed hold is a deduction's record flagged 'h' (its units kept are its quantity now).
  if rec.q and hasFlag(rec, 'h') then
    if rec.u ~= userId then return { -3, 'user_id', rec.u } end
    return { 2, tonumber(rec.r), 'c', 0 }
  end
  return { -3, 'kind', 'deduct' }
end

if limit > 0 then
  local held = tonumber(redis.call('HGET', usersKey, userId) or '0')
  if held + quantity > limit then
    return { -2, held }
  end
end

local avail = tonumber(redis.call('HGET', shardKey, 'avail'))
if avail < quantity then
  return { -1, avail, redis.call('HGET', shardKey, 'ep') or '' }
end

local remaining = redis.call('HINCRBY', shardKey, 'avail', -quantity)
redis.call('HINCRBY', shardKey, 'held', quantity)
if limit > 0 then
  redis.call('HINCRBY', usersKey, userId, quantity)
end
local expiresMs = serverNowMs() + ttlMs
writeField(2, slot, firstBucket, windowSec, field, packHold({
  st = 'h', hq = quantity, e = expiresMs, l = limit > 0, b = redis.call('HGET', shardKey, 'rb') or '',
  r = remaining, t = nowMs, u = userId,
}))
redis.call('ZADD', holdsKey, expiresMs, requestId .. '|' .. userId)
return { 1, remaining, expiresMs }
