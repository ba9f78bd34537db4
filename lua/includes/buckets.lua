-- Shared by the scripts that read or write request records and claims (inserted where a script says
-- `-- @include buckets`). Records and claims are fields of per-shard hashes, one hash per time bucket one
-- idempotency window wide (Redis 7.0 has no per-field TTL): a field written in bucket b lives in a hash that
-- expires at the end of bucket b + 1, so it is kept at least one window and at most two.
--
-- The caller passes the hashes of three consecutive buckets, first .. first + 2, chosen from its own clock
-- (keys.ts firstBucket: the bucket nearest its clock, minus 2). The bucket written and the buckets that can
-- hold a live field are taken from the Redis server's clock, the same for every service instance: s and s - 1,
-- which lie inside the three whenever the caller's clock is within half a window of the server's. A lookup
-- reads all three, so a field written just before a failover to a node whose clock is a little behind is
-- still found.
-- The server's second, read once per call: node-batch-1.lua asks for it once per shard.
local serverSecond
local function serverBucket(windowS)
  if not serverSecond then serverSecond = tonumber(redis.call('TIME')[1]) end
  return math.floor(serverSecond / windowS)
end

-- The position (1..3) among the three hashes of the bucket to write now, or nil when the three do not hold
-- both live buckets (the caller's clock is more than half a window off the server's, and near enough to a
-- boundary): refuse rather than miss a field.
local function writeSlot(windowS, firstBucket)
  local i = serverBucket(windowS) - firstBucket + 1
  if i == 2 or i == 3 then return i end
  return nil
end

-- Expiry of bucket hash `bucket`: the end of the next bucket, plus a minute for clock differences between a
-- master and the replica that may replace it.
local function bucketExpiry(windowS, bucket)
  return (bucket + 2) * windowS + 60
end

-- Finds `field` in the hashes keys[from], keys[from + 1], keys[from + 2]: its value and position (0-based).
local function findField(from, field)
  for i = 0, 2 do
    local v = redis.call('HGET', KEYS[from + i], field)
    if v then return v, i end
  end
  return nil, nil
end

-- Writes field = value into the hash at KEYS[from + slot - 1] (bucket firstBucket + slot - 1), with its expiry.
local function writeField(from, slot, firstBucket, windowS, field, value)
  local key = KEYS[from + slot - 1]
  redis.call('HSET', key, field, value)
  redis.call('EXPIREAT', key, bucketExpiry(windowS, firstBucket + slot - 1), 'NX')
end

-- A request record, packed in one field value: "q|r|t|flags|u" — quantity, the shard's avail right after the
-- deduction, the deduction's time (ms), flags ('c' compensated since, 'x' refused by settlement), user id last
-- (ids never contain '|', but the user id may be empty).
local function unpackRecord(v)
  local q, r, t, f, u = string.match(v, '^(%d+)|(%-?%d+)|(%d*)|(%a*)|(.*)$')
  return { q = q, r = r, t = t, f = f, u = u }
end

local function packRecord(rec)
  return rec.q .. '|' .. rec.r .. '|' .. rec.t .. '|' .. rec.f .. '|' .. rec.u
end

local function hasFlag(rec, flag)
  return string.find(rec.f, flag, 1, true) ~= nil
end
