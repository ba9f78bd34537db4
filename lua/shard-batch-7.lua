--[[
  Group commit: the Deducts and Compensates bound for one shard that arrived together, run in one call, in
  order, each with exactly the steps it runs alone (lua/includes/shard-ops.lua: the same idempotency record,
  per-user limit, stock check, outbox event) and its own reply. A request that fails with an error gets that
  error as its reply; the requests after it still run. Deducts carrying fallback credits are never batched
  (deduct-7.lua).

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>   buckets first .. first + 2 (lua/includes/buckets.lua)
  KEYS[5] user counts       <ns>:{<tag>}:users
  KEYS[6] outbox stream     <ns>:{<tag>}:outbox
  KEYS[7] ack               <ns>:{<tag>}:ack           touched when vouch = 1 and some reply vouches for an
                                                       earlier write (a replay, already compensated), so the
                                                       WAIT after this call covers that write

  ARGV[1] windowSec         idempotency window, seconds (the bucket width)
  ARGV[2] firstBucket       bucket of KEYS[2]
  ARGV[3] couponId
  ARGV[4] shardIndex
  ARGV[5] nowMs
  ARGV[6] vouch             1 at the `replica` ack level
  then 6 per request, from ARGV[7]:
    op            D (deduct) | C (compensate)
    requestId
    recordField   the request id as a record field (keys.ts recordField)
    userId        D: may be empty when limit = 0; C: unused
    quantity      D: integer >= 1; C: the reason (free text for the ledger)
    limit         D: per-user limit, 0 = unlimited; C: 1 when the coupon has a per-user limit

  Returns one reply per request, in order: a D gets deduct-7.lua's replies (never -7), a C compensate-6.lua's;
  an error gets { -9, message }.
]]
-- @include paused-for
-- @include buckets
-- @include shard-ops
local windowSec = tonumber(ARGV[1])
local firstBucket = tonumber(ARGV[2])
local couponId = ARGV[3]
local shardIndex = ARGV[4]
local nowMs = tonumber(ARGV[5])
local vouch = ARGV[6] == '1'

local slot = writeSlot(windowSec, firstBucket)
local replies = {}
local vouched = false
for i = 7, #ARGV - 5, 6 do
  local op = ARGV[i]
  local ok, reply = pcall(function()
    local state = redis.call('HMGET', KEYS[1], 'avail', 'pz')
    if not state[1] then return { -4 } end
    local wait = pausedFor(state[2])
    if wait > 0 then return { -5, wait } end
    if not slot then return { -8 } end
    if op == 'D' then
      return deductRecorded(ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5]),
        windowSec, firstBucket, slot, shardIndex, couponId, nowMs)
    end
    return compensateRecorded(ARGV[i + 1], ARGV[i + 2], ARGV[i + 4], ARGV[i + 5] == '1', tonumber(state[1]),
      shardIndex, couponId, nowMs)
  end)
  if not ok then
    reply = { -9, tostring(reply) }
  elseif reply[1] == 2 then
    vouched = true
  end
  replies[#replies + 1] = reply
end
if vouch and vouched then
  redis.call('SET', KEYS[7], nowMs, 'EX', windowSec)
end
return replies
