import { Page } from '@playwright/test';
import { test, expect, hydrated, placeOrder } from '../support/shop';
import { freePort, freshDatabaseName, startServer, stopServer, E2E_SERVER_ENV } from '../support/server';

test.afterEach(async ({ page }, testInfo) => {
  await page.screenshot({ path: testInfo.outputPath('final.png'), fullPage: true });
});

/** Pays for a new order on `base` and checks what the shopper sees: "Fulfilled", a
 * shipment number, and a confirmation email that opens and names the same shipment. */
async function payAndSeeItShipped(page: Page, base = '') {
  const orderId = await placeOrder(page, base);
  await page.goto(`${base}/orders/${orderId}`);
  await hydrated(page);
  const orderNo = (await page.getByTestId('order-no').textContent())!;
  await page.getByRole('button', { name: 'Pay' }).click();

  await expect(page.getByTestId('order-status')).toHaveText('Fulfilled');
  const shipment = page.getByTestId('shipment-no');
  await expect(shipment).toHaveText(/^S-\d{6}$/);
  const shipmentNo = (await shipment.textContent())!;

  const [email] = await Promise.all([page.waitForEvent('popup'), page.getByTestId('email-link').click()]);
  await expect(email.getByRole('heading')).toContainText(orderNo);
  await expect(email.getByTestId('email-shipment-no')).toHaveText(shipmentNo);
  await expect(email.getByTestId('email-total')).toHaveText('€62.00');
  await email.close();

  // Shipped once: a reload shows the same shipment.
  await page.reload();
  await expect(page.getByTestId('shipment-no')).toHaveText(shipmentNo);
}

test('8. paying shows the order fulfilled with a shipment number, and its confirmation email opens', async ({ page }) => {
  await payAndSeeItShipped(page);
});

test('9. the same chain over NATS JetStream', async ({ page }) => {
  const tag = freshDatabaseName('e2e');
  const options = {
    port: await freePort(),
    database: freshDatabaseName(),
    env: {
      ...E2E_SERVER_ENV,
      NATS_URL: process.env.ONCE_E2E_NATS_URL ?? 'nats://127.0.0.1:4222',
      NATS_STREAM: tag.toUpperCase(),
      NATS_SUBJECT_PREFIX: `${tag}.events`,
    },
  };
  const server = await startServer(options);
  try {
    await payAndSeeItShipped(page, server.baseURL);
  } finally {
    await stopServer(server);
  }
});
