--[[
  Takes `quantity` units from one shard for one request, atomically: idempotency record, per-user limit,
  stock, decrement, and the outbox event that settlement will carry to MySQL. Credits listed after the fixed
  arguments (fallback moves landing here) are applied first, each at most once.

  KEYS[1] shard hash      <ns>:{<tag>}:shard        fields avail, transit, net
  KEYS[2] request record  <ns>:{<tag>}:req:<requestId>
  KEYS[3] user count      <ns>:{<tag>}:user:<userId>  (touched only when limit > 0)
  KEYS[4] outbox stream   <ns>:{<tag>}:outbox
  KEYS[5] credits         <ns>:{<tag>}:credits      (zset of applied credit ids)

  ARGV[1] requestId
  ARGV[2] userId          may be empty when limit = 0
  ARGV[3] quantity        integer >= 1
  ARGV[4] limit           per-user limit, 0 = unlimited
  ARGV[5] windowSec       idempotency record lifetime, seconds
  ARGV[6] shardIndex
  ARGV[7] couponId
  ARGV[8] nowMs
  ARGV[9] creditRetentionMs   how long applied credit ids are remembered
  ARGV[10] creditEpoch       the shard's recovery epoch the credits were planned under (from a 'short' answer;
                              empty without credits)
  ARGV[11], ARGV[12], ...     optional pairs creditId, quantity

  Returns
    { 1, remaining }                   deducted; remaining = shard avail after it
    { 2, remaining, compensated }      replay of a recorded deduction (compensated: 1 if given back since)
    {-1, avail, epoch }                the shard holds fewer than `quantity` units; epoch: its recovery epoch
    {-2, held }                        the user already holds `held` units; quantity would pass the limit
    {-3, field, recorded }             request_id was first used with another user_id or quantity, or by a
                                       Reserve (field 'kind', recorded 'reserve')
    {-4 }                              the shard hash is missing (evicted or lost): recover the coupon, then retry
    {-5, waitMs }                      the coupon is paused for recovery (shard-pause-1.lua); retry after waitMs
    {-7 }                              a recovery ran since the credits were planned: none applied. It counted
                                       their units where they were (a live source's transit, which the sweeper
                                       lands later, or a lost source's stock, which it rebuilt): drop them
]]
-- @include paused-for
local shardKey = KEYS[1]
local requestKey = KEYS[2]
local userKey = KEYS[3]
local outboxKey = KEYS[4]
local creditsKey = KEYS[5]

local requestId = ARGV[1]
local userId = ARGV[2]
local quantity = tonumber(ARGV[3])
local limit = tonumber(ARGV[4])
local windowSec = ARGV[5]
local shardIndex = ARGV[6]
local couponId = ARGV[7]
local nowMs = tonumber(ARGV[8])
local creditRetentionMs = tonumber(ARGV[9])

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then
  return { -4 }
end
-- A recovery holds the coupon still while it measures and rebuilds it.
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

-- Credits first: units moved here for this request must land even when it turns out to be a replay.
if #ARGV >= 12 then
  if (redis.call('HGET', shardKey, 'ep') or '') ~= ARGV[10] then
    return { -7 }
  end
  for i = 11, #ARGV - 1, 2 do
    if not redis.call('ZSCORE', creditsKey, ARGV[i]) then
      redis.call('HINCRBY', shardKey, 'avail', ARGV[i + 1])
      redis.call('ZADD', creditsKey, nowMs, ARGV[i])
    end
  end
  redis.call('ZREMRANGEBYSCORE', creditsKey, '-inf', nowMs - creditRetentionMs)
end

local recorded = redis.call('HMGET', requestKey, 'u', 'q', 'r', 'c', 'h')
-- A hold's record (hold-reserve-5.lua), even a confirmed one: the request id belongs to a Reserve.
if recorded[5] then return { -3, 'kind', 'reserve' } end
if recorded[2] then
  if recorded[1] ~= userId then return { -3, 'user_id', recorded[1] } end
  if tonumber(recorded[2]) ~= quantity then return { -3, 'quantity', recorded[2] } end
  return { 2, tonumber(recorded[3]), recorded[4] == '1' and 1 or 0 }
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
redis.call('HINCRBY', shardKey, 'net', quantity)
if limit > 0 then
  redis.call('INCRBY', userKey, quantity)
end
redis.call('HSET', requestKey, 'u', userId, 'q', quantity, 'r', remaining, 's', shardIndex, 't', nowMs)
redis.call('EXPIRE', requestKey, windowSec)
redis.call('XADD', outboxKey, '*', 'k', 'D', 'c', couponId, 'r', requestId, 'u', userId,
  'q', quantity, 's', shardIndex, 't', nowMs)
return { 1, remaining }
