--[[
  Ends a recovery's pause on one shard, if it is still the holder's.

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
return 1
