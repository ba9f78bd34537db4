-- Shared by deduct-7.lua, compensate-6.lua, hold-reserve-7.lua and shard-batch-8.lua (inserted where a script says
-- `-- @include shard-ops`), so that a request runs the very same steps alone or inside a batch. All take the
-- shard's KEYS layout: KEYS[1] shard hash, KEYS[2..4] record hashes (lua/includes/buckets.lua), KEYS[5] user
-- counts, KEYS[6] outbox stream; and all run after the caller found the shard present and not paused, and
-- the bucket to write (slot). Needs buckets.lua included before it.
--
-- A run (one call's requests, a batch or a single one) works on a copy of the shard it reads once
-- (openRun) and writes back once (closeRun): the level in one HSET, the records of each bucket hash in one
-- HSET, the users' counts in one HSET, the events in one outbox entry (addEvent). Each redis.call costs about a
-- microsecond of Redis CPU beyond the command itself, and each write is replicated and logged on its own, so
-- per-request calls were most of a deduction's Redis CPU. Every request still sees the writes of the
-- requests before it in the run (the same request id twice, a limit reached mid-batch), as single calls do,
-- because it reads and writes the copy. A request's steps change the copy only after all of its checks, so
-- a request that fails leaves nothing half-done for its neighbours.

-- Integers as Redis stores them (Lua's own tostring would write large ones in exponent form).
local function int(n)
  return string.format('%d', n)
end

-- The run's copy of the shard; level: the caller's HMGET of avail, net, ep (absent fields nil).
local function openRun(level, windowSec, firstBucket, slot, shardIndex, couponId, nowMs)
  return {
    avail = tonumber(level[1]), net = tonumber(level[2] or '0'), epoch = level[3] or '', levelDirty = false,
    windowSec = windowSec, firstBucket = firstBucket, slot = slot,
    shardIndex = shardIndex, couponId = couponId, nowMs = nowMs,
    -- field -> value, or false when known absent; field -> position (0..2) of a found value. Two maps, not a
    -- { value, position } table per record: a table per request was a measurable share of a batch's Lua.
    records = {}, recordAt = {},
    -- per record hash (1..3): fields and values to write, in order, and field -> index in it
    pending = { {}, {}, {} }, pendingAt = { {}, {}, {} },
    -- user id -> count, read on first use; users written, in order
    users = {}, usersDirty = {}, usersOrder = {},
    -- the outbox entry's fields, in order (src/settlement/event.ts reads them)
    events = {},
  }
end

-- Looks up the records of `fields` (a list) in the three record hashes, one HMGET each, so that a batch
-- reads them in three calls instead of three per request.
local function prefetchRecords(run, fields)
  local want = {}
  for _, f in ipairs(fields) do
    if run.records[f] == nil then
      run.records[f] = false
      want[#want + 1] = f
    end
  end
  local i = 0
  while #want > 0 and i <= 2 do
    local values = redis.call('HMGET', KEYS[2 + i], unpack(want))
    local rest = {}
    for j, f in ipairs(want) do
      if values[j] then
        run.records[f], run.recordAt[f] = values[j], i
      else
        rest[#rest + 1] = f
      end
    end
    want = rest
    i = i + 1
  end
end

-- The record of `field`: its value and position (0-based) among the three hashes, or nil.
local function findRecord(run, field)
  local v = run.records[field]
  if v == nil then
    local at
    v, at = findField(2, field)
    run.records[field], run.recordAt[field] = v or false, at
  end
  if v then return v, run.recordAt[field] end
  return nil, nil
end

local function putRecord(run, field, value, at)
  run.records[field], run.recordAt[field] = value, at
  local p = run.pending[at + 1]
  local idx = run.pendingAt[at + 1][field]
  if idx then
    p[idx] = value
  else
    p[#p + 1] = field
    p[#p + 1] = value
    run.pendingAt[at + 1][field] = #p
  end
end

local function userCount(run, userId)
  local n = run.users[userId]
  if n == nil then
    n = tonumber(redis.call('HGET', KEYS[5], userId) or '0')
    run.users[userId] = n
  end
  return n
end

local function setUserCount(run, userId, n)
  run.users[userId] = n
  if not run.usersDirty[userId] then
    run.usersDirty[userId] = true
    run.usersOrder[#run.usersOrder + 1] = userId
  end
end

-- One event of the run's outbox entry, packed in one field (src/settlement/event.ts fromOutboxEntry reads
-- it): the field is the kind, D or C; the value "requestId|userId|quantity", and for a C "|reason" after it
-- (ids never contain '|'; the reason, last, may). The entry starts with the coupon, shard and time all its
-- events share. One field per event instead of one per value: a stream entry costs Redis per field, on the
-- master, the replicas and in the AOF. quantity: a string (number to string conversions are among the
-- dearest steps of a script).
local function addEvent(run, kind, requestId, userId, quantity, reason)
  local e = run.events
  local n = run.eventFields or 0
  if n == 0 then
    e[1], e[2], e[3], e[4], e[5], e[6] = 'c', run.couponId, 's', run.shardIndex, 't', run.nowMs
    n = 6
  end
  if reason then
    e[n + 1], e[n + 2] = kind, requestId .. '|' .. userId .. '|' .. quantity .. '|' .. reason
  else
    e[n + 1], e[n + 2] = kind, requestId .. '|' .. userId .. '|' .. quantity
  end
  run.eventFields = n + 2
end

-- unpack() has a limit on how many values it returns: long lists go out in several calls.
local CHUNK = 4000

local function writeAll(command, key, list)
  for i = 1, #list, CHUNK do
    redis.call(command, key, unpack(list, i, math.min(i + CHUNK - 1, #list)))
  end
end

-- Writes the run's changes back: the shard's level, the records, the users' counts, the outbox entry, and
-- the holds of Reserves in the run (shard-reserve.lua).
local function closeRun(run)
  if run.levelDirty then
    redis.call('HSET', KEYS[1], 'avail', int(run.avail), 'net', int(run.net))
  end
  if run.heldDelta then
    redis.call('HINCRBY', KEYS[1], 'held', run.heldDelta)
    writeAll('ZADD', run.holdsKey, run.holdMembers)
  end
  for i = 1, 3 do
    if #run.pending[i] > 0 then
      writeAll('HSET', KEYS[1 + i], run.pending[i])
      if i == run.slot then
        redis.call('EXPIREAT', KEYS[1 + i], bucketExpiry(run.windowSec, run.firstBucket + i - 1), 'NX')
      end
    end
  end
  if #run.usersOrder > 0 then
    local list = {}
    for _, u in ipairs(run.usersOrder) do
      list[#list + 1] = u
      list[#list + 1] = int(run.users[u])
    end
    writeAll('HSET', KEYS[5], list)
  end
  local e = run.events
  local last = run.eventFields or 0
  -- Entries of at most CHUNK values (unpack's limit), each starting with the shared fields.
  for from = 7, last, CHUNK do
    redis.call('XADD', KEYS[6], '*', e[1], e[2], e[3], e[4], e[5], e[6], unpack(e, from, math.min(from + CHUNK - 1, last)))
  end
end

-- The checks a new Deduct and a new Reserve share, in order: the user's per-user limit (held units count),
-- then the shard's stock. Returns the user's count (nil when the coupon has no limit), or false and the refusal:
-- -2, held | -1, avail, epoch.
local function takeChecks(run, userId, q, limit)
  local held
  if limit > 0 then
    held = userCount(run, userId)
    if held + q > limit then return false, -2, held end
  end
  if run.avail < q then return false, -1, run.avail, run.epoch end
  return held
end

-- A Deduct's steps from the idempotency record on (fallback credits, when any, were applied before).
-- quantity: as the caller sent it (a string of digits). Returns deduct-7.lua's reply as values, not a table (a
-- table per request was a measurable share of a batch's Lua): 1, remaining | 2, remaining, compensated |
-- -1, avail, epoch | -2, held | -3, field, recorded.
local function deductRecorded(run, requestId, field, userId, quantity, limit)
  local q = tonumber(quantity)
  local packed = findRecord(run, field)
  if packed then
    -- A record that is not a deduction's (it starts with a letter: a Reserve's hold) owns the request id.
    if not string.find(packed, '^%d') then return -3, 'kind', 'reserve' end
    local rec = unpackRecord(packed)
    -- A confirmed hold's record (flag h) is a deduction's, but its request id is still a Reserve's.
    if hasFlag(rec, 'h') then return -3, 'kind', 'reserve' end
    if rec.u ~= userId then return -3, 'user_id', rec.u end
    if tonumber(rec.q) ~= q then return -3, 'quantity', rec.q end
    return 2, tonumber(rec.r), hasFlag(rec, 'c') and 1 or 0
  end

  local held, code, a, b = takeChecks(run, userId, q, limit)
  if held == false then return code, a, b end

  local remaining = run.avail - q
  -- packRecord's layout (buckets.lua), without its table.
  local record = quantity .. '|' .. int(remaining) .. '|' .. run.nowMs .. '||' .. userId
  run.avail = remaining
  run.net = run.net + q
  run.levelDirty = true
  if limit > 0 then
    setUserCount(run, userId, held + q)
  end
  putRecord(run, field, record, run.slot - 1)
  addEvent(run, 'D', requestId, userId, quantity, nil)
  return 1, remaining
end

-- A Compensate's steps from the record on.
-- Returns compensate-6.lua's reply as values: 1, avail, quantity | 2, avail | 3.
local function compensateRecorded(run, requestId, field, reason, limited)
  local packed, at = findRecord(run, field)
  -- No record, or a record that is not a deduction's (a Reserve's hold): nothing was deducted.
  if not packed or not string.find(packed, '^%d') then
    return 3
  end
  local rec = unpackRecord(packed)
  if hasFlag(rec, 'c') then
    return 2, run.avail
  end

  local quantity = tonumber(rec.q)
  local held
  if limited then
    held = userCount(run, rec.u)
  end
  -- In place: the record's hash already lives as long as the record must.
  rec.f = rec.f .. 'c'
  local record = packRecord(rec)
  if not hasFlag(rec, 'x') then
    run.avail = run.avail + quantity
  end
  run.net = run.net - quantity
  run.levelDirty = true
  if limited then
    setUserCount(run, rec.u, math.max(0, held - quantity))
  end
  putRecord(run, field, record, at)
  addEvent(run, 'C', requestId, rec.u, rec.q, reason)
  return 1, run.avail, quantity
end
