-- Shared by the scripts that change stock (inserted where a script says `-- @include paused-for`).
-- serverNowMs: Redis server time in ms — a recovery's pause deadline is kept in server time because the
-- service instances' clocks differ. pausedFor: how long a shard's pause (its `pz` field) still lasts; 0 when
-- the shard is not paused or the pause lapsed.
local function serverNowMs()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function pausedFor(pausedUntil)
  if not pausedUntil then return 0 end
  return math.max(0, tonumber(pausedUntil) - serverNowMs())
end
