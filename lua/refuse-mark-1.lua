--[[
  Marks a deduction that settlement refused (MySQL did not have its units): its units are NOT put back on
  sale — the caller holds them and they never existed in the record — but a later Compensate must know not
  to return them either (compensate-4.lua reads the mark).

  KEYS[1] request record  <ns>:{<tag>}:req:<requestId>   (may have expired: then nothing to mark)

  Returns
    1  marked
    0  no record (expired or lost)
]]
local key = KEYS[1]
if redis.call('EXISTS', key) == 0 then return 0 end
redis.call('HSET', key, 'x', 1)
return 1
