-- Shared by the hold scripts (inserted where a script says `-- @include hold-record`; needs `buckets`).
-- A hold is a field of the shard's record hashes (buckets.lua), like a deduction's record, whose value starts
-- with a letter so that deduct-7.lua and compensate-6.lua never take it for a deduction:
--   "h<state>|<units>|<expiresMs>|<limited>|<rb>|<remaining>|<t>|<user>"
-- state h held, r released, x expired; expiresMs on the Redis server's clock; limited 1 when the units count
-- toward the user's per-user limit; rb the shard's rebuild mark when the hold was made; user id last (ids
-- never contain '|'). A Confirm replaces it with a deduction's record carrying the flag 'h'.
local function unpackHold(v)
  local st, hq, e, l, b, r, t, u = string.match(v, '^h(%a)|(%d+)|(%d+)|(%d)|([^|]*)|(%-?%d+)|(%d*)|(.*)$')
  if not st then return nil end
  return { st = st, hq = tonumber(hq), e = tonumber(e), l = l == '1', b = b, r = r, t = t, u = u }
end

local function packHold(h)
  return 'h' .. h.st .. '|' .. h.hq .. '|' .. h.e .. '|' .. (h.l and '1' or '0') .. '|' .. h.b .. '|' .. h.r .. '|' .. h.t .. '|' .. h.u
end

-- rebuiltSince: whether a recovery rebuilt the shard (its `rb` field) after the hold was made. The rebuild
-- put the hold's units back on sale already (they are part of MySQL's remaining, which it loaded): such a hold
-- ends as expired without giving anything back, or they would count twice.
-- findHold: the hold recorded under `field` in the record hashes (KEYS[from..from+2]) and where it is, or, when
-- a Confirm already turned it into a deduction, nil plus the units it confirmed; nil, nil when there is none.
local function findHold(from, field)
  local packed, at = findField(from, field)
  if not packed then return nil, nil end
  local h = unpackHold(packed)
  if h then return h, at end
  local rec = unpackRecord(packed)
  if rec.q and hasFlag(rec, 'h') then return nil, nil, tonumber(rec.q) end
  return nil, nil
end

local function rebuiltSince(shardKey, h)
  return (redis.call('HGET', shardKey, 'rb') or '') ~= h.b
end

-- giveBack: moves a hold's units out of `held`; `units` of them back to `avail` and out of the user's count
-- (when they counted toward a limit). Returns the shard's avail after it.
local function giveBack(shardKey, usersKey, h, units)
  redis.call('HINCRBY', shardKey, 'held', -h.hq)
  local avail = redis.call('HINCRBY', shardKey, 'avail', units)
  if h.l and units > 0 then
    local n = tonumber(redis.call('HGET', usersKey, h.u) or '0')
    redis.call('HSET', usersKey, h.u, math.max(0, n - units))
  end
  return avail
end
