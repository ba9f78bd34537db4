-- Shared by the scripts that take units for a request (inserted where a script says `-- @include credits`).
-- applyCredits: lands the fallback moves planned for this request on this shard, each at most once (the credits
-- sorted set remembers applied ids for retentionMs), before the request itself runs — units moved here must land
-- even when the request turns out to be a replay. Returns false, applying none, when a recovery ran since they
-- were planned (the shard's epoch `ep` moved): the recovery already counted those units where they were.
-- Credits are the ARGV pairs creditId, quantity from index `from` on; `epoch` is the one they were planned under.
local function applyCredits(shardKey, creditsKey, epoch, from, nowMs, retentionMs)
  if #ARGV < from + 1 then return true end
  if (redis.call('HGET', shardKey, 'ep') or '') ~= epoch then return false end
  for i = from, #ARGV - 1, 2 do
    if not redis.call('ZSCORE', creditsKey, ARGV[i]) then
      redis.call('HINCRBY', shardKey, 'avail', ARGV[i + 1])
      redis.call('ZADD', creditsKey, nowMs, ARGV[i])
    end
  end
  redis.call('ZREMRANGEBYSCORE', creditsKey, '-inf', nowMs - retentionMs)
  return true
end
