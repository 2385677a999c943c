import { test, expect, completeCharge, pendingAttempt, placeOrder } from '../support/shop';
import { providerAuth, startConsoleServer, stopServer } from '../support/server';

const PROVIDER = () => process.env.ONCE_E2E_PROVIDER_URL!;
const PASSWORD = 'e2e-operator-password';

test.afterEach(async ({ page }, testInfo) => {
  await page.screenshot({ path: testInfo.outputPath('final.png'), fullPage: true });
});

test('10. an operator sees a payment lost with its webhook, runs the reconciler and sees it repaired', async ({ page, request }) => {
  const server = await startConsoleServer(PASSWORD);
  const base = server.baseURL;
  try {
    // The provider keeps the charge "processing" (the shop keeps the attempt pending), then
    // completes it, and the webhook that would tell the shop is lost for good.
    await request.post(`${PROVIDER()}/v1/admin/chaos`, { data: { drop_webhooks: true }, headers: providerAuth() });
    const orderId = await placeOrder(page, base);
    const attempt = await pendingAttempt(page, base, orderId);
    await completeCharge(request, PROVIDER(), attempt.id);
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
    // Found in the provider's ledger (its subject is the charge), not by settling the attempt.
    await expect(finding).toContainText('ch_');

    // The attempt is paid now: the console says so, and so does the shopper's own order
    // (the console's session is separate, so this browser is still that shopper).
    const repaired = await (await page.request.get(`${base}/api/orders/${orderId}`)).json();
    expect(['paid', 'fulfilled']).toContain(repaired.status);
    await page.getByRole('link', { name: 'Overview' }).click();
    await expect(page.getByTestId('overview')).toContainText('Payments: succeeded');
    await expect(page.getByTestId('overview')).not.toContainText('Payments: pending');
  } finally {
    await request.post(`${PROVIDER()}/v1/admin/chaos`, { data: {}, headers: providerAuth() });
    await stopServer(server);
  }
});
