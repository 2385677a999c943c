// Small steps the browser tests share: fill a cart, wait for hydration, count orders and
// the POSTs the browser sent, and drive the server's test-only fault-injection gates.
import { test as base, expect, APIRequestContext, Locator, Page } from '@playwright/test';
import { providerAuth } from './server';

/** Every spec's `test`: the shared server's gates are reset before each test, so no gate
 * armed, opened or left holding by an earlier test (or an earlier repetition) leaks in.
 * Tests that start their own server get clean gates anyway. */
export const test = base.extend<{ cleanGates: void }>({
  cleanGates: [
    async ({ request, baseURL }, use) => {
      await resetGates(request, baseURL!);
      await use();
    },
    { auto: true },
  ],
});
export { expect };

/** Adds to this page's session cart through the same server function the shop's form uses
 * (each call a new click, so a new add key). A POST never opens a session, so the session is
 * opened first, as loading any page of the shop does. */
export async function addToCart(page: Page, sku: string, quantity = 1, base = '') {
  expect((await page.request.get(`${base}/api/session`)).status()).toBe(200);
  const response = await page.request.post(`${base}/_fn/add_to_cart`, {
    form: { sku, quantity: String(quantity), add_key: crypto.randomUUID() },
    headers: { accept: 'application/json' },
  });
  expect(response.ok()).toBeTruthy();
  await keepDetails(page, base);
}

/** Keeps {@link DETAILS} with this page's cart, as the checkout page does while the shopper
 * types them, so that its checkout carries them (a cart's details go when it is ordered). */
export async function keepDetails(page: Page, base = '') {
  const a = DETAILS.shipping_address;
  const response = await page.request.post(`${base}/_fn/save_checkout_details`, {
    form: { email: DETAILS.email, name: a.name, line1: a.line1, line2: '', postal_code: a.postal_code, city: a.city, country: a.country },
    headers: { accept: 'application/json' },
  });
  expect(response.ok()).toBeTruthy();
}

/** Types `details` into the checkout page's fields, as a shopper does. */
export async function typeDetails(page: Page, details = DETAILS) {
  const a = details.shipping_address;
  await page.getByLabel('Email, for the order\'s confirmation').fill(details.email);
  await page.getByLabel('Full name').fill(a.name);
  await page.getByLabel('Street and number').fill(a.line1);
  await page.getByLabel('Postal code').fill(a.postal_code);
  await page.getByLabel('City').fill(a.city);
  await page.getByLabel('Country').selectOption(a.country);
}

export async function hydrated(page: Page) {
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');
}

/** The orders of this page's session, through the API with the page's cookies. */
export async function orders(page: Page, base = ''): Promise<any[]> {
  const response = await page.request.get(`${base}/api/orders`);
  expect(response.ok()).toBeTruthy();
  return response.json();
}

/** A shopper's details, as an order request carries them. */
export const DETAILS = {
  email: 'ada@example.com',
  shipping_address: { name: 'Ada Lovelace', line1: '1 Main Street', postal_code: 'SW1Y 4JH', city: 'London', country: 'GB' },
};

/** Places an order for a pen through the API with the page's session; returns its id. A
 * write needs a session that exists already, so the session is opened first, as any API
 * client does. */
export async function placeOrder(page: Page, base = ''): Promise<string> {
  expect((await page.request.get(`${base}/api/session`)).status()).toBe(200);
  const response = await page.request.post(`${base}/api/orders`, {
    headers: { 'idempotency-key': crypto.randomUUID() },
    data: { items: [{ sku: 'PEN-005', quantity: 1 }], ...DETAILS },
  });
  expect(response.status()).toBe(201);
  return (await response.json()).id;
}

/** URL paths of the shop's writes (the checkout page posts to `/api/checkout`), for {@link recordPosts}. */
export const PLACE_ORDER_PATH = /^\/api\/checkout$/;
export const PAY_PATH = /^\/api\/orders\/[^/]+\/payments$/;
export const CHECKOUT_FORM_PATH = /^\/checkout$/;

/** From now on, the URLs of the POST requests the page itself sends (not `page.request`)
 * whose path matches `path`; the array fills as the browser sends them. */
export function recordPosts(page: Page, path: RegExp): string[] {
  const posts: string[] = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && path.test(new URL(r.url()).pathname)) posts.push(r.url());
  });
  return posts;
}

/** Records the answers to the POSTs `page` sends to `path`: each one's status, and the
 * `Prefer` header its request carried. */
export function recordAnswers(page: Page, path: RegExp): { status: number; prefer: string | null }[] {
  const answers: { status: number; prefer: string | null }[] = [];
  page.on('response', async (r) => {
    const request = r.request();
    if (request.method() !== 'POST' || !path.test(new URL(r.url()).pathname)) return;
    answers.push({ status: r.status(), prefer: await request.headerValue('prefer') });
  });
  return answers;
}

/** Waits until a repeat waits on the server at `base` for its key's running request. */
export async function waitUntilWaiting(request: APIRequestContext, base: string) {
  await expect
    .poll(async () => (await (await request.get(`${base}/_test/waiters`)).json()).waiting, { timeout: 15_000 })
    .toBeGreaterThanOrEqual(1);
}

/** Releases every held request and disarms every gate of the server at `base`. */
export async function resetGates(request: APIRequestContext, base: string) {
  expect((await request.post(`${base}/_test/reset`)).status()).toBe(204);
}

export async function armGate(request: APIRequestContext, base: string, gate: string) {
  expect((await request.post(`${base}/_test/gates/${gate}/arm`)).status()).toBe(204);
}

export async function openGate(request: APIRequestContext, base: string, gate: string) {
  expect((await request.post(`${base}/_test/gates/${gate}/open`)).status()).toBe(204);
}

export async function waitUntilHeld(request: APIRequestContext, base: string, gate: string) {
  await expect
    .poll(async () => (await (await request.get(`${base}/_test/gates/${gate}`)).json()).waiting, { timeout: 15_000 })
    .toBe(1);
}

/** Double-clicks `button` while the first write it sends is held at `gate` of the server at
 * `base`, so the second click surely lands while that request is in flight; checks that the
 * button is locked meanwhile, then lets the request complete. */
export async function doubleClickWhileHeld(request: APIRequestContext, base: string, gate: string, button: Locator) {
  await armGate(request, base, gate);
  await button.dblclick();
  await waitUntilHeld(request, base, gate);
  await expect(button).toBeDisabled();
  await openGate(request, base, gate);
}

/** A click at the middle of `button` with the raw mouse, as a hand makes it: no wait for
 * the button to be enabled, nor for a navigation. */
export async function mouseClicker(button: Locator): Promise<() => Promise<void>> {
  await button.scrollIntoViewIfNeeded();
  const box = (await button.boundingBox())!;
  const page = button.page();
  return () => page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
}

export const ORDER_URL = /\/orders\/[0-9a-f-]{36}$/;

/** This page's session cart, through the server function the header reads. */
export async function cart(page: Page, base = ''): Promise<{ lines: any[] }> {
  const response = await page.request.post(`${base}/_fn/get_cart`, { headers: { accept: 'application/json' } });
  expect(response.ok()).toBeTruthy();
  return response.json();
}

/** Charges in the sandbox provider's own ledger for this order's payment attempts. */
export async function providerCharges(page: Page, orderId: string): Promise<number> {
  const provider = process.env.ONCE_E2E_PROVIDER_URL!;
  const payments: any[] = await (await page.request.get(`/api/orders/${orderId}/payments`)).json();
  const references = new Set(payments.map((p) => p.id));
  let count = 0;
  let cursor = '';
  do {
    const after = cursor ? `&starting_after=${cursor}` : '';
    const ledger = await (await page.request.get(`${provider}/v1/transactions?limit=100${after}`, { headers: providerAuth() })).json();
    count += ledger.data.filter((c: any) => c.kind === 'charge' && references.has(c.reference)).length;
    cursor = ledger.next_cursor;
  } while (cursor);
  return count;
}

/** From now on, what the page logs as an error and what it throws (a panic in the wasm
 * shows as both). */
export function consoleErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`${page.url()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`${page.url()}: ${e.message}`));
  return errors;
}

/** Opens `url` in a new tab that starts with a copy of `page`'s sessionStorage, as the
 * browser's "Duplicate tab" does. */
export async function duplicateTab(page: Page, url: string): Promise<Page> {
  const storage = await page.evaluate(() => JSON.stringify(Object.entries(sessionStorage)));
  const copy = await page.context().newPage();
  await copy.addInitScript((entries: string) => {
    if (sessionStorage.length === 0) for (const [k, v] of JSON.parse(entries)) sessionStorage.setItem(k, v);
  }, storage);
  await copy.goto(url);
  return copy;
}

/** The sandbox card whose charge stays "processing": an outcome the shop does not know yet. */
export const CARD_PROCESSING = '4000000000000127';

/** Pays `orderId` with a card whose charge stays "processing": the shop answers 503 and
 * keeps the attempt pending. The attempt. */
export async function pendingAttempt(page: Page, base: string, orderId: string): Promise<any> {
  const pending = await page.request.post(`${base}/api/orders/${orderId}/payments`, {
    headers: { 'idempotency-key': crypto.randomUUID() },
    data: { card_number: CARD_PROCESSING },
  });
  expect(pending.status()).toBe(503);
  const [attempt] = await (await page.request.get(`${base}/api/orders/${orderId}/payments`)).json();
  expect(attempt.status).toBe('pending');
  return attempt;
}

/** The provider completes the pending attempt's payment: a charge of its own that succeeds,
 * with the attempt as its reference. The charge's id. */
export async function completeCharge(request: APIRequestContext, provider: string, attemptId: string): Promise<string> {
  const completed = await request.post(`${provider}/v1/charges`, {
    headers: { 'idempotency-key': `e2e-complete-${attemptId}`, ...providerAuth() },
    data: { amount_cents: 6200, currency: 'EUR', card_number: '4242424242424242', reference: attemptId },
  });
  expect(completed.status()).toBe(201);
  return (await completed.json()).id;
}
