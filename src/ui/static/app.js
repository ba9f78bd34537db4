// The live stock page: lists coupons, and streams the chosen one's level with WatchStock over the Connect
// protocol (JSON, server streaming) using fetch — no client library, no build step. A Connect streaming body
// is a sequence of envelopes: 1 flag byte (0x02 = end of stream, carrying an error if any), a 4-byte
// big-endian length, then that many bytes of JSON.
const WATCH_PATH = '/inventory.v1.InventoryService/WatchStock';
const $ = (id) => document.getElementById(id);
const num = (v) => Number(v ?? 0); // proto3 JSON leaves zeros out and sends int64 as strings
const fmt = new Intl.NumberFormat('en-US');

let current; // { couponId, controller }

// The bearer token for SHARDSTOCK_AUTH=token, kept in sessionStorage (this tab only, gone when it closes).
const TOKEN_KEY = 'shardstock.token';
const authHeaders = () => {
  const token = sessionStorage.getItem(TOKEN_KEY);
  return token ? { authorization: `Bearer ${token}` } : {};
};
let updates = 0;
const shardPeak = new Map(); // shard index -> largest level seen, the height of its column

function envelope(json) {
  const body = new TextEncoder().encode(JSON.stringify(json));
  const out = new Uint8Array(5 + body.length);
  new DataView(out.buffer).setUint32(1, body.length);
  out.set(body, 5);
  return out;
}

/** Yields each message of a Connect server stream; throws the stream's error. */
async function* connectStream(path, request, signal) {
  const res = await fetch(path, {
    method: 'POST',
    headers: { 'content-type': 'application/connect+json', 'connect-protocol-version': '1', ...authHeaders() },
    body: envelope(request),
    signal,
  });
  if (!res.ok || !res.body) {
    const err = await res.json().catch(() => ({}));
    throw new Error(`${err.code ?? res.status}: ${err.message ?? res.statusText}`);
  }
  const reader = res.body.getReader();
  let buf = new Uint8Array(0);
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    const joined = new Uint8Array(buf.length + value.length);
    joined.set(buf);
    joined.set(value, buf.length);
    buf = joined;
    while (buf.length >= 5) {
      const len = new DataView(buf.buffer, buf.byteOffset).getUint32(1);
      if (buf.length < 5 + len) break;
      const flags = buf[0];
      const msg = JSON.parse(new TextDecoder().decode(buf.subarray(5, 5 + len)) || '{}');
      buf = buf.subarray(5 + len);
      if (flags & 0x02) {
        if (msg.error) throw new Error(`${msg.error.code}: ${msg.error.message ?? ''}`);
        return;
      }
      yield msg;
    }
  }
}

function setStatus(text, cls) {
  const el = $('status');
  el.textContent = text;
  el.className = `status ${cls ?? ''}`;
}

/** The sale's status as a badge when it is not open (paused, not started, ended) and its window in the footer. */
function renderSale(sale) {
  const status = (sale?.status ?? 'SALE_STATUS_OPEN').replace('SALE_STATUS_', '').replace('_', ' ');
  $('sale').hidden = status === 'OPEN';
  $('sale').textContent = `SALE ${status}`;
  const at = (t) => (t ? new Date(t).toLocaleString() : null);
  $('sale-window').textContent = `${status.toLowerCase()} · ${at(sale?.startsAt) ?? 'open'} – ${at(sale?.endsAt) ?? 'no end'}`;
}

function render(level) {
  const total = num(level.totalStock);
  const available = num(level.available);
  const deducted = num(level.deducted);
  const settled = total - num(level.settledRemaining);
  $('available').textContent = fmt.format(available);
  $('total').textContent = fmt.format(total);
  $('deducted').textContent = fmt.format(deducted);
  // Held units (Reserve) are neither available nor deducted until confirmed, released or expired.
  $('held').textContent = fmt.format(num(level.held ?? 0));
  $('settled').textContent = fmt.format(settled);
  $('pending').textContent = fmt.format(num(level.pendingSettlement));
  $('sold-out').hidden = !level.soldOut;
  renderSale(level.sale);
  $('bar-deducted').style.width = `${total ? Math.min(100, (deducted / total) * 100) : 0}%`;
  $('bar-settled').style.width = `${total ? Math.min(100, (settled / total) * 100) : 0}%`;
  $('updates').textContent = String(++updates);
  $('observed').textContent = level.observedAt ? new Date(level.observedAt).toLocaleTimeString() : '–';
  $('detail').dataset.available = String(available);

  const shards = level.shards ?? [];
  const box = $('shards');
  if (box.children.length !== shards.length) {
    box.replaceChildren(
      ...shards.map(() => {
        const el = document.createElement('div');
        el.className = 'shard';
        el.innerHTML =
          '<div class="col"><div class="transit"></div><div class="fill"></div></div><div class="n"></div><div class="i"></div>';
        return el;
      }),
    );
  }
  shards.forEach((s, i) => {
    const index = num(s.index);
    const avail = num(s.available);
    const transit = num(s.inTransit);
    const peak = Math.max(shardPeak.get(index) ?? 0, avail + transit, 1);
    shardPeak.set(index, peak);
    const el = box.children[i];
    el.classList.toggle('empty', avail === 0);
    el.querySelector('.fill').style.height = `${(avail / peak) * 100}%`;
    const t = el.querySelector('.transit');
    t.style.bottom = `${(avail / peak) * 100}%`;
    t.style.height = `${(transit / peak) * 100}%`;
    el.querySelector('.n').textContent = fmt.format(avail);
    el.querySelector('.i').textContent = `#${index}`;
  });
}

async function watch(couponId) {
  current?.controller.abort();
  const controller = new AbortController();
  current = { couponId, controller };
  updates = 0;
  shardPeak.clear();
  $('hint').hidden = true;
  $('detail').hidden = false;
  $('coupon-id').textContent = couponId;
  $('shards').replaceChildren();
  $('audit-out').hidden = true;
  for (const b of document.querySelectorAll('nav button')) b.setAttribute('aria-current', String(b.dataset.coupon === couponId));
  while (!controller.signal.aborted) {
    try {
      setStatus('connecting…');
      for await (const msg of connectStream(WATCH_PATH, { couponId }, controller.signal)) {
        setStatus('live', 'live');
        if (msg.level) render(msg.level);
      }
      setStatus('stream ended, reconnecting…', 'down');
    } catch (err) {
      if (controller.signal.aborted) return;
      setStatus(`disconnected (${err.message}), retrying…`, 'down');
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** One Connect unary call with JSON; throws "code: message" on an error answer. */
async function connectUnary(method, request) {
  const res = await fetch(`/inventory.v1.InventoryService/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'connect-protocol-version': '1' },
    body: JSON.stringify(request),
  });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) throw new Error(`${body.code ?? res.status}: ${body.message ?? res.statusText}`);
  return body;
}

/** The audit view of one request (GetDeduction): its state and where each part of it stands. */
async function lookUp(event) {
  event.preventDefault();
  const out = $('audit-out');
  out.hidden = false;
  const requestId = $('audit-request').value.trim();
  if (!current || !requestId) return;
  try {
    const d = await connectUnary('GetDeduction', { couponId: current.couponId, requestId });
    const at = (t) => (t ? new Date(t).toLocaleString() : '–');
    const lines = [`${(d.state ?? '').replace('DEDUCTION_STATE_', '')}${d.settled ? ' · settled in MySQL' : ''}`];
    if (d.redis)
      lines.push(
        `redis: ${num(d.redis.quantity)} units on shard ${num(d.redis.shard)} at ${at(d.redis.deductedAt)}${d.redis.compensated ? ', compensated' : ''}${d.redis.refused ? ', refused by MySQL' : ''}`,
      );
    for (const e of d.inFlight ?? [])
      lines.push(`in flight: ${e.kind.replace('LEDGER_KIND_', '')} ${num(e.quantity)} (${e.seenIn.join(', ')})`);
    for (const l of d.ledger ?? [])
      lines.push(`ledger: ${l.kind.replace('LEDGER_KIND_', '')} ${num(l.quantity)} settled ${at(l.settledAt)}`);
    for (const a of d.anomalies ?? []) lines.push(`anomaly: ${a.kind.replace('LEDGER_KIND_', '')} ${a.reason}`);
    out.textContent = lines.join('\n');
  } catch (err) {
    out.textContent = err.message;
  }
}

async function loadCoupons() {
  const box = $('coupons');
  try {
    const res = await fetch('/ui/coupons', { headers: authHeaders() });
    if (res.status === 401 || res.status === 403) throw new Error('enter a valid token above');
    const coupons = await res.json();
    if (coupons.length === 0) {
      box.innerHTML = '<p class="empty">no coupons yet</p>';
      return;
    }
    box.replaceChildren(
      ...coupons.map((c) => {
        const b = document.createElement('button');
        b.dataset.coupon = c.couponId;
        b.textContent = c.couponId;
        const small = document.createElement('small');
        small.textContent = `${fmt.format(c.totalStock)} units · ${c.shardCount} shards`;
        b.append(small);
        b.addEventListener('click', () => {
          history.replaceState(null, '', `#${encodeURIComponent(c.couponId)}`);
          void watch(c.couponId);
        });
        return b;
      }),
    );
  } catch (err) {
    const p = document.createElement('p');
    p.className = 'empty';
    p.textContent = `could not list coupons: ${err.message}`;
    box.replaceChildren(p);
  }
}

$('token').value = sessionStorage.getItem(TOKEN_KEY) ?? '';
$('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
  void loadCoupons();
  if (current) void watch(current.couponId);
});

$('audit').addEventListener('submit', (e) => void lookUp(e));
await loadCoupons();
const fromHash = decodeURIComponent(location.hash.slice(1));
if (fromHash) void watch(fromHash);
