--[[
  Keeps a request id's claim for the idempotency window once its deduction is made (or once a recovery puts
  a lost one back): rewritten without its hold into the current bucket, so it lasts at least a window from
  now. A claim that is gone (the call outlived the hold) is put back as `value`; one held by another user
  (claimed after ours lapsed) is kept as it is — that user's own deduction is refused or recorded on its shard.

  KEYS[1..3] claim hashes   <ns>:{<tag>}:cl:<bucket>   buckets first .. first + 2 (claim-4.lua)

  ARGV[1] claimField        the request id as a field (keys.ts recordField)
  ARGV[2] value             "user|quantity"
  ARGV[3] windowSec         idempotency window, seconds (the bucket width)
  ARGV[4] firstBucket       bucket of KEYS[1]
  ARGV[5] onlyIfAbsent      1: never touch an existing claim (a recovery restoring claims)

  Returns
    1  kept (or put back)
    0  onlyIfAbsent and a claim exists: nothing changed
   -8  the caller's clock is more than half a window off the server's: nothing changed
]]
-- @include paused-for
-- @include buckets
local field = ARGV[1]
local windowSec = tonumber(ARGV[3])
local firstBucket = tonumber(ARGV[4])
local slot = writeSlot(windowSec, firstBucket)
if not slot then return -8 end
local value = ARGV[2]
local prev, at = findField(1, field)
if prev then
  local who, hold = string.match(prev, '^([^|]*|[^|]*)|?(%d*)$')
  local live = hold == '' or tonumber(hold) > serverNowMs()
  if live and ARGV[5] == '1' then return 0 end
  if live then value = who end
  redis.call('HDEL', KEYS[1 + at], field)
end
writeField(1, slot, firstBucket, windowSec, field, value)
return 1
