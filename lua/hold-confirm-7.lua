--[[
  Confirm: turns an open hold into a deduction, exactly as deduct-7.lua would have made it — the hold's field
  becomes a deduction's record (flag 'h': it was a hold; Compensate and GetDeduction treat it as a
  deduction) and the same 'D' outbox event goes to settlement. Units not kept go back to available in the same
  step. Whether the hold is still open is decided here on the Redis server's clock: past expiresMs it is expired
  instead (given back now if no sweeper has done it yet), so an expired hold can never be confirmed, and exactly
  one of confirm, release and expiry ever wins.

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>  buckets first .. first + 2
  KEYS[5] user counts       <ns>:{<tag>}:users
  KEYS[6] outbox stream     <ns>:{<tag>}:outbox
  KEYS[7] hold expiries     <ns>:{<tag>}:holds

  ARGV[1] requestId
  ARGV[2] recordField
  ARGV[3] keep              units to confirm; 0 = all held units
  ARGV[4] couponId
  ARGV[5] shardIndex
  ARGV[6] nowMs             client clock, the deduction's time in the ledger

  Returns
    { 1, kept, released, avail }   confirmed now
    { 2, kept }                    confirmed before (a replay with the same or no quantity)
    { 3 }                          no hold is recorded under requestId (never made, past the window, a Deduct)
    { 4 }                          released before
    { 5, released }                expired (released = units given back by this call)
    {-3, recorded }                confirmed before with another quantity
    {-4 }                          the shard hash is missing: recover the coupon, then retry
    {-5, waitMs }                  paused for recovery
    {-6, held }                    keep is more than the hold's units
]]
-- @include paused-for
-- @include buckets
-- @include hold-record
local shardKey = KEYS[1]
local usersKey = KEYS[5]
local outboxKey = KEYS[6]
local holdsKey = KEYS[7]

local requestId = ARGV[1]
local field = ARGV[2]
local keep = tonumber(ARGV[3])

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

local h, at, confirmed = findHold(2, field)
if not h then
  if not confirmed then return { 3 } end
  if keep ~= 0 and keep ~= confirmed then return { -3, confirmed } end
  return { 2, confirmed }
end
if h.st == 'r' then return { 4 } end
if h.st == 'x' then return { 5, 0 } end

if keep == 0 then keep = h.hq end
if keep > h.hq then return { -6, h.hq } end
local recordKey = KEYS[2 + at]
redis.call('ZREM', holdsKey, requestId .. '|' .. h.u)
if rebuiltSince(shardKey, h) then
  h.st = 'x'
  redis.call('HSET', recordKey, field, packHold(h))
  return { 5, 0 }
end
if h.e <= serverNowMs() then
  giveBack(shardKey, usersKey, h, h.hq)
  h.st = 'x'
  redis.call('HSET', recordKey, field, packHold(h))
  return { 5, h.hq }
end
local released = h.hq - keep
local avail = giveBack(shardKey, usersKey, h, released)
redis.call('HINCRBY', shardKey, 'net', keep)
-- In place: the hold's hash already lives at least a window past the Reserve.
redis.call('HSET', recordKey, field, packRecord({ q = keep, r = avail, t = ARGV[6], f = 'h', u = h.u }))
-- m = 'hold' (src/settlement/event.ts CONFIRMED_HOLD): kept on the ledger row, so a recovery restores this
-- record as a confirmed hold's (flag h), not a plain Deduct's.
redis.call('XADD', outboxKey, '*', 'k', 'D', 'c', ARGV[4], 'r', requestId, 'u', h.u,
  'q', keep, 's', ARGV[5], 't', ARGV[6], 'm', 'hold')
return { 1, keep, released, avail }
