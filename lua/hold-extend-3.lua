--[[
  ExtendHold: moves an open hold's expiry to now + ttlMs on the Redis server's clock, unless it has expired
  already (then the sweeper, or a Confirm/Release, gives it back).

  KEYS[1] shard hash      <ns>:{<tag>}:shard
  KEYS[2] request record  <ns>:{<tag>}:req:<requestId>
  KEYS[3] hold expiries   <ns>:{<tag>}:holds

  ARGV[1] requestId
  ARGV[2] ttlMs
  ARGV[3] windowSec       the record outlives the hold by this much

  Returns
    { 1, expiresMs }  extended
    { 3 }             no hold is recorded under requestId
    { 4 }             confirmed
    { 5 }             expired
    { 6 }             released
    {-4 }             the shard hash is missing
    {-5, waitMs }     paused for recovery
]]
-- @include paused-for
local shardKey = KEYS[1]
local requestKey = KEYS[2]
local holdsKey = KEYS[3]
local requestId = ARGV[1]
local ttlMs = tonumber(ARGV[2])

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

local rec = redis.call('HMGET', requestKey, 'u', 'h', 'e')
local st = rec[2]
if not st then return { 3 } end
if st == 'c' then return { 4 } end
if st == 'x' then return { 5 } end
if st == 'r' then return { 6 } end
local now = serverNowMs()
if tonumber(rec[3]) <= now then return { 5 } end
local expiresMs = now + ttlMs
redis.call('HSET', requestKey, 'e', expiresMs)
redis.call('PEXPIRE', requestKey, ttlMs + tonumber(ARGV[3]) * 1000)
redis.call('ZADD', holdsKey, expiresMs, requestId .. '|' .. rec[1])
return { 1, expiresMs }
