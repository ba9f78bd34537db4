--[[
  Upgrade from the per-request layout (one key per request record, claim and user count) to the bucketed
  hashes: moves one legacy key's content into its hash field and deletes the key, atomically, so folding the
  same key twice (two instances starting together) moves it once. Never overwrites a field that exists.

  KEYS[1] legacy key        <ns>:{<tag>}:req:<id> | :claim:<id> | :user:<userId>
  KEYS[2..4] bucket hashes  <ns>:{<tag>}:rq:<bucket> (kind req) or :cl:<bucket> (kind claim), buckets
                            first .. first + 2 (lua/includes/buckets.lua); unused for kind user
  KEYS[5] user counts       <ns>:{<tag>}:users

  ARGV[1] kind              req | claim | user
  ARGV[2] field             recordField(request id) for req and claim; the user id for user
  ARGV[3] windowSec         idempotency window, seconds (the bucket width)
  ARGV[4] firstBucket       bucket of KEYS[2]
  ARGV[5] holdMs            a legacy claim with at most this much TTL left was only held, not yet kept

  Returns
    1  folded
    0  nothing to fold (gone, or the field existed: the key is deleted all the same)
   -8  the caller's clock is too far off the server's: nothing changed
]]
-- @include paused-for
-- @include buckets
local legacy = KEYS[1]
local kind = ARGV[1]
local field = ARGV[2]
local windowSec = tonumber(ARGV[3])
local firstBucket = tonumber(ARGV[4])

if kind == 'user' then
  local held = redis.call('GET', legacy)
  if not held then return 0 end
  -- Added, not set: a deduction made under the new layout before the fold counted only its own units.
  redis.call('HINCRBY', KEYS[5], field, held)
  redis.call('DEL', legacy)
  return 1
end

local slot = writeSlot(windowSec, firstBucket)
if not slot then return -8 end
local folded = 0
if kind == 'req' then
  local h = redis.call('HMGET', legacy, 'u', 'q', 'r', 't', 'c', 'x')
  if h[2] and not findField(2, field) then
    local at = slot
    if h[4] then
      local own = math.floor(math.floor(tonumber(h[4]) / 1000) / windowSec) - firstBucket + 1
      at = math.max(slot - 1, math.min(slot, own))
    end
    local flags = (h[5] == '1' and 'c' or '') .. (h[6] == '1' and 'x' or '')
    writeField(2, at, firstBucket, windowSec, field,
      packRecord({ q = h[2], r = h[3] or '0', t = h[4] or '', f = flags, u = h[1] or '' }))
    folded = 1
  end
elseif kind == 'claim' then
  local v = redis.call('GET', legacy)
  if v and not findField(2, field) then
    local left = redis.call('PTTL', legacy)
    if left > 0 and left <= tonumber(ARGV[5]) then v = v .. '|' .. (serverNowMs() + left) end
    writeField(2, slot, firstBucket, windowSec, field, v)
    folded = 1
  end
end
redis.call('DEL', legacy)
return folded
