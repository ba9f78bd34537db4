--[[
  ExtendHold: moves an open hold's expiry to now + ttlMs on the Redis server's clock, unless it has expired
  already (then the sweeper, or a Confirm/Release, gives it back). A hold made before a recovery rebuilt its shard
  (lua/includes/hold-record.lua rebuiltSince) can never be confirmed: it ends here as expired, as a Confirm or
  Release of it would, without giving anything back.

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>  buckets first .. first + 2
  KEYS[5] hold expiries     <ns>:{<tag>}:holds

  ARGV[1] requestId
  ARGV[2] recordField
  ARGV[3] ttlMs
  ARGV[4] windowSec         idempotency window: a hold never outlives half a window from its Reserve, so its
                            record (kept at least a window) is always there while it is open

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
-- @include buckets
-- @include hold-record
local shardKey = KEYS[1]
local holdsKey = KEYS[5]
local requestId = ARGV[1]
local field = ARGV[2]
local ttlMs = tonumber(ARGV[3])

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

local h, at, confirmed = findHold(2, field)
if not h then return { confirmed and 4 or 3 } end
if h.st == 'x' then return { 5 } end
if h.st == 'r' then return { 6 } end
local now = serverNowMs()
if h.e <= now then return { 5 } end
if rebuiltSince(shardKey, h) then
  redis.call('ZREM', holdsKey, requestId .. '|' .. h.u)
  h.st = 'x'
  redis.call('HSET', KEYS[2 + at], field, packHold(h))
  return { 5 }
end
h.e = math.min(now + ttlMs, tonumber(h.t) + tonumber(ARGV[4]) * 500)
redis.call('HSET', KEYS[2 + at], field, packHold(h))
redis.call('ZADD', holdsKey, h.e, requestId .. '|' .. h.u)
return { 1, h.e }
