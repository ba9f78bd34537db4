--[[
  Release: gives an open hold's units back to available (and out of the user's count). A hold past its
  expiresMs (server clock) is expired instead — given back here if no sweeper has done it yet — so the answer
  says which of release and expiry won.

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>  buckets first .. first + 2
  KEYS[5] user counts       <ns>:{<tag>}:users
  KEYS[6] hold expiries     <ns>:{<tag>}:holds

  ARGV[1] requestId
  ARGV[2] recordField

  Returns
    { 1, released, avail }  released now
    { 2 }                   released before
    { 3 }                   no hold is recorded under requestId
    { 4 }                   confirmed before (Compensate gives a deduction back)
    { 5, released }         expired (released = units given back by this call)
    {-4 }                   the shard hash is missing
    {-5, waitMs }           paused for recovery
]]
-- @include paused-for
-- @include buckets
-- @include hold-record
local shardKey = KEYS[1]
local usersKey = KEYS[5]
local holdsKey = KEYS[6]
local requestId = ARGV[1]
local field = ARGV[2]

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

local h, at, confirmed = findHold(2, field)
if not h then return { confirmed and 4 or 3 } end
if h.st == 'r' then return { 2 } end
if h.st == 'x' then return { 5, 0 } end

local recordKey = KEYS[2 + at]
redis.call('ZREM', holdsKey, requestId .. '|' .. h.u)
if rebuiltSince(shardKey, h) then
  h.st = 'x'
  redis.call('HSET', recordKey, field, packHold(h))
  return { 5, 0 }
end
local avail = giveBack(shardKey, usersKey, h, h.hq)
if h.e <= serverNowMs() then
  h.st = 'x'
  redis.call('HSET', recordKey, field, packHold(h))
  return { 5, h.hq }
end
h.st = 'r'
redis.call('HSET', recordKey, field, packHold(h))
return { 1, h.hq, avail }
