import { test, expect, completeCharge, pendingAttempt, placeOrder } from '../support/shop';
import { freePort, freshDatabaseName, startProvider, startServer, stopServer, providerAuth, E2E_SERVER_ENV } from '../support/server';

const PASSWORD = 'e2e-operator-password';
/** How long the provider holds the webhook of the charge that completes the payment: long
 * enough for the reconciler to find the charge first. */
const WEBHOOK_DELAY_MS = 6000;

test('11. an operator finds an order by its charge id and reads its whole story in order', async ({ page, request }, testInfo) => {
  // A provider of this test's own, whose webhooks come to this test's server.
  const port = await freePort();
  let providerPort = await freePort();
  while (providerPort === port) providerPort = await freePort();
  const provider = await startProvider(
    freshDatabaseName('once_provider_e2e'),
    `http://127.0.0.1:${port}/webhooks/provider`,
    providerPort,
  );
  const PROVIDER = () => provider.baseURL;
  const server = await startServer({
    port,
    database: freshDatabaseName(),
    env: {
      ...E2E_SERVER_ENV,
      PROVIDER_URL: provider.baseURL,
      OPERATOR_PASSWORD: PASSWORD,
      RECONCILE_EVERY_SECS: '3600',
    },
  });
  const base = server.baseURL;
  try {
    // The charge stays "processing", so the shop keeps the attempt pending.
    const orderId = await placeOrder(page, base);
    const attempt = await pendingAttempt(page, base, orderId);
    // Then the charge completes; its webhook is held, and comes twice.
    await request.post(`${PROVIDER()}/v1/admin/chaos`, { data: { duplicates: 1, delay_ms: WEBHOOK_DELAY_MS }, headers: providerAuth() });
    const chargeId = await completeCharge(request, PROVIDER(), attempt.id);
    expect(chargeId).toMatch(/^ch_/);

    // The operator runs the reconciler before the webhook arrives: it repairs the payment.
    await page.goto(`${base}/operator/login`);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('link', { name: 'Reconciliation' }).click();
    await page.getByRole('button', { name: 'Run now' }).click();
    await expect(page.getByTestId('notice')).toContainText('Run finished');
    await expect(page.getByTestId('findings').locator('tr[data-kind="missed_success"] .status')).toHaveText('repaired');

    // The shopper's client, not knowing, pays again with a fresh key and retries it.
    const key = crypto.randomUUID();
    const again = () => page.request.post(`${base}/api/orders/${orderId}/payments`, {
      headers: { 'idempotency-key': key },
      data: { card_number: '4242424242424242' },
    });
    const refused = await again();
    expect(refused.status()).toBeGreaterThanOrEqual(400);
    expect(refused.status()).toBeLessThan(500);
    const replayed = await again();
    expect(replayed.headers()['idempotent-replayed']).toBe('true');
    expect(replayed.status()).toBe(refused.status());

    // The held webhook arrives, twice; then the operator searches for the charge.
    await expect.poll(async () => {
      await page.goto(`${base}/operator/search?q=${chargeId}`);
      return page.getByTestId('journal').locator('tr[data-kind="callback"]').count();
    }, { timeout: WEBHOOK_DELAY_MS + 20_000 }).toBe(2);
    await page.goto(`${base}/operator`);
    await page.getByRole('searchbox', { name: 'Find an order' }).fill(chargeId);
    await page.getByRole('searchbox', { name: 'Find an order' }).press('Enter');
    // The search opens the page at the first entry carrying the charge, marked; the story's
    // first page has it all.
    await expect(page).toHaveURL(/\/operator\/orders\/[A-Z0-9-]+\?from=(\d+)#e\1$/);
    await expect(page.getByTestId('matched')).toContainText(chargeId);
    await page.getByRole('link', { name: 'oldest' }).first().click();
    await expect(page).toHaveURL(/\/operator\/orders\/[A-Z0-9-]+$/);
    const journal = page.getByTestId('journal');
    await expect(journal).toBeVisible();
    await page.screenshot({ path: testInfo.outputPath('journal.png'), fullPage: true });

    // Each step once, in the order it happened.
    const rows = await journal.locator('tbody tr').evaluateAll((trs) =>
      trs.map((tr) => `${tr.getAttribute('data-kind')} | ${tr.textContent?.replace(/\s+/g, ' ')}`));
    const expected: [string, RegExp][] = [
      ['request', /POST \/api\/orders answered 201: executed/],
      ['payment', /payment attempt recorded/],
      ['provider_call', /charge call to the provider started/],
      // The reconciler's repair, and the finding that records it.
      ['payment', new RegExp(`reconciler payment pending → succeeded.*${chargeId}`)],
      ['status', /reconciler order pending_payment → paid/],
      ['finding', /reconciler finding missed_success/],
      ['request', /payments answered 4\d\d[^,]*: executed/],
      ['replay', /payments answered 4\d\d.*, replayed/],
      ['callback', /callback charge\.succeeded \(provider tx \w+\): already_applied/],
      ['callback', /callback charge\.succeeded \(provider tx \w+\): duplicate, nothing changed/],
    ];
    let from = 0;
    for (const [kind, words] of expected) {
      const at = rows.slice(from).findIndex((r) => r.startsWith(`${kind} |`) && words.test(r));
      expect(at, `${kind} ${words} after row ${from} in\n${rows.join('\n')}`).toBeGreaterThanOrEqual(0);
      from += at + 1;
    }
    // The repair was the reconciler's, the duplicate the callback route's.
    await expect(journal.locator('tr[data-kind="finding"]').first()).toContainText('reconciler');
    await expect(journal.locator('tr[data-kind="callback"]').last()).toContainText('callback');
    // Once each: the repair and the duplicate changed nothing twice.
    await expect(journal.locator('tr[data-kind="status"]', { hasText: 'pending_payment → paid' })).toHaveCount(1);
    await expect(journal.locator('tr[data-kind="payment"]', { hasText: 'pending → succeeded' })).toHaveCount(1);

    await page.getByRole('link', { name: 'Overview' }).click();
    await expect(page.locator('svg.chart')).toHaveCount(4);
    await page.screenshot({ path: testInfo.outputPath('overview.png'), fullPage: true });
  } finally {
    await stopServer(server);
    await stopServer(provider);
  }
});
