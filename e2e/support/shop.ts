// Small steps the browser tests share: fill a cart, wait for hydration, count orders, and
// drive the server's test-only fault-injection gates.
import { expect, Page, APIRequestContext } from '@playwright/test';

/** Adds to this page's session cart through the same server function the shop's form uses. */
export async function addToCart(page: Page, sku: string, quantity = 1, base = '') {
  const response = await page.request.post(`${base}/_fn/add_to_cart`, {
    form: { sku, quantity: String(quantity) },
    headers: { accept: 'application/json' },
  });
  expect(response.ok()).toBeTruthy();
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

export const ORDER_URL = /\/orders\/[0-9a-f-]{36}$/;
