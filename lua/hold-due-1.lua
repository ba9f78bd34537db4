--[[
  What a sweeper should expire on one shard: the holds whose expiry has passed on the Redis server's clock.
  Reads only.

  KEYS[1] hold expiries   <ns>:{<tag>}:holds   (zset "<requestId>|<userId>" -> expiresMs)

  ARGV[1] limit           most members to return

  Returns { open, member1, member2, ... }: open = holds still in the set (due ones included)
]]
-- @include paused-for
local now = serverNowMs()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local out = { redis.call('ZCARD', KEYS[1]) }
for i = 1, #due do out[#out + 1] = due[i] end
return out
