--[[
  Last step of a fallback move, after the target shard was credited: forgets the move and its transit units.

  KEYS[1] shard hash   <ns>:{<tag>}:shard
  KEYS[2] moves        <ns>:{<tag>}:moves

  ARGV[1] moveId

  Returns
    1  acknowledged
    0  unknown moveId (already acknowledged)
   -4  the shard hash is missing: nothing is changed (a hash holding only `transit` would pass for a shard;
       the move stays recorded for whatever restores the shard)
   -5  the coupon is paused for recovery, which counts this move as it stands: acknowledge later
]]
-- @include paused-for
local shardKey = KEYS[1]
local movesKey = KEYS[2]
local moveId = ARGV[1]

local existing = redis.call('HGET', movesKey, moveId)
if not existing then
  return 0
end
local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then
  return -4
end
if pausedFor(state[2]) > 0 then return -5 end
local _, _, quantity = string.find(existing, '^[^|]*|([^|]*)|')
redis.call('HINCRBY', shardKey, 'transit', -tonumber(quantity))
redis.call('HDEL', movesKey, moveId)
return 1
