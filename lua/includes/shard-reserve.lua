-- A Reserve's steps from the idempotency record on, on a run of shard-ops.lua (inserted where a script says
-- `-- @include shard-reserve`; needs paused-for, buckets, hold-record and shard-ops before it). Shared by
-- hold-reserve-7.lua and the group commit (shard-run.lua), so that a Reserve runs the very same steps alone
-- or inside a batch, and sees the records, counts and level of the requests before it in the run.
--
-- The run must have `holdsKey` set (the shard's holds sorted set): its position differs between the scripts.
-- A new hold adds to the run's `heldDelta` and `holdMembers`, which closeRun writes (HINCRBY held, one ZADD).
--
-- quantity: as the caller sent it (a string of digits); ttlMs: a number. Returns values, not a table:
--   1, remaining, expiresMs   held (expiresMs on the Redis server's clock)
--   2, remaining, state       replay of this hold (state h | c | r | x; c once confirmed)
--   -1, avail, epoch | -2, held | -3, field, recorded   as deductRecorded (recorded 'deduct' for a Deduct's id)
local function reserveRecorded(run, requestId, field, userId, quantity, limit, ttlMs)
  -- A hold's length becomes a sorted-set score in closeRun: one that is not a finite positive number would fail
  -- there, after the run's level was written, for every request of the run. Refused here, on its own.
  if not ttlMs or ttlMs ~= ttlMs or ttlMs <= 0 or ttlMs == math.huge then error('ttlMs must be a positive number') end
  local q = tonumber(quantity)
  local packed = findRecord(run, field)
  if packed then
    local h = unpackHold(packed)
    if h then
      if h.u ~= userId then return -3, 'user_id', h.u end
      if h.hq ~= q then return -3, 'quantity', tostring(h.hq) end
      return 2, tonumber(h.r), h.st
    end
    local rec = unpackRecord(packed)
    -- A confirmed hold is a deduction's record flagged 'h' (its units kept are its quantity now).
    if rec.q and hasFlag(rec, 'h') then
      if rec.u ~= userId then return -3, 'user_id', rec.u end
      return 2, tonumber(rec.r), 'c'
    end
    return -3, 'kind', 'deduct'
  end

  local held, code, a, b = takeChecks(run, userId, q, limit)
  if held == false then return code, a, b end

  -- Read once per run: the rebuild mark and the server's clock do not change inside one script. Before the
  -- run's copy changes, as every step that can fail, so that a failing request leaves its neighbours nothing.
  if run.rebuildMark == nil then
    run.rebuildMark = redis.call('HGET', KEYS[1], 'rb') or ''
    run.serverNowMs = serverNowMs()
  end
  local expiresMs = run.serverNowMs + ttlMs
  local remaining = run.avail - q
  run.avail = remaining
  run.levelDirty = true
  run.heldDelta = (run.heldDelta or 0) + q
  if limit > 0 then
    setUserCount(run, userId, held + q)
  end
  putRecord(run, field, packHold({
    st = 'h', hq = q, e = expiresMs, l = limit > 0, b = run.rebuildMark, r = remaining, t = run.nowMs, u = userId,
  }), run.slot - 1)
  local m = run.holdMembers
  if not m then
    m = {}
    run.holdMembers = m
  end
  m[#m + 1] = expiresMs
  m[#m + 1] = requestId .. '|' .. userId
  return 1, remaining, expiresMs
end
