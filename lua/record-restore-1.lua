--[[
  Puts back one request record that a lost shard took with it, from the ledger or an event still in flight,
  so a retry of that request replays instead of deducting again. Never overwrites a record that exists.

  KEYS[1] request record  <ns>:{<tag>}:req:<requestId>

  ARGV[1] userId
  ARGV[2] quantity
  ARGV[3] shardIndex
  ARGV[4] occurredMs
  ARGV[5] compensated   1 when the deduction was given back since
  ARGV[6] ttlSec        what is left of the idempotency window (>= 1)

  Returns
    1  restored
    0  a record exists: nothing changed
]]
local key = KEYS[1]
if redis.call('EXISTS', key) == 1 then return 0 end
redis.call('HSET', key, 'u', ARGV[1], 'q', ARGV[2], 'r', 0, 's', ARGV[3], 't', ARGV[4])
if ARGV[5] == '1' then redis.call('HSET', key, 'c', 1) end
redis.call('EXPIRE', key, ARGV[6])
return 1
