--[[
  Expires one hold whose time has come on the Redis server's clock: gives its units back. Any instance's
  sweeper may run it, any number of times: only the first run that finds the hold open and due changes
  anything (the script is atomic), so a hold expires exactly once whichever instances are alive.

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>  buckets first .. first + 2
  KEYS[5] user counts       <ns>:{<tag>}:users
  KEYS[6] hold expiries     <ns>:{<tag>}:holds

  ARGV[1] member            "<requestId>|<userId>" as in KEYS[6]
  ARGV[2] recordField       of requestId

  Returns
    { 1, released }   expired now
    { 0 }             nothing to do: not open any more (member dropped), or not due (extended)
    {-4 }             the shard hash is missing (the member is left for after the recovery)
    {-5, waitMs }     paused for recovery: try on a later sweep
]]
-- @include paused-for
-- @include buckets
-- @include hold-record
local shardKey = KEYS[1]
local usersKey = KEYS[5]
local holdsKey = KEYS[6]
local member = ARGV[1]
local field = ARGV[2]

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

local packed, at = findField(2, field)
local h = packed and unpackHold(packed)
if not h or h.st ~= 'h' then
  redis.call('ZREM', holdsKey, member)
  return { 0 }
end
if h.e > serverNowMs() then
  -- Extended since the sweeper looked: keep its score in step with the record.
  redis.call('ZADD', holdsKey, h.e, member)
  return { 0 }
end
redis.call('ZREM', holdsKey, member)
h.st = 'x'
redis.call('HSET', KEYS[2 + at], field, packHold(h))
if rebuiltSince(shardKey, h) then return { 0 } end
giveBack(shardKey, usersKey, h, h.hq)
return { 1, h.hq }
