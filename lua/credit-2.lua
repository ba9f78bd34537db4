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
-- @include paused-for
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
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end
if redis.call('ZSCORE', creditsKey, creditId) then
  return { 0, tonumber(redis.call('HGET', shardKey, 'avail')) }
end
local avail = redis.call('HINCRBY', shardKey, 'avail', quantity)
redis.call('ZADD', creditsKey, nowMs, creditId)
redis.call('ZREMRANGEBYSCORE', creditsKey, '-inf', nowMs - retentionMs)
return { 1, avail }
