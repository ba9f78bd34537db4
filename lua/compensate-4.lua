--[[
  Gives the units of one recorded deduction back to the shard that served it, restores the user's count and
  appends the outbox event. The request record stays (marked compensated), so a replay of the deduction can
  never take the units again and a second compensation is recognised.

  KEYS[1] shard hash      <ns>:{<tag>}:shard
  KEYS[2] request record  <ns>:{<tag>}:req:<requestId>
  KEYS[3] user count      <ns>:{<tag>}:user:<userId>   (touched only when limited = 1)
  KEYS[4] outbox stream   <ns>:{<tag>}:outbox

  ARGV[1] requestId
  ARGV[2] reason          free text for the ledger
  ARGV[3] couponId
  ARGV[4] shardIndex
  ARGV[5] nowMs
  ARGV[6] limited         1 when the coupon has a per-user limit

  Returns
    { 1, avail, quantity }  compensated; avail = shard avail after it
    { 2, avail }            already compensated
    { 3 }                   no deduction is recorded for requestId (never made, or older than the window)
    {-4 }                   the shard hash is missing: recover the coupon, then retry
    {-5, waitMs }           the coupon is paused for recovery; retry after waitMs

  A deduction that settlement refused (record field x = 1: MySQL never had its units) is closed without
  putting anything back on sale: its units were sold beyond the record, so returning them would create stock.
  The event still goes out; settlement knows the deduction was refused and settles nothing for it.
]]
-- @include paused-for
local shardKey = KEYS[1]
local requestKey = KEYS[2]
local userKey = KEYS[3]
local outboxKey = KEYS[4]

local requestId = ARGV[1]
local reason = ARGV[2]
local couponId = ARGV[3]
local shardIndex = ARGV[4]
local nowMs = ARGV[5]
local limited = ARGV[6] == '1'

-- The shard first: after a loss the request record is gone too, and "never deducted" would be a lie.
local state = redis.call('HMGET', shardKey, 'avail', 'pz')
if not state[1] then
  return { -4 }
end
local wait = pausedFor(state[2])
if wait > 0 then return { -5, wait } end
local recorded = redis.call('HMGET', requestKey, 'u', 'q', 'c', 'x')
if not recorded[2] then
  return { 3 }
end
if recorded[3] == '1' then
  return { 2, tonumber(state[1]) }
end

local quantity = tonumber(recorded[2])
local refused = recorded[4] == '1'
local avail = tonumber(state[1])
if not refused then
  avail = redis.call('HINCRBY', shardKey, 'avail', quantity)
end
redis.call('HINCRBY', shardKey, 'net', -quantity)
if limited then
  local held = tonumber(redis.call('GET', userKey) or '0')
  redis.call('SET', userKey, math.max(0, held - quantity))
end
redis.call('HSET', requestKey, 'c', 1)
redis.call('XADD', outboxKey, '*', 'k', 'C', 'c', couponId, 'r', requestId, 'u', recorded[1],
  'q', quantity, 's', shardIndex, 't', nowMs, 'm', reason)
return { 1, avail, quantity }
