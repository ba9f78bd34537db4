-- Shared by the hold scripts that end a hold (inserted where a script says `-- @include hold-give-back`).
-- giveBack: moves `units` of a hold from held back to available on the shard, and out of the user's count
-- when the hold counted toward a per-user limit (record field l = 1). Returns the shard's avail after it.
-- rebuiltSince: whether the shard was rebuilt by a recovery (its `rb` field) after the hold was made (record
-- field b: the shard's `rb` then). A rebuild put the hold's units back on sale already (they are part of MySQL's
-- remaining, which it loaded): such a hold ends as expired without giving anything back, or they would double.
local function rebuiltSince(shardKey, b)
  return (redis.call('HGET', shardKey, 'rb') or '') ~= (b or '')
end

local function giveBack(shardKey, userKey, units, limited, heldUnits)
  redis.call('HINCRBY', shardKey, 'held', -heldUnits)
  local avail = redis.call('HINCRBY', shardKey, 'avail', units)
  if limited and units > 0 then
    local n = tonumber(redis.call('GET', userKey) or '0')
    redis.call('SET', userKey, math.max(0, n - units))
  end
  return avail
end
