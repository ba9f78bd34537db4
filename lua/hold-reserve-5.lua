--[[
  Reserve: takes `quantity` units of one shard out of available stock into a hold that ends confirmed
  (hold-confirm-5.lua), released (hold-release-4.lua) or expired (hold-expire-4.lua) at expiresMs, taken from
  the Redis server's clock so that every instance judges expiry alike. The same checks as deduct-5.lua, in the
  same order: pause, fallback credits, idempotency record, per-user limit (held units count), stock. No outbox
  event: MySQL's remaining still includes held units; only a confirmation is a deduction.

  KEYS[1] shard hash      <ns>:{<tag>}:shard        fields avail, transit, net, held
  KEYS[2] request record  <ns>:{<tag>}:req:<requestId>   (a hold's record: h state, hq units, e expiresMs,
                          u, s, t, r as a deduction's, l = 1 when counted toward the user's limit, b = the
                          shard's rebuild mark then; a confirm adds q = units kept, as a deduction's record)
  KEYS[3] user count      <ns>:{<tag>}:user:<userId>  (touched only when limit > 0)
  KEYS[4] credits         <ns>:{<tag>}:credits
  KEYS[5] hold expiries   <ns>:{<tag>}:holds        (zset "<requestId>|<userId>" -> expiresMs)

  ARGV[1] requestId
  ARGV[2] userId          may be empty when limit = 0
  ARGV[3] quantity        integer >= 1
  ARGV[4] limit           per-user limit, 0 = unlimited
  ARGV[5] windowSec       idempotency record lifetime, seconds (kept at least ttl + window)
  ARGV[6] shardIndex
  ARGV[7] ttlMs           how long the hold lasts from now (server time)
  ARGV[8] nowMs           client clock, recorded as the request's time
  ARGV[9] creditRetentionMs
  ARGV[10] creditEpoch    as in deduct-5.lua
  ARGV[11], ARGV[12], ... optional pairs creditId, quantity

  Returns
    { 1, remaining, expiresMs }        held; remaining = shard avail after it
    { 2, remaining, state, expiresMs } replay of this hold (state h | c | r | x)
    {-1, avail, epoch }                the shard holds fewer than `quantity` units
    {-2, held }                        the user's units (deducted + held) would pass the limit
    {-3, field, recorded }             request_id was used with another user_id or quantity, or by a Deduct
                                       (field 'kind', recorded 'deduct')
    {-4 }                              the shard hash is missing: recover the coupon, then retry
    {-5, waitMs }                      the coupon is paused for recovery
    {-7 }                              stale credits (as deduct-5.lua)
]]
-- @include paused-for
local shardKey = KEYS[1]
local requestKey = KEYS[2]
local userKey = KEYS[3]
local creditsKey = KEYS[4]
local holdsKey = KEYS[5]

local requestId = ARGV[1]
local userId = ARGV[2]
local quantity = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local windowSec = tonumber(ARGV[5])
local shardIndex = ARGV[6]
local ttlMs = tonumber(ARGV[7])
local nowMs = ARGV[8]
local creditRetentionMs = tonumber(ARGV[9])

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then
  return { -4 }
end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

if #ARGV >= 12 then
  if (redis.call('HGET', shardKey, 'ep') or '') ~= ARGV[10] then
    return { -7 }
  end
  for i = 11, #ARGV - 1, 2 do
    if not redis.call('ZSCORE', creditsKey, ARGV[i]) then
      redis.call('HINCRBY', shardKey, 'avail', ARGV[i + 1])
      redis.call('ZADD', creditsKey, tonumber(nowMs), ARGV[i])
    end
  end
  redis.call('ZREMRANGEBYSCORE', creditsKey, '-inf', tonumber(nowMs) - creditRetentionMs)
end

local recorded = redis.call('HMGET', requestKey, 'u', 'hq', 'r', 'h', 'e', 'q')
if recorded[4] then
  if recorded[1] ~= userId then return { -3, 'user_id', recorded[1] } end
  if tonumber(recorded[2]) ~= quantity then return { -3, 'quantity', recorded[2] } end
  return { 2, tonumber(recorded[3]), recorded[4], tonumber(recorded[5]) }
end
if recorded[6] then
  return { -3, 'kind', 'deduct' }
end

if limit > 0 then
  local held = tonumber(redis.call('GET', userKey) or '0')
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
  redis.call('INCRBY', userKey, quantity)
end
local expiresMs = serverNowMs() + ttlMs
redis.call('HSET', requestKey, 'u', userId, 'hq', quantity, 'r', remaining, 's', shardIndex, 't', nowMs,
  'h', 'h', 'e', expiresMs, 'l', limit > 0 and 1 or 0, 'b', redis.call('HGET', shardKey, 'rb') or '')
-- The record outlives the hold by the idempotency window, whatever the hold's TTL.
redis.call('PEXPIRE', requestKey, ttlMs + windowSec * 1000)
redis.call('ZADD', holdsKey, expiresMs, requestId .. '|' .. userId)
return { 1, remaining, expiresMs }
