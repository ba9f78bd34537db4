--[[
  Reads one request record (the sold-out fast path's replay, the audit API). Writes nothing.

  KEYS[1..3] record hashes  <ns>:{<tag>}:rq:<bucket>   buckets first .. first + 2 (lua/includes/buckets.lua)

  ARGV[1] recordField       the request id as a record field (keys.ts recordField)
  ARGV[2] windowSec         idempotency window, seconds (the bucket width)
  ARGV[3] firstBucket       bucket of KEYS[1]

  Returns
    { 1, packed }  the packed record "q|r|t|flags|u" (lua/includes/buckets.lua)
    { 0 }          no record
    {-8 }          the caller's clock is too far off the server's: the three hashes may not be the live ones
]]
-- @include buckets
if not writeSlot(tonumber(ARGV[2]), tonumber(ARGV[3])) then return { -8 } end
local packed = findField(1, ARGV[1])
if packed then return { 1, packed } end
return { 0 }
