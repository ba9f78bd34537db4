--[[
  Release: gives an open hold's units back to available (and out of the user's count). A hold past its
  expiresMs (server clock) is expired instead — given back here if no sweeper has done it yet — so the answer
  says which of release and expiry won.

  KEYS[1] shard hash      <ns>:{<tag>}:shard
  KEYS[2] request record  <ns>:{<tag>}:req:<requestId>
  KEYS[3] user count      <ns>:{<tag>}:user:<userId>
  KEYS[4] hold expiries   <ns>:{<tag>}:holds

  ARGV[1] requestId

  Returns
    { 1, released, avail }  released now
    { 2 }                   released before
    { 3 }                   no hold is recorded under requestId
    { 4 }                   confirmed before (Compensate gives a deduction back)
    { 5, released }         expired (released = units given back by this call, 0 if already)
    {-4 }                   the shard hash is missing
    {-5, waitMs }           paused for recovery
]]
-- @include paused-for
-- @include hold-give-back
local shardKey = KEYS[1]
local requestKey = KEYS[2]
local userKey = KEYS[3]
local holdsKey = KEYS[4]
local requestId = ARGV[1]

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

local rec = redis.call('HMGET', requestKey, 'u', 'hq', 'h', 'e', 'l', 'b')
local st = rec[3]
if not st then return { 3 } end
if st == 'r' then return { 2 } end
if st == 'c' then return { 4 } end
if st == 'x' then return { 5, 0 } end

local hq = tonumber(rec[2])
redis.call('ZREM', holdsKey, requestId .. '|' .. rec[1])
if rebuiltSince(shardKey, rec[6]) then
  redis.call('HSET', requestKey, 'h', 'x')
  return { 5, 0 }
end
local avail = giveBack(shardKey, userKey, hq, rec[5] == '1', hq)
if tonumber(rec[4]) <= serverNowMs() then
  redis.call('HSET', requestKey, 'h', 'x')
  return { 5, hq }
end
redis.call('HSET', requestKey, 'h', 'r')
return { 1, hq, avail }
