// Drives POST /api/orders: first N new intents (each its own key: a full execution), then the
// same N keys again (each a stored-response replay), with C requests in flight; prints
// throughput and latency percentiles for both.
const [base, total, concurrency] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const body = JSON.stringify({ items: [{ sku: 'MUG-001', quantity: 1 }] });

const first = await fetch(`${base}/api/products`);
const cookie = first.headers.get('set-cookie').split(';')[0];
const keys = Array.from({ length: total }, (_, i) => `bench-${Date.now()}-${i}`);

async function run(label, expectReplay) {
  const latencies = [];
  let next = 0;
  let failures = 0;
  const started = performance.now();
  async function worker() {
    while (next < keys.length) {
      const key = keys[next++];
      const t0 = performance.now();
      const response = await fetch(`${base}/api/orders`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'idempotency-key': key, cookie },
        body,
      });
      await response.arrayBuffer();
      latencies.push(performance.now() - t0);
      const replayed = response.headers.get('idempotent-replayed') === 'true';
      if (response.status !== 201 || replayed !== expectReplay) failures++;
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const pct = (p) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))].toFixed(1);
  console.log(
    `${label}: ${total} requests, concurrency ${concurrency}: ${(total / seconds).toFixed(0)} req/s, ` +
      `p50 ${pct(50)} ms, p95 ${pct(95)} ms, p99 ${pct(99)} ms, unexpected answers ${failures}`,
  );
}

await run('new orders (execute)', false);
await run('same keys again (replay)', true);
