--[[
  First step of a fallback move: takes up to `want` units out of this (source) shard and records the move
  here, so a sweeper can finish it if the mover dies. The units are then `transit` until move-ack-2 runs after
  the target was credited: at every moment each unit is in exactly one of avail or transit (of some shard) or
  in a target's avail with its move still recorded here, never created nor destroyed.

  KEYS[1] shard hash   <ns>:{<tag>}:shard   (mo: moves started here, a counter: Reconcile reads it again after
                                          all shards, to see a move that began while it read them)
  KEYS[2] moves        <ns>:{<tag>}:moves    hash moveId -> "target|quantity|startedMs"

  ARGV[1] moveId
  ARGV[2] target       index of the shard the units go to
  ARGV[3] want         integer >= 1
  ARGV[4] nowMs

  Returns
    n >= 1  units taken (for a moveId seen before: the units it took then)
    0       nothing to take
   -4       the shard hash is missing
   -5       the coupon is paused for recovery: take nothing from here
]]
-- @include paused-for
local shardKey = KEYS[1]
local movesKey = KEYS[2]
local moveId = ARGV[1]
local target = ARGV[2]
local want = tonumber(ARGV[3])
local nowMs = ARGV[4]

local existing = redis.call('HGET', movesKey, moveId)
if existing then
  local _, _, quantity = string.find(existing, '^[^|]*|([^|]*)|')
  return tonumber(quantity)
end
local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then
  return -4
end
if pausedFor(state[2]) > 0 then return -5 end
local avail = tonumber(state[1])
local take = math.min(avail, want)
if take <= 0 then
  return 0
end
redis.call('HINCRBY', shardKey, 'avail', -take)
redis.call('HINCRBY', shardKey, 'transit', take)
redis.call('HINCRBY', shardKey, 'mo', 1)
redis.call('HSET', movesKey, moveId, target .. '|' .. take .. '|' .. nowMs)
return take
