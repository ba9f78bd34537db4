--[[
  Adds units to one shard at most once per credit id: a fallback move landing (replayed by the sweeper), a
  restock's share.

  KEYS[1] shard hash   <ns>:{<tag>}:shard
  KEYS[2] credits      <ns>:{<tag>}:credits   zset creditId -> appliedMs

  ARGV[1] creditId     M:<moveId> | R:<requestId>
  ARGV[2] quantity     integer >= 0
  ARGV[3] nowMs
  ARGV[4] retentionMs  how long applied ids are remembered

  Returns
    { 1, avail }  applied
    { 0, avail }  applied before; nothing changed
    {-4 }         the shard hash is missing
    {-5, waitMs } the coupon is paused for recovery (which settles this credit's fate); retry after waitMs
]]
local shardKey = KEYS[1]
local creditsKey = KEYS[2]
local creditId = ARGV[1]
local quantity = ARGV[2]
local nowMs = tonumber(ARGV[3])
local retentionMs = tonumber(ARGV[4])

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then
  return { -4 }
end
if state[2] then
  local t = redis.call('TIME')
  local wait = tonumber(state[2]) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  if wait > 0 then return { -5, wait } end
end
if redis.call('ZSCORE', creditsKey, creditId) then
  return { 0, tonumber(redis.call('HGET', shardKey, 'avail')) }
end
local avail = redis.call('HINCRBY', shardKey, 'avail', quantity)
redis.call('ZADD', creditsKey, nowMs, creditId)
redis.call('ZREMRANGEBYSCORE', creditsKey, '-inf', nowMs - retentionMs)
return { 1, avail }
