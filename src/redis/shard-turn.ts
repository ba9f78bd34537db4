// One call per shard in flight, shared by the batchers that gather a shard's requests while its call runs
// (shard-batcher.ts for script calls, record-read-batcher.ts for record reads).

/**
 * Marks `tag` busy and answers the function that frees it. A call that hangs (a connection killed under it, a
 * failover) must not hold its shard's next requests, so the shard is freed after `atMostMs` regardless;
 * freeing twice is harmless. `onFree` runs once, when the shard is freed: whatever gathered meanwhile has
 * waited a whole call already and goes at once.
 */
export function takeTurn(busy: Set<string>, tag: string, atMostMs: number, onFree: () => void): () => void {
  busy.add(tag);
  let freed = false;
  const timer = setTimeout(free, atMostMs);
  function free(): void {
    if (freed) return;
    freed = true;
    clearTimeout(timer);
    busy.delete(tag);
    onFree();
  }
  return free;
}
