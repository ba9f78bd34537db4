--[[
  Re-creates a lost shard of a coupon for the recovery that holds the coupon's pause: created paused (by the
  same token) so nothing sells from it before the recovery has restored its request records and user counts
  and resumes every shard. The credit ids given are recorded as applied: shares of restocks that MySQL (and so
  this shard's computed stock) already includes must not be credited again by a late restock.

  KEYS[1] shard hash   <ns>:{<tag>}:shard
  KEYS[2] outbox       <ns>:{<tag>}:outbox     (stream; the relay consumer group is created on it)
  KEYS[3] credits      <ns>:{<tag>}:credits

  ARGV[1] token        the recovery's lease token
  ARGV[2] holdMs       how long from now the pause lasts
  ARGV[3] avail        units to put in the shard
  ARGV[4] net          units the shard counts as deducted (its share of the coupon's net deductions)
  ARGV[5] group        relay consumer group name
  ARGV[6] nowMs
  ARGV[7], …           optional credit ids to record as applied

  Returns
    1  created
    2  already created by this token (a repeated call): nothing changed
    0  the shard exists and is not ours: nothing changed
]]
-- @include paused-for
local shardKey = KEYS[1]
local outboxKey = KEYS[2]
local creditsKey = KEYS[3]
local token = ARGV[1]
local holdMs = tonumber(ARGV[2])

if redis.call('EXISTS', shardKey) == 1 then
  if redis.call('HGET', shardKey, 'pt') == token then return 2 end
  return 0
end
local now = serverNowMs()
redis.call('HSET', shardKey, 'avail', ARGV[3], 'transit', 0, 'net', ARGV[4], 'pz', now + holdMs, 'pt', token, 'rb', ARGV[6], 'ep', token)
pcall(redis.call, 'XGROUP', 'CREATE', outboxKey, ARGV[5], '0', 'MKSTREAM')
for i = 7, #ARGV do
  redis.call('ZADD', creditsKey, ARGV[6], ARGV[i])
end
return 1
