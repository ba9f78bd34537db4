--[[
  Creates one shard of a coupon with its first stock, unless the shard already exists. Used to preheat a new
  coupon and to reload a shard whose key vanished: never overwrites a live shard, so two instances racing to
  load the same shard load it once.

  KEYS[1] shard hash   <ns>:{<tag>}:shard
  KEYS[2] outbox       <ns>:{<tag>}:outbox   (stream; the relay consumer group is created on it)

  ARGV[1] avail        units to put in the shard (integer >= 0)
  ARGV[2] group        relay consumer group name
  ARGV[3] net          units the shard counts as deducted (0 when new; a reloaded shard takes over its share
                       so that total - sum(net) stays the coupon's true remainder)

  Returns
     1  created
     0  the shard already existed; nothing changed
]]
local shardKey = KEYS[1]
local outboxKey = KEYS[2]
local avail = ARGV[1]
local group = ARGV[2]
local net = ARGV[3] or '0'

if redis.call('EXISTS', shardKey) == 1 then
  return 0
end
redis.call('HSET', shardKey, 'avail', avail, 'transit', 0, 'net', net)
-- The group may already exist when only the shard hash was lost.
pcall(redis.call, 'XGROUP', 'CREATE', outboxKey, group, '0', 'MKSTREAM')
return 1
