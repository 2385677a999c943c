import { test, expect, placeOrder } from '../support/shop';
import { freePort, freshDatabaseName, startServer, stopServer, E2E_SERVER_ENV } from '../support/server';

const PROVIDER = () => process.env.ONCE_E2E_PROVIDER_URL!;
const PASSWORD = 'e2e-operator-password';
/** The sandbox card whose answer takes 3 s: longer than this server waits for the provider. */
const CARD_SLOW = '4000000000000077';

test.afterEach(async ({ page }, testInfo) => {
  await page.screenshot({ path: testInfo.outputPath('final.png'), fullPage: true });
});

test('10. an operator sees a payment lost with its webhook, runs the reconciler and sees it repaired', async ({ page, request }) => {
  const options = {
    port: await freePort(),
    database: freshDatabaseName(),
    env: {
      ...E2E_SERVER_ENV,
      OPERATOR_PASSWORD: PASSWORD,
      PROVIDER_TIMEOUT_MS: '800',
      PAYMENT_SETTLE_GRACE_MS: '1600',
      RECONCILE_EVERY_SECS: '3600',
    },
  };
  const server = await startServer(options);
  const base = server.baseURL;
  try {
    // The provider loses this charge's webhook for good, and its answer comes too late.
    await request.post(`${PROVIDER()}/v1/admin/chaos`, { data: { drop_webhooks: true } });
    const orderId = await placeOrder(page, base);
    const paid = await page.request.post(`${base}/api/orders/${orderId}/payments`, {
      headers: { 'idempotency-key': crypto.randomUUID() },
      data: { card_number: CARD_SLOW },
    });
    expect(paid.status()).toBe(503);
    // The provider did charge (its ledger says so); the shop does not know.
    await expect
      .poll(async () => {
        const ledger = await (await request.get(`${PROVIDER()}/v1/transactions?limit=100`)).json();
        return ledger.data.filter((c: any) => c.status === 'succeeded' && c.amount_cents === 6200).length;
      })
      .toBeGreaterThan(0);
    const order = await (await page.request.get(`${base}/api/orders/${orderId}`)).json();
    expect(order.status).toBe('pending_payment');

    // A shopper's session does not open the console.
    await page.goto(`${base}/operator`);
    await expect(page).toHaveURL(/\/operator\/login$/);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect(page.getByTestId('overview')).toContainText('Payments: pending');

    await page.getByRole('link', { name: 'Reconciliation' }).click();
    await page.getByRole('button', { name: 'Run now' }).click();
    await expect(page.getByTestId('notice')).toContainText('Run finished');
    const finding = page.getByTestId('findings').locator('tr[data-kind="missed_success"]');
    await expect(finding).toHaveCount(1);
    await expect(finding.locator('.status')).toHaveText('repaired');

    const repaired = await (await page.request.get(`${base}/api/orders/${orderId}`)).json();
    expect(['paid', 'fulfilled']).toContain(repaired.status);
  } finally {
    await request.post(`${PROVIDER()}/v1/admin/chaos`, { data: {} });
    await stopServer(server);
  }
});
