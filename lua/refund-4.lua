--[[
  Gives a refused deduction's units back to the shard that served it, at most once (by credit id), and closes
  the deduction's request record as compensated: a later Compensate of that request then answers
  ALREADY_COMPENSATED instead of handing the units out a second time. When a Compensate got there first, its
  own outbox event carries the give-back and nothing is added here.

  KEYS[1] shard hash      <ns>:{<tag>}:shard
  KEYS[2] credits         <ns>:{<tag>}:credits            zset creditId -> appliedMs
  KEYS[3] request record  <ns>:{<tag>}:req:<requestId>    (may have expired)
  KEYS[4] user count      <ns>:{<tag>}:user:<userId>      (touched only when limited = 1)

  ARGV[1] creditId        A:<eventId>
  ARGV[2] quantity        integer >= 1
  ARGV[3] nowMs
  ARGV[4] retentionMs     how long applied credit ids are remembered
  ARGV[5] limited         1 when the coupon has a per-user limit (the user's count is given back too)

  Returns
    { 1, avail }  refunded: avail + quantity, net - quantity
    { 0 }         refunded before; nothing changed
    { 2 }         a Compensate had already given the units back; nothing changed
    {-4 }         the shard hash is missing
]]
local shardKey = KEYS[1]
local creditsKey = KEYS[2]
local requestKey = KEYS[3]
local userKey = KEYS[4]

local creditId = ARGV[1]
local quantity = tonumber(ARGV[2])
local nowMs = tonumber(ARGV[3])
local retentionMs = tonumber(ARGV[4])
local limited = ARGV[5] == '1'

if redis.call('EXISTS', shardKey) == 0 then
  return { -4 }
end
if redis.call('ZSCORE', creditsKey, creditId) then
  return { 0 }
end
-- Not recorded as a credit: asked again, the answer stays "compensated before".
if redis.call('HGET', requestKey, 'c') == '1' then
  return { 2 }
end
redis.call('ZADD', creditsKey, nowMs, creditId)
redis.call('ZREMRANGEBYSCORE', creditsKey, '-inf', nowMs - retentionMs)
local avail = redis.call('HINCRBY', shardKey, 'avail', quantity)
redis.call('HINCRBY', shardKey, 'net', -quantity)
if redis.call('EXISTS', requestKey) == 1 then
  redis.call('HSET', requestKey, 'c', 1)
end
if limited then
  local held = tonumber(redis.call('GET', userKey) or '0')
  redis.call('SET', userKey, math.max(0, held - quantity))
end
return { 1, avail }
