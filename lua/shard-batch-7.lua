--[[
  Group commit: the Deducts and Compensates bound for one shard that arrived together, run in one call, in
  order, each with exactly the steps it runs alone (lua/includes/shard-ops.lua: the same idempotency record,
  per-user limit, stock check, outbox event) and its own reply. The shard is read once and written once for
  all of them, and their outbox events go out as one stream entry (shard-ops.lua openRun / closeRun). A
  request that fails with an error gets that error as its reply; the requests after it still run. Deducts carrying fallback credits are never batched
  (deduct-7.lua).

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>   buckets first .. first + 2 (lua/includes/buckets.lua)
  KEYS[5] user counts       <ns>:{<tag>}:users
  KEYS[6] outbox stream     <ns>:{<tag>}:outbox
  KEYS[7] ack               <ns>:{<tag>}:ack           touched when vouch = 1 and some reply vouches for an
                                                       earlier write (a replay, already compensated), so the
                                                       WAIT after this call covers that write

  ARGV[1] windowSec         idempotency window, seconds (the bucket width)
  ARGV[2] firstBucket       bucket of KEYS[2]
  ARGV[3] couponId
  ARGV[4] shardIndex
  ARGV[5] nowMs
  ARGV[6] vouch             1 at the `replica` ack level
  then 6 per request, from ARGV[7]:
    op            D (deduct) | C (compensate)
    requestId
    recordField   the request id as a record field (keys.ts recordField)
    userId        D: may be empty when limit = 0; C: unused
    quantity      D: integer >= 1; C: the reason (free text for the ledger)
    limit         D: per-user limit, 0 = unlimited; C: 1 when the coupon has a per-user limit

  Returns one reply per request, in order, flat: three values each (code, then up to two; false, a null
  reply, where the single call's reply is shorter). A D gets deduct-7.lua's replies (never -7), a C
  compensate-6.lua's; an error gets -9, message.
]]
-- @include paused-for
-- @include buckets
-- @include shard-ops
-- @include shard-run
local replies = {}
runShard(replies, 1, 7, #ARGV)
return replies
