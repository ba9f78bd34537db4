--[[
  Group commit: the Deducts, Compensates and Reserves bound for one shard that arrived together, run in one
  call, in order, each with exactly the steps it runs alone (lua/includes/shard-ops.lua and shard-reserve.lua:
  the same idempotency record, per-user limit, stock check, outbox event or hold) and its own reply. The shard
  is read once and written once for all of them, and their outbox events go out as one stream entry
  (shard-ops.lua openRun / closeRun). A request that fails with an error gets that error as its reply; the
  requests after it still run. Deducts and Reserves carrying fallback credits are never batched (deduct-7.lua,
  hold-reserve-7.lua).

  KEYS[1] shard hash        <ns>:{<tag>}:shard
  KEYS[2..4] record hashes  <ns>:{<tag>}:rq:<bucket>   buckets first .. first + 2 (lua/includes/buckets.lua)
  KEYS[5] user counts       <ns>:{<tag>}:users
  KEYS[6] outbox stream     <ns>:{<tag>}:outbox
  KEYS[7] ack               <ns>:{<tag>}:ack           touched when vouch = 1 and some reply vouches for an
                                                       earlier write (a replay, already compensated), so the
                                                       WAIT after this call covers that write
  KEYS[8] hold expiries     <ns>:{<tag>}:holds         written by Reserves (hold-reserve-7.lua's KEYS[7])

  ARGV[1] windowSec         idempotency window, seconds (the bucket width)
  ARGV[2] firstBucket       bucket of KEYS[2]
  ARGV[3] couponId
  ARGV[4] shardIndex
  ARGV[5] nowMs
  ARGV[6] vouch             1 at the `replica` ack level
  then 6 per request, from ARGV[7]:
    op            D (deduct) | C (compensate) | R<ttlMs> (reserve, the hold lasting ttlMs, e.g. R30000)
    requestId
    recordField   the request id as a record field (keys.ts recordField)
    userId        D, R: may be empty when limit = 0; C: unused
    quantity      D, R: integer >= 1; C: the reason (free text for the ledger)
    limit         D, R: per-user limit, 0 = unlimited; C: 1 when the coupon has a per-user limit

  Returns one reply per request, in order, flat: three values each (code, then up to two; false, a null
  reply, where the single call's reply is shorter). A D gets deduct-7.lua's replies (never -7), a C
  compensate-6.lua's, an R hold-reserve-7.lua's (never -7); an error gets -9, message.
]]
-- @include paused-for
-- @include buckets
-- @include hold-record
-- @include shard-ops
-- @include shard-reserve
-- @include shard-run
local replies = {}
runShard(replies, 1, 7, #ARGV)
return replies
