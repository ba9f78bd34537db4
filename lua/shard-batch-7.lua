--[[
  Group commit: the Deducts and Compensates bound for one shard that arrived together, run in one call, in
  order, each with exactly the steps it runs alone (lua/includes/shard-ops.lua: the same idempotency record,
  per-user limit, stock check, outbox event) and its own reply. The shard is read once and written once for
  all of them, and their outbox events go out as one stream entry (shard-ops.lua openRun / closeRun). A
  request that fails with an error gets that error as its reply; the requests after it still run. Deducts carrying fallback credits are never batched
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

  Returns one reply per request, in order, flat: three values each (code, then up to two; false, a null
  reply, where the single call's reply is shorter). A D gets deduct-7.lua's replies (never -7), a C
  compensate-6.lua's; an error gets -9, message.
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

-- Nothing the requests do changes whether the shard is there or paused: asked once for all of them.
local state = redis.call('HMGET', KEYS[1], 'avail', 'net', 'ep', 'pz')
local refusal
if not state[1] then
  refusal = { -4 }
else
  local wait = pausedFor(state[4])
  if wait > 0 then refusal = { -5, wait } end
end
local slot = writeSlot(windowSec, firstBucket)
if not refusal and not slot then refusal = { -8 } end

-- One flat list, three values per request (code, then up to two, false = absent): Redis turns a nested
-- table into a reply at about a microsecond per table (it looks for its special fields), a flat one at a
-- fraction of that.
local replies = {}
local n = 0
local function reply(r)
  replies[n + 1], replies[n + 2], replies[n + 3] = r[1], r[2] or false, r[3] or false
  n = n + 3
end

if refusal then
  for _ = 7, #ARGV - 5, 6 do reply(refusal) end
  return replies
end

local run = openRun(state, windowSec, firstBucket, slot, shardIndex, couponId, ARGV[5])
-- From three requests on, three HMGETs for all of their records cost less than findRecord's up to three HGETs
-- per request; with fewer, the HGETs cost less (measured A/B on one node).
if #ARGV - 6 >= 18 then
  local fields = {}
  for i = 7, #ARGV - 5, 6 do fields[#fields + 1] = ARGV[i + 2] end
  prefetchRecords(run, fields)
end

-- One request; a function defined once, so that pcall needs no closure per request.
local function runOne(i)
  if ARGV[i] == 'D' then
    return deductRecorded(run, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], tonumber(ARGV[i + 5]))
  end
  return compensateRecorded(run, ARGV[i + 1], ARGV[i + 2], ARGV[i + 4], ARGV[i + 5] == '1')
end

local vouched = false
for i = 7, #ARGV - 5, 6 do
  local ok, r = pcall(runOne, i)
  if not ok then
    r = { -9, tostring(r) }
  elseif r[1] == 2 then
    vouched = true
  end
  reply(r)
end
closeRun(run)
if vouch and vouched then
  redis.call('SET', KEYS[7], nowMs, 'EX', windowSec)
end
return replies
