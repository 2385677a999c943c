// Starts and stops real server processes (the release build) for the browser tests, each
// on its own fresh database.
import { execFileSync, spawn, spawnSync, ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer } from 'node:net';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '..', '..');
/** The PostgreSQL server the programs under test use (scripts/postgres.sh picks it). */
const PG_URL = process.env.ONCE_PG_URL ?? 'postgres://postgres@127.0.0.1:5432';

/** Every browser-test server: fault injection on (for the gates), a short lease (so a
 * crashed request is taken over within seconds). */
export const E2E_SERVER_ENV: Record<string, string> = {
  ONCE_FAULT_INJECTION: 'on',
  IDEMPOTENCY_LEASE_MS: '3000',
  // Every test's browser is a new shopper from the same address: the per-client bounds on
  // new sessions and waiting orders are the API tests' to prove (limits.rs).
  NEW_SESSIONS_PER_CLIENT_PER_HOUR: '0',
  QUOTA_PENDING_ORDERS_PER_CLIENT: '0',
  QUOTA_ORDERS_PER_CLIENT_PER_HOUR: '0',
};

export interface ServerOptions {
  port: number;
  database: string;
  env?: Record<string, string>;
}

export interface RunningServer {
  baseURL: string;
  process: ChildProcess;
  options: ServerOptions;
}

/** The provider's callback signing secret, one random secret per test run. The first call
 * (in globalSetup) generates it into `process.env`, which the test workers inherit, so the
 * provider and every server, shared or started inside a test, agree on it. */
export function webhookSecret(): string {
  const secret = process.env.ONCE_E2E_WEBHOOK_SECRET || randomBytes(32).toString('hex');
  process.env.ONCE_E2E_WEBHOOK_SECRET = secret;
  return secret;
}

/** The merchant's key the provider takes calls with and the servers call with, made and
 * shared like the webhook secret. */
export function providerApiKey(): string {
  const key = process.env.ONCE_E2E_PROVIDER_API_KEY || `sk_sandbox_${randomBytes(24).toString('hex')}`;
  process.env.ONCE_E2E_PROVIDER_API_KEY = key;
  return key;
}

/** The header a test's own call to the provider carries: the merchant's key. */
export function providerAuth(): Record<string, string> {
  return { authorization: `Bearer ${providerApiKey()}` };
}

/** The servers' fingerprint secret, made and shared like the webhook secret: every server of
 * a run (a restarted one too) must key fingerprints alike. */
export function fingerprintSecret(): string {
  const secret = process.env.ONCE_E2E_FINGERPRINT_SECRET || randomBytes(32).toString('hex');
  process.env.ONCE_E2E_FINGERPRINT_SECRET = secret;
  return secret;
}

/** A port nobody listens on now, for a server a test starts itself (a fixed one could still
 * be held by the server of an earlier, failed repetition of the same test). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      probe.close(() => (port ? resolve(port) : reject(new Error('no free port'))));
    });
  });
}

/** This run's tag, made and shared like the secrets: every database of the run carries it,
 * so the run's teardown drops exactly its own (`dropRunDatabases`). */
export function runTag(): string {
  const tag = process.env.ONCE_E2E_RUN || randomBytes(6).toString('hex');
  process.env.ONCE_E2E_RUN = tag;
  return tag;
}

export function freshDatabaseName(prefix = 'once_e2e'): string {
  return `${prefix}_${runTag()}_${randomUUID().replace(/-/g, '')}`;
}

/** Drops every database of this run (the shared server's, the provider's, and those of
 * servers tests started): what a run makes, it leaves nowhere. */
export function dropRunDatabases(): void {
  const psql = (sql: string) =>
    execFileSync('psql', ['-X', '-qAt', `${PG_URL}/postgres`, '-c', sql], { encoding: 'utf8' });
  const names = psql(
    `SELECT datname FROM pg_database WHERE datname ~ '^once_(provider_)?e2e_${runTag()}_'`,
  );
  for (const name of names.split('\n').filter(Boolean)) {
    psql(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
  }
}

/** The sandbox payment provider every browser-test server charges. */
export const PROVIDER_PORT = 3101;

export async function startProvider(
  database: string,
  webhookURL: string,
  port = PROVIDER_PORT,
): Promise<RunningServer> {
  const baseURL = `http://127.0.0.1:${port}`;
  const child = spawn(path.join(ROOT, 'target', 'release', 'provider'), [], {
    cwd: ROOT,
    env: {
      ...process.env,
      PROVIDER_DATABASE_URL: `${PG_URL}/${database}`,
      PROVIDER_ADDR: `127.0.0.1:${port}`,
      PROVIDER_WEBHOOK_URL: webhookURL,
      PROVIDER_WEBHOOK_SECRET: webhookSecret(),
      PROVIDER_API_KEY: providerApiKey(),
      RUST_LOG: process.env.RUST_LOG ?? 'warn',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  await waitForHealth(baseURL, child);
  return { baseURL, process: child, options: { port, database } };
}

export async function startServer(options: ServerOptions): Promise<RunningServer> {
  const baseURL = `http://127.0.0.1:${options.port}`;
  const child = spawn(path.join(ROOT, 'target', 'release', 'server'), [], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: `${PG_URL}/${options.database}`,
      LEPTOS_SITE_ADDR: `127.0.0.1:${options.port}`,
      LEPTOS_SITE_ROOT: path.join(ROOT, 'target', 'site'),
      PROVIDER_URL: `http://127.0.0.1:${PROVIDER_PORT}`,
      PROVIDER_WEBHOOK_SECRETS: webhookSecret(),
      PROVIDER_API_KEY: providerApiKey(),
      IDEMPOTENCY_FINGERPRINT_SECRETS: fingerprintSecret(),
      RUST_LOG: process.env.RUST_LOG ?? 'warn',
      ...E2E_SERVER_ENV,
      ...options.env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  await waitForHealth(baseURL, child);
  return { baseURL, process: child, options };
}

/** A server of the test's own, on a fresh database, with the operator console open to
 * `password` and the reconciler left to the operator's button; `env` adds to it. */
export async function startConsoleServer(password: string, env: Record<string, string> = {}): Promise<RunningServer> {
  return startServer({
    port: await freePort(),
    database: freshDatabaseName(),
    env: { ...E2E_SERVER_ENV, OPERATOR_PASSWORD: password, RECONCILE_EVERY_SECS: '3600', ...env },
  });
}

/** `server operator-browser` against `server`'s database and settings: the link it prints
 * (a path), for a new browser to take. */
export function operatorBrowserLink(server: RunningServer, password: string): string {
  const made = spawnSync(path.join(ROOT, 'target', 'release', 'server'), ['operator-browser'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: `${PG_URL}/${server.options.database}`,
      PROVIDER_WEBHOOK_SECRETS: webhookSecret(),
      PROVIDER_API_KEY: providerApiKey(),
      IDEMPOTENCY_FINGERPRINT_SECRETS: fingerprintSecret(),
      OPERATOR_PASSWORD: password,
      RUST_LOG: 'warn',
    },
    encoding: 'utf8',
  });
  const link = /\/operator\/login\?browser=\w+/.exec(made.stdout ?? '');
  if (!link) throw new Error(`server operator-browser printed no link: ${made.stdout} ${made.stderr}`);
  return link[0];
}

async function waitForHealth(baseURL: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      const response = await fetch(`${baseURL}/healthz`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`server at ${baseURL} did not become healthy`);
}

export async function stopServer(server: RunningServer, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  // Already gone: ended by itself, or by a signal (then only signalCode is set).
  if (server.process.exitCode !== null || server.process.signalCode !== null) return;
  const exited = new Promise((r) => server.process.once('exit', r));
  server.process.kill(signal);
  await exited;
}
