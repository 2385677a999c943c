import { test, expect, addToCart, hydrated, DETAILS } from '../support/shop';

// Every page hydrates without errors or warnings in the console (a hydration mismatch shows up here).
test('pages hydrate cleanly', async ({ page }) => {
  const problems: string[] = [];
  page.on('console', (m) => ['error', 'warning'].includes(m.type()) && problems.push(`${m.type()}: ${m.text()}`));
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('response', (r) => r.status() >= 400 && problems.push(`${r.status()} ${r.url()}`));
  await addToCart(page, 'MUG-001', 1);
  const order = await (
    await page.request.post('/api/orders', {
      headers: { 'idempotency-key': crypto.randomUUID() },
      data: { items: [{ sku: 'MUG-001', quantity: 1 }], ...DETAILS },
    })
  ).json();
  for (const path of ['/', '/checkout', '/orders', `/orders/${order.id}`, '/orders/not-an-order']) {
    await page.goto(path);
    await hydrated(page);
  }
  expect(problems).toEqual([]);
});
