-- One shard's share of a group commit (inserted where a script says `-- @include shard-run`; needs
-- paused-for, buckets, hold-record, shard-ops and shard-reserve before it): runs the requests of
-- ARGV[first .. last], six values each, on the shard whose keys are KEYS[1..8], with ARGV[from .. from + 5] =
-- windowSec, firstBucket, couponId, shardIndex, nowMs, vouch (shard-batch-8.lua's ARGV[1..6]), and appends
-- three values per request to `out` (code, then up to two; false where absent). shard-batch-8.lua runs it
-- once; node-batch-1.lua once per shard of a master.

-- One request, its reply as values (code, then up to two); a function defined once, so that pcall needs no
-- closure per request.
local function runOne(run, i)
  local op = ARGV[i]
  if op == 'D' then
    return deductRecorded(run, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], tonumber(ARGV[i + 5]))
  end
  if op == 'C' then
    return compensateRecorded(run, ARGV[i + 1], ARGV[i + 2], ARGV[i + 4], ARGV[i + 5] == '1')
  end
  -- 'R<ttlMs>': the hold's length rides in the op, so that every request keeps six values.
  if string.byte(op, 1) == 82 then
    return reserveRecorded(run, ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], tonumber(ARGV[i + 5]), tonumber(string.sub(op, 2)))
  end
  error('unknown op ' .. op)
end

local function runShard(out, from, first, last)
  local n = #out
  -- One flat list, three values per request: Redis turns a nested table into a reply at about a microsecond
  -- per table (it looks for its special fields), a flat one at a fraction of that.
  local function refuse(r)
    out[n + 1], out[n + 2], out[n + 3] = r[1], r[2] or false, r[3] or false
    n = n + 3
  end
  local windowSec = tonumber(ARGV[from])
  local firstBucket = tonumber(ARGV[from + 1])
  local couponId = ARGV[from + 2]
  local shardIndex = ARGV[from + 3]
  local nowMs = tonumber(ARGV[from + 4])
  local vouch = ARGV[from + 5] == '1'

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
  if refusal then
    for _ = first, last - 5, 6 do refuse(refusal) end
    return
  end

  local run = openRun(state, windowSec, firstBucket, slot, shardIndex, couponId, ARGV[from + 4])
  run.holdsKey = KEYS[8]
  -- From three requests on, three HMGETs for all of their records cost less than findRecord's up to three
  -- HGETs per request; with fewer, the HGETs cost less (measured A/B on one node).
  if last - first + 1 >= 18 then
    local fields = {}
    for i = first, last - 5, 6 do fields[#fields + 1] = ARGV[i + 2] end
    prefetchRecords(run, fields)
  end

  local vouched = false
  for i = first, last - 5, 6 do
    local ok, code, a, b = pcall(runOne, run, i)
    if not ok then
      code, a, b = -9, tostring(code), false
    elseif code == 2 then
      vouched = true
    end
    out[n + 1], out[n + 2], out[n + 3] = code, a or false, b or false
    n = n + 3
  end
  closeRun(run)
  if vouch and vouched then
    redis.call('SET', KEYS[7], nowMs, 'EX', windowSec)
  end
end
