--[[
  Adds units to one shard at most once per credit id: a fallback move landing (replayed by the sweeper), a
  restock's share.

  KEYS[1] shard hash   <ns>:{<tag>}:shard
  KEYS[2] credits      <ns>:{<tag>}:credits   zset creditId -> appliedMs

  ARGV[1] creditId     M:<moveId> | R:<requestId>
  ARGV[2] quantity     integer >= 0
  ARGV[3] nowMs
  ARGV[4] retentionMs  how long applied ids are remembered
  ARGV[5] epoch        optional: the shard's recovery epoch (`ep`, '' when never set) the credit was planned
                       under. The move sweeper passes the one it read before it read the move: a recovery since
                       then may have counted the move's units elsewhere (its source's slot lost whole), so the
                       credit must not land. Restock credits pass none.

  Returns
    { 1, avail }  applied
    { 0, avail }  applied before; nothing changed
    {-4 }         the shard hash is missing
    {-5, waitMs } the coupon is paused for recovery (which settles this credit's fate); retry after waitMs
    {-6 }         ARGV[5] given and the shard's epoch is another: a recovery ran since; nothing changed
]]
-- @include paused-for
local shardKey = KEYS[1]
local creditsKey = KEYS[2]
local creditId = ARGV[1]
local quantity = ARGV[2]
local nowMs = tonumber(ARGV[3])
local retentionMs = tonumber(ARGV[4])

local state = redis.call('HMGET', shardKey, 'avail', 'pz', 'ep')
if not state[1] then
  return { -4 }
end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end
if ARGV[5] and (state[3] or '') ~= ARGV[5] then return { -6 } end
if redis.call('ZSCORE', creditsKey, creditId) then
  return { 0, tonumber(redis.call('HGET', shardKey, 'avail')) }
end
local avail = redis.call('HINCRBY', shardKey, 'avail', quantity)
redis.call('ZADD', creditsKey, nowMs, creditId)
redis.call('ZREMRANGEBYSCORE', creditsKey, '-inf', nowMs - retentionMs)
return { 1, avail }
