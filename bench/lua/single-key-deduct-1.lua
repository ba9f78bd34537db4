--[[
  Benchmark baseline "single Redis key": the usual one-key flash-sale script. Checks and decrements one
  counter atomically; no shards, no idempotency record, no outbox.

  KEYS[1] stock counter   <ns>:sk:{<couponId>}   integer units left

  ARGV[1] quantity        integer >= 1

  Returns
    { 1, remaining }   deducted; remaining = units left after it
    {-1, remaining }   fewer than `quantity` units left (0 = sold out)
    {-2 }              the counter does not exist
]]
local stockKey = KEYS[1]
local quantity = tonumber(ARGV[1])

local stock = redis.call('GET', stockKey)
if not stock then
  return { -2 }
end
stock = tonumber(stock)
if stock < quantity then
  return { -1, stock }
end
return { 1, redis.call('DECRBY', stockKey, quantity) }
