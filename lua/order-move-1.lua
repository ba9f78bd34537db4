--[[
  Moves an order's record from one of the given states to another: the one atomic decision of an order
  (committed, held or aborted) and its later steps (confirmed, compensated). Whoever comes second finds the
  state changed and follows it.

  KEYS[1] order record   <ns>:order:{o:<orderId>}   (fields: see order-open-1.lua)

  ARGV[1] from          comma-separated states the move is allowed from
  ARGV[2] to            the new state
  ARGV[3] nowMs         recorded as dm (decidedMs)
  ARGV[4] notAfterMs    0, or: refuse the move unless nowMs < notAfterMs (a commit only while every hold
                        outlives it by the commit margin)
  ARGV[5] keepSec       with a move, the record is kept at least this long from now (two idempotency windows and
                        a minute): longer than the hold records of any item reserved before it (order-open-1.lua)
  ARGV[6], ARGV[7] ...  optional field, value pairs set with the move

  Returns
    { 0, f1, v1 ... }    moved; the record after the move (HGETALL)
    {-1, f1, v1 ... }    the state allowed the move, but nowMs >= notAfterMs: nothing changed
    { 1, f1, v1 ... }    the state is not one of `from` (decided before): nothing changed
    {-4 }                no such record
]]
local key = KEYS[1]
local state = redis.call('HGET', key, 'st')
if not state then return { -4 } end
local allowed = false
for s in string.gmatch(ARGV[1], '[^,]+') do
  if s == state then allowed = true end
end
local code = 0
if not allowed then
  code = 1
elseif tonumber(ARGV[4]) > 0 and tonumber(ARGV[3]) >= tonumber(ARGV[4]) then
  code = -1
else
  redis.call('HSET', key, 'st', ARGV[2], 'dm', ARGV[3])
  for i = 6, #ARGV, 2 do
    redis.call('HSET', key, ARGV[i], ARGV[i + 1])
  end
  redis.call('EXPIRE', key, ARGV[5], 'GT')
end
local all = redis.call('HGETALL', key)
table.insert(all, 1, code)
return all
