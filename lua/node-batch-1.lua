#!lua flags=allow-cross-slot-keys
--[[
  Group commit across the shards one master holds: every shard's batch of a round (shard-batch-8.lua's
  requests, in the same layout) in one call, so that a call's fixed cost (entering the script, building KEYS
  and ARGV, its replication frame) is paid once per master and round instead of once per shard. Measured on
  one node here: a call costs ~45 µs before its first request and ~6 µs per request, so with five shards of a
  few requests each most of the script's time was its entries.

  Shards are in different slots. The script declares one key, the first shard's hash, which routes it and
  which the node must serve; the shebang flag lets it reach the other shards' keys, which Redis still checks
  are served by this node at each access. Each shard runs as shard-batch-8.lua would (lua/includes/shard-run.lua)
  with KEYS[1..8] pointed at its keys; its first access is one EXISTS of all eight, so a shard whose slot is
  not here (moved, failed over) or is half moved (one of its keys already gone, or absent: Redis refuses a
  missing key of a migrating slot) fails before it writes anything and is answered -10 for the caller to send
  to the node that serves it.

  KEYS[1]       the first shard's hash (routing only; every shard's keys are in ARGV)
  ARGV, per shard, one after another:
    8 key names   shard-batch-8.lua's KEYS[1..8] of this shard
    6 values      shard-batch-8.lua's ARGV[1..6] (windowSec, firstBucket, couponId, shardIndex, nowMs, vouch)
    count         requests of this shard
    6 × count     shard-batch-8.lua's per-request values

  Returns three values per request, shards in order: shard-batch-8.lua's replies; every request of a shard
  whose keys this node does not serve (or not all of them, its slot being moved) gets -10, message; of a
  shard that failed otherwise outside a request, -9, message.
]]
-- @include paused-for
-- @include buckets
-- @include hold-record
-- @include shard-ops
-- @include shard-reserve
-- @include shard-run
-- Every key of a shard is touched before any of it is written. The script declared only the first shard's
-- hash, and a key of a slot being migrated fails at its first access once it has left (or when it never
-- existed); Lua does not roll back. Without this, a shard whose outbox stream had left while its hash and
-- records had not would have its level and records written and then fail at XADD: units taken, no event.
-- With it, the shard fails before its first write and is answered -10 (one command, not eight).
local function runHere(out, from, first, last)
  redis.call('EXISTS', KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8])
  runShard(out, from, first, last)
end

local out = {}
local a = 1
while a <= #ARGV do
  for j = 1, 8 do KEYS[j] = ARGV[a + j - 1] end
  local count = tonumber(ARGV[a + 14])
  local last = a + 14 + 6 * count
  local before = #out
  local ok, err = pcall(runHere, out, a + 8, a + 15, last)
  if not ok then
    for i = #out, before + 1, -1 do out[i] = nil end
    local msg = tostring(err)
    -- A key another node serves, a slot half moved (undeclared keys during rehashing) or no longer served:
    -- nothing of this shard ran, and the caller asks the node that serves it.
    local elsewhere = string.find(msg, 'non local key', 1, true) or string.find(msg, 'rehashing', 1, true)
      or string.find(msg, 'slot not served', 1, true)
    local code = elsewhere and -10 or -9
    for _ = 1, count do
      local n = #out
      out[n + 1], out[n + 2], out[n + 3] = code, msg, false
    end
  end
  a = last + 1
end
return out
