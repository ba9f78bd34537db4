--[[
  Benchmark baseline "lock": releases the lock only if this caller still owns it (the owner check of
  Redisson-style locks), so a caller whose lease expired cannot free someone else's lock.

  KEYS[1] lock key   <ns>:lk:{<couponId>}:lock   string: the owner's token

  ARGV[1] token      the value this caller set with SET NX PX

  Returns 1 when released, 0 when the lock was not (or no longer) ours.
]]
local lockKey = KEYS[1]
local token = ARGV[1]

if redis.call('GET', lockKey) == token then
  return redis.call('DEL', lockKey)
end
return 0
