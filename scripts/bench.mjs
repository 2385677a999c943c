// Payments through the sandbox provider (scripts/bench): opens a session, creates N orders
// (untimed), then pays each one (POST /api/orders/{id}/payments, its own Idempotency-Key,
// the sandbox's always-approved card) with C requests in flight. Prints a human line and a
// RESULT line that scripts/bench reads, and a CPU line: milliseconds of CPU per payment of
// each process. A payment is expected as 201 with status "succeeded". BENCH_PAY_BODY is the
// payment body, when it is not the sandbox's card (Stripe's: a payment method).
import { readFileSync, readdirSync } from 'node:fs';
import http from 'node:http';

const [base, total, concurrency] = [process.argv[2], Number(process.argv[3]), Number(process.argv[4])];
const run = `${Date.now()}-${process.pid}`; // keys of this run never meet another run's

const opened = await fetch(`${base}/api/session`);
const cookie = opened.headers.get('set-cookie').split(';')[0];

// Runs `call(i)` for i in 0..total with `concurrency` in flight. Counts as wrk does: answers
// with status > 399 (non2xx), failed connections (socketErrors), and every answer `call`
// did not accept (unexpected, which includes both). Latencies (ms) come back sorted.
async function drive(call) {
  const latencies = [];
  const counts = { non2xx: 0, socketErrors: 0, unexpected: 0 };
  let next = 0;
  const started = performance.now();
  async function worker() {
    while (next < total) {
      const i = next++;
      const t0 = performance.now();
      try {
        const { status, ok } = await call(i);
        if (status > 399) counts.non2xx++;
        if (!ok) counts.unexpected++;
      } catch {
        counts.socketErrors++;
        counts.unexpected++;
      }
      latencies.push(performance.now() - t0);
    }
  }
  await Promise.all(Array.from({ length: concurrency }, worker));
  latencies.sort((a, b) => a - b);
  return { latencies, seconds: (performance.now() - started) / 1000, ...counts };
}

// node:http with kept-alive connections rather than fetch: the client shares the machine's
// two cores with the processes measured, and fetch spent more CPU per payment than the
// provider does (docs/figures.md, "Payments").
const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
function post(path, key, body) {
  const data = JSON.stringify(body);
  const headers = {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(data),
    'idempotency-key': key,
    cookie,
  };
  return new Promise((resolve, reject) => {
    const request = http.request(`${base}${path}`, { method: 'POST', agent, headers }, (response) => {
      const chunks = [];
      response.on('data', (chunk) => chunks.push(chunk));
      response.on('error', reject);
      response.on('end', () => {
        let json = null;
        try {
          json = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        } catch {
          // not JSON: the caller sees the status alone
        }
        resolve({ status: response.statusCode, json });
      });
    });
    request.on('error', reject);
    // A server that stops answering fails the payment (a socket error) instead of hanging.
    request.setTimeout(30_000, () => request.destroy(new Error('no answer within 30 s')));
    request.end(data);
  });
}

const orders = [];
const created = await drive(async (i) => {
  const { status, json } = await post('/api/orders', `order-${run}-${i}`, { items: [{ sku: 'MUG-001', quantity: 1 }], email: 'ada@example.com', shipping_address: { name: 'Ada Lovelace', line1: '1 Main Street', postal_code: 'SW1Y 4JH', city: 'London', country: 'GB' } });
  orders[i] = json?.id;
  return { status, ok: status === 201 };
});
if (created.unexpected > 0) throw new Error(`${created.unexpected} orders could not be created`);

// CPU seconds each process spends on the payments (BENCH_CPU_PIDS="name=pid ..."), and
// PostgreSQL's (every process named postgres), read from /proc around the payments alone.
const ticks = (pid) => {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime + stime, after pid and comm
  } catch {
    return 0; // a process that ended meanwhile
  }
};
const postgres = () =>
  readdirSync('/proc')
    .filter((p) => /^\d+$/.test(p))
    .filter((p) => {
      try {
        return readFileSync(`/proc/${p}/comm`, 'utf8').trim() === 'postgres';
      } catch {
        return false;
      }
    });
const watched = (process.env.BENCH_CPU_PIDS ?? '').split(' ').filter(Boolean).map((w) => w.split('='));
const cpu = () => ({
  ...Object.fromEntries(watched.map(([name, pid]) => [name, ticks(pid)])),
  client: ticks(process.pid),
  postgresql: postgres().reduce((sum, p) => sum + ticks(p), 0),
});
const cpuBefore = cpu();

const paid = await drive(async (i) => {
  const body = process.env.BENCH_PAY_BODY ? JSON.parse(process.env.BENCH_PAY_BODY) : { card_number: '4242424242424242' };
  const { status, json } = await post(`/api/orders/${orders[i]}/payments`, `pay-${run}-${i}`, body);
  return { status, ok: status === 201 && json?.status === 'succeeded' };
});

const pct = (p) => paid.latencies[Math.min(total - 1, Math.floor((p / 100) * total))].toFixed(2);
const rate = (total / paid.seconds).toFixed(0);
console.log(
  `payments: ${total} at concurrency ${concurrency}: ${rate}/s, p50 ${pct(50)} ms, p99 ${pct(99)} ms, ` +
    `unexpected answers ${paid.unexpected}`,
);
// Clock ticks are 1/100 s on Linux: ticks × 10 / payments is milliseconds per payment.
const cpuAfter = cpu();
const perPayment = Object.keys(cpuAfter)
  .map((name) => `${name}=${(((cpuAfter[name] - cpuBefore[name]) * 10) / total).toFixed(2)}`)
  .join(' ');
console.log(`CPU ${perPayment}`);
console.log(
  `RESULT requests=${total} seconds=${paid.seconds.toFixed(3)} p50_ms=${pct(50)} p99_ms=${pct(99)} ` +
    `non2xx=${paid.non2xx} socket_errors=${paid.socketErrors} unexpected=${paid.unexpected}`,
);
