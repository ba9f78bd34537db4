-- Shared by deduct-7.lua, compensate-6.lua and shard-batch-7.lua (inserted where a script says
-- `-- @include shard-ops`), so that a request runs the very same steps alone or inside a batch. Both take the
-- shard's KEYS layout: KEYS[1] shard hash, KEYS[2..4] record hashes (lua/includes/buckets.lua), KEYS[5] user
-- counts, KEYS[6] outbox stream; and both run after the caller found the shard present and not paused, and
-- the bucket to write (slot). Needs buckets.lua included before it.

-- A Deduct's steps from the idempotency record on (fallback credits, when any, were applied before).
-- Returns the reply of deduct-7.lua: {1, remaining} | {2, remaining, compensated} | {-1, avail, epoch} |
-- {-2, held} | {-3, field, recorded}.
local function deductRecorded(requestId, field, userId, quantity, limit, windowSec, firstBucket, slot,
                              shardIndex, couponId, nowMs)
  local packed = findField(2, field)
  if packed then
    -- A record that is not a deduction's (it starts with a letter: a Reserve's hold) owns the request id.
    if not string.find(packed, '^%d') then return { -3, 'kind', 'reserve' } end
    local rec = unpackRecord(packed)
    if rec.u ~= userId then return { -3, 'user_id', rec.u } end
    if tonumber(rec.q) ~= quantity then return { -3, 'quantity', rec.q } end
    return { 2, tonumber(rec.r), hasFlag(rec, 'c') and 1 or 0 }
  end

  if limit > 0 then
    local held = tonumber(redis.call('HGET', KEYS[5], userId) or '0')
    if held + quantity > limit then
      return { -2, held }
    end
  end

  local avail = tonumber(redis.call('HGET', KEYS[1], 'avail'))
  if avail < quantity then
    return { -1, avail, redis.call('HGET', KEYS[1], 'ep') or '' }
  end

  local remaining = redis.call('HINCRBY', KEYS[1], 'avail', -quantity)
  redis.call('HINCRBY', KEYS[1], 'net', quantity)
  if limit > 0 then
    redis.call('HINCRBY', KEYS[5], userId, quantity)
  end
  writeField(2, slot, firstBucket, windowSec, field, packRecord({ q = quantity, r = remaining, t = nowMs, f = '', u = userId }))
  redis.call('XADD', KEYS[6], '*', 'k', 'D', 'c', couponId, 'r', requestId, 'u', userId,
    'q', quantity, 's', shardIndex, 't', nowMs)
  return { 1, remaining }
end

-- A Compensate's steps from the record on; avail: the shard's avail as read by the caller.
-- Returns the reply of compensate-6.lua: {1, avail, quantity} | {2, avail} | {3}.
local function compensateRecorded(requestId, field, reason, limited, avail, shardIndex, couponId, nowMs)
  local packed, at = findField(2, field)
  -- No record, or a record that is not a deduction's (a Reserve's hold): nothing was deducted.
  if not packed or not string.find(packed, '^%d') then
    return { 3 }
  end
  local rec = unpackRecord(packed)
  if hasFlag(rec, 'c') then
    return { 2, avail }
  end

  local quantity = tonumber(rec.q)
  if not hasFlag(rec, 'x') then
    avail = redis.call('HINCRBY', KEYS[1], 'avail', quantity)
  end
  redis.call('HINCRBY', KEYS[1], 'net', -quantity)
  if limited then
    local held = tonumber(redis.call('HGET', KEYS[5], rec.u) or '0')
    redis.call('HSET', KEYS[5], rec.u, math.max(0, held - quantity))
  end
  -- In place: the record's hash already lives as long as the record must.
  rec.f = rec.f .. 'c'
  redis.call('HSET', KEYS[2 + at], field, packRecord(rec))
  redis.call('XADD', KEYS[6], '*', 'k', 'C', 'c', couponId, 'r', requestId, 'u', rec.u,
    'q', quantity, 's', shardIndex, 't', nowMs, 'm', reason)
  return { 1, avail, quantity }
end
