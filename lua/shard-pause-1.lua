--[[
  Holds one shard of a coupon still for a recovery: while the pause lasts, every script that changes stock
  (deduct, compensate, move-out, credit) refuses with "paused", so the recovery reads and rewrites the coupon
  as of one moment. The pause ends by itself at `untilMs` (server time) if its holder dies; the holder extends
  it while it works and ends it with shard-resume-1.lua.

  KEYS[1] shard hash   <ns>:{<tag>}:shard     fields avail, transit, net; pz = paused until (ms), pt = holder token

  ARGV[1] token        the recovery's lease token
  ARGV[2] holdMs       how long from now the pause lasts
  ARGV[3] mode         'new': start a pause; 'extend': prolong our own pause, which must not have lapsed

  Returns
    { 1, avail, transit, net, held }  paused (or extended); the shard's figures as of now, frozen until
                                      resumed (held: units in open holds, which hold scripts leave alone
                                      while paused too)
    { 0 }                       the shard hash is missing
    {-5, waitMs }               'new': another holder's pause is active
    {-6 }                       'extend': our pause lapsed or was replaced: what we read may have changed
]]
-- @include paused-for
local shardKey = KEYS[1]
local token = ARGV[1]
local holdMs = tonumber(ARGV[2])
local mode = ARGV[3]

local s = redis.call('HMGET', shardKey, 'avail', 'transit', 'net', 'pz', 'pt', 'held')
if not s[1] then
  if mode == 'extend' then return { -6 } end
  return { 0 }
end
local now = serverNowMs()
local active = s[4] and tonumber(s[4]) > now
if mode == 'extend' then
  if not active or s[5] ~= token then return { -6 } end
elseif active and s[5] ~= token then
  return { -5, tonumber(s[4]) - now }
end
redis.call('HSET', shardKey, 'pz', now + holdMs, 'pt', token)
return { 1, tonumber(s[1]), tonumber(s[2] or '0'), tonumber(s[3] or '0'), tonumber(s[6] or '0') }
