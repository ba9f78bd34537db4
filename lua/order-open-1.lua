--[[
  Opens an order's record (docs/orders.md): creates it PENDING, or returns the record that exists when the
  same request_id was used before, unless it was used with another kind, user or list of items.

  KEYS[1] order record   <ns>:order:{o:<orderId>}   hash: k kind, u user, it items (JSON), t ttlMs, st state,
                                                     c createdMs, dm decidedMs, x expiresAtMs, ab abort,
                                                     rf refused (JSON)

  ARGV[1] kind        reserve | deduct
  ARGV[2] userId      may be empty
  ARGV[3] items       JSON list of {couponId, quantity}, as the caller's order lists them
  ARGV[4] ttlMs
  ARGV[5] nowMs
  ARGV[6] windowSec   the idempotency window: the record is kept two windows and a minute, as long as its items'
                      hold records can be (includes/buckets.lua), and again that long from each move
                      (order-move-1.lua): a retry that found the items recorded but not the order decided it
                      again from them (a compensated order answered DEDUCTED)

  Returns
    { 0 }                    created (state pending)
    { 1, f1, v1, f2, v2 ...} the record that exists (HGETALL)
    {-3, field, recorded }   the request_id was used with another kind, user_id or items
]]
local key = KEYS[1]
local existing = redis.call('HMGET', key, 'k', 'u', 'it')
if existing[1] then
  if existing[1] ~= ARGV[1] then return { -3, 'kind', existing[1] } end
  if existing[2] ~= ARGV[2] then return { -3, 'user_id', existing[2] } end
  if existing[3] ~= ARGV[3] then return { -3, 'items', existing[3] } end
  local all = redis.call('HGETALL', key)
  table.insert(all, 1, 1)
  return all
end
redis.call('HSET', key, 'k', ARGV[1], 'u', ARGV[2], 'it', ARGV[3], 't', ARGV[4], 'st', 'pending', 'c', ARGV[5])
redis.call('EXPIRE', key, 2 * tonumber(ARGV[6]) + 60)
return { 0 }
