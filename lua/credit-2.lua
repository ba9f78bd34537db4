--[[
  Adds units to one shard at most once per credit id: a fallback move landing (replayed by the sweeper), a
  restock's share, or units refunded after settlement refused an event.

  KEYS[1] shard hash   <ns>:{<tag>}:shard
  KEYS[2] credits      <ns>:{<tag>}:credits   zset creditId -> appliedMs

  ARGV[1] creditId     M:<moveId> | R:<requestId> | A:<eventId>
  ARGV[2] quantity     integer >= 0
  ARGV[3] nowMs
  ARGV[4] retentionMs  how long applied ids are remembered
  ARGV[5] netDelta     added to the shard's net counter (a refund of a refused deduction: -quantity; else 0)

  Returns
    { 1, avail }  applied
    { 0, avail }  applied before; nothing changed
    {-4 }         the shard hash is missing
]]
local shardKey = KEYS[1]
local creditsKey = KEYS[2]
local creditId = ARGV[1]
local quantity = ARGV[2]
local nowMs = tonumber(ARGV[3])
local retentionMs = tonumber(ARGV[4])
local netDelta = tonumber(ARGV[5] or '0')

if redis.call('EXISTS', shardKey) == 0 then
  return { -4 }
end
if redis.call('ZSCORE', creditsKey, creditId) then
  return { 0, tonumber(redis.call('HGET', shardKey, 'avail')) }
end
local avail = redis.call('HINCRBY', shardKey, 'avail', quantity)
if netDelta ~= 0 then
  redis.call('HINCRBY', shardKey, 'net', netDelta)
end
redis.call('ZADD', creditsKey, nowMs, creditId)
redis.call('ZREMRANGEBYSCORE', creditsKey, '-inf', nowMs - retentionMs)
return { 1, avail }
