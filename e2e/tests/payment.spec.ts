import { test, expect, doubleClickWhileHeld, hydrated, PAY_PATH, placeOrder, providerCharges, recordPosts } from '../support/shop';

/** Paid, or already past it: the fulfillment consumer ships a paid order within moments. */
const PAID = /^(Paid|Fulfilled)$/;

test('double-clicking "Pay" sends one request, charges once and the page shows it paid', async ({ page, baseURL, request }) => {
  const orderId = await placeOrder(page);
  await page.goto(`/orders/${orderId}`);
  await hydrated(page);
  await expect(page.getByTestId('order-status')).toHaveText('Pending payment');
  const posts = recordPosts(page, PAY_PATH);
  // The first request is held on the server, so the second click lands while it is in
  // flight: only the button's lock keeps the browser from sending a second request.
  await doubleClickWhileHeld(request, baseURL!, 'double-click-pay', page.getByRole('button', { name: 'Pay' }));

  await expect(page.getByTestId('order-status')).toHaveText(PAID);
  await expect(page.getByRole('button', { name: 'Pay' })).toHaveCount(0);
  expect(posts).toHaveLength(1);
  expect(await providerCharges(page, orderId)).toBe(1);
});

test('paying with the lost-response card still charges once and shows it paid', async ({ page }) => {
  const orderId = await placeOrder(page);
  await page.goto(`/orders/${orderId}`);
  await hydrated(page);
  await page.getByLabel('Card number').fill('4000000000000259');
  await page.getByRole('button', { name: 'Pay' }).click();

  await expect(page.getByTestId('order-status')).toHaveText(PAID);
  expect(await providerCharges(page, orderId)).toBe(1);
  await page.reload();
  await expect(page.getByTestId('order-status')).toHaveText(PAID);
});

test('a declined card is shown, and paying again with a good card works', async ({ page }) => {
  const orderId = await placeOrder(page);
  await page.goto(`/orders/${orderId}`);
  await hydrated(page);
  await page.getByLabel('Card number').fill('4000000000000002');
  await page.getByRole('button', { name: 'Pay' }).click();
  await expect(page.getByTestId('pay-status')).toHaveText(/declined/);
  await expect(page.getByTestId('order-status')).toHaveText('Pending payment');

  await page.getByLabel('Card number').fill('4242424242424242');
  await page.getByRole('button', { name: 'Pay' }).click();
  await expect(page.getByTestId('order-status')).toHaveText(PAID);
  expect(await providerCharges(page, orderId)).toBe(2);
});
