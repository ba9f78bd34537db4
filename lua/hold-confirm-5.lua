--[[
  Confirm: turns an open hold into a deduction, exactly as deduct-5.lua would have made it — the request
  record becomes a deduction record (q = units kept; Compensate and replays treat it as one) and the same 'D'
  outbox event goes to settlement. Units not kept go back to available in the same step. Whether the hold is
  still open is decided here on the Redis server's clock: past expiresMs it is expired instead (given back
  now if no sweeper has done it yet), so an expired hold can never be confirmed, and exactly one of confirm,
  release and expiry ever wins.

  KEYS[1] shard hash      <ns>:{<tag>}:shard
  KEYS[2] request record  <ns>:{<tag>}:req:<requestId>
  KEYS[3] user count      <ns>:{<tag>}:user:<userId>
  KEYS[4] outbox stream   <ns>:{<tag>}:outbox
  KEYS[5] hold expiries   <ns>:{<tag>}:holds

  ARGV[1] requestId
  ARGV[2] keep            units to confirm; 0 = all held units
  ARGV[3] couponId
  ARGV[4] shardIndex
  ARGV[5] nowMs           client clock, the deduction's time in the ledger

  Returns
    { 1, kept, released, avail }   confirmed now
    { 2, kept, released }          confirmed before (a replay with the same or no quantity)
    { 3 }                          no hold is recorded under requestId (never made, past the window, a Deduct)
    { 4 }                          released before
    { 5, released }                expired (released = units given back by this call, 0 if already)
    {-3, recorded }                confirmed before with another quantity
    {-4 }                          the shard hash is missing: recover the coupon, then retry
    {-5, waitMs }                  paused for recovery
    {-6, held }                    keep is more than the hold's units
]]
-- @include paused-for
-- @include hold-give-back
local shardKey = KEYS[1]
local requestKey = KEYS[2]
local userKey = KEYS[3]
local outboxKey = KEYS[4]
local holdsKey = KEYS[5]

local requestId = ARGV[1]
local keep = tonumber(ARGV[2])

local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then return { -4 } end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end

local rec = redis.call('HMGET', requestKey, 'u', 'hq', 'h', 'e', 'q', 'l', 'b')
local st = rec[3]
if not st then return { 3 } end
local hq = tonumber(rec[2])
if st == 'c' then
  local kept = tonumber(rec[5])
  if keep ~= 0 and keep ~= kept then return { -3, rec[5] } end
  return { 2, kept, hq - kept }
end
if st == 'r' then return { 4 } end
if st == 'x' then return { 5, 0 } end

if keep == 0 then keep = hq end
if keep > hq then return { -6, hq } end
local member = requestId .. '|' .. rec[1]
redis.call('ZREM', holdsKey, member)
if rebuiltSince(shardKey, rec[7]) then
  redis.call('HSET', requestKey, 'h', 'x')
  return { 5, 0 }
end
if tonumber(rec[4]) <= serverNowMs() then
  giveBack(shardKey, userKey, hq, rec[6] == '1', hq)
  redis.call('HSET', requestKey, 'h', 'x')
  return { 5, hq }
end
local released = hq - keep
local avail = giveBack(shardKey, userKey, released, rec[6] == '1', hq)
redis.call('HINCRBY', shardKey, 'net', keep)
redis.call('HSET', requestKey, 'h', 'c', 'q', keep, 'r', avail)
redis.call('XADD', outboxKey, '*', 'k', 'D', 'c', ARGV[3], 'r', requestId, 'u', rec[1],
  'q', keep, 's', ARGV[4], 't', ARGV[5])
return { 1, keep, released, avail }
