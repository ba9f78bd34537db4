--[[
  Ends a recovery's pause on one shard, if it is still the holder's, and moves the shard to a new recovery
  epoch: fallback credits planned before the recovery are then refused (deduct-7.lua), since the recovery
  already counted their units where they were.

  KEYS[1] shard hash   <ns>:{<tag>}:shard

  ARGV[1] token        the recovery's lease token

  Returns
    1  resumed
    0  not paused by this token (lapsed, replaced or missing): nothing changed
]]
local shardKey = KEYS[1]
local token = ARGV[1]
if redis.call('HGET', shardKey, 'pt') ~= token then
  return 0
end
redis.call('HDEL', shardKey, 'pz', 'pt')
redis.call('HSET', shardKey, 'ep', token)
return 1
