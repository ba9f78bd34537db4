--[[
  Expires one hold whose time has come on the Redis server's clock: gives its units back. Any instance's
  sweeper may run it, any number of times: only the first run that finds the hold open and due changes
  anything (the script is atomic), so a hold expires exactly once whichever instances are alive.

  KEYS[1] shard hash      <ns>:{<tag>}:shard
  KEYS[2] request record  <ns>:{<tag>}:req:<requestId>
  KEYS[3] user count      <ns>:{<tag>}:user:<userId>
  KEYS[4] hold expiries   <ns>:{<tag>}:holds

  ARGV[1] member          "<requestId>|<userId>" as in KEYS[4]

  Returns
    { 1, released }   expired now
    { 0 }             nothing to do: not open any more (member dropped), or not due (extended)
    {-4 }             the shard hash is missing (the member is left for the recovery to settle)
    {-5, waitMs }     paused for recovery: try on a later sweep
]]
-- @include paused-for
-- @include hold-give-back
local shardKey = KEYS[1]
local requestKey = KEYS[2]
local userKey = KEYS[3]
local holdsKey = KEYS[4]
local member = ARGV[1]

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

local rec = redis.call('HMGET', requestKey, 'hq', 'h', 'e', 'l', 'b')
if rec[2] ~= 'h' then
  redis.call('ZREM', holdsKey, member)
  return { 0 }
end
local expiresMs = tonumber(rec[3])
if expiresMs > serverNowMs() then
  -- Extended since the sweeper looked: keep its score in step with the record.
  redis.call('ZADD', holdsKey, expiresMs, member)
  return { 0 }
end
local hq = tonumber(rec[1])
redis.call('ZREM', holdsKey, member)
if rebuiltSince(shardKey, rec[5]) then
  redis.call('HSET', requestKey, 'h', 'x')
  return { 0 }
end
giveBack(shardKey, userKey, hq, rec[4] == '1', hq)
redis.call('HSET', requestKey, 'h', 'x')
return { 1, hq }
