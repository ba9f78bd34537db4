--[[
  Changes one paused shard's stock on behalf of the recovery that holds the pause: first the listed credits
  (shares of restocks committed in MySQL but not yet credited here), each at most once, then `delta` units
  (a surplus taken away, or lost units restored). Never takes avail below zero.

  KEYS[1] shard hash   <ns>:{<tag>}:shard
  KEYS[2] credits      <ns>:{<tag>}:credits    zset creditId -> appliedMs

  ARGV[1] token        the recovery's lease token (the pause must be ours and still active)
  ARGV[2] delta        units to add (negative: to take away)
  ARGV[3] nowMs
  ARGV[4], ARGV[5], …  optional pairs creditId, quantity

  Returns
    { 1, avail, applied }  done; applied = units of delta actually added (negative when taken)
    {-6 }                  the pause lapsed or is not ours: nothing changed
]]
-- @include paused-for
local shardKey = KEYS[1]
local creditsKey = KEYS[2]
local token = ARGV[1]
local delta = tonumber(ARGV[2])
local nowMs = tonumber(ARGV[3])

local s = redis.call('HMGET', shardKey, 'avail', 'pz', 'pt')
if not s[1] or s[3] ~= token then return { -6 } end
if pausedFor(s[2]) == 0 then return { -6 } end

local avail = tonumber(s[1])
for i = 4, #ARGV - 1, 2 do
  if not redis.call('ZSCORE', creditsKey, ARGV[i]) then
    avail = redis.call('HINCRBY', shardKey, 'avail', ARGV[i + 1])
    redis.call('ZADD', creditsKey, nowMs, ARGV[i])
  end
end
local applied = delta
if delta < 0 and -delta > avail then applied = -avail end
if applied ~= 0 then avail = redis.call('HINCRBY', shardKey, 'avail', applied) end
return { 1, avail, applied }
