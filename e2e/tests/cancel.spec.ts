import { test, expect, doubleClickWhileHeld, hydrated, placeOrder, providerCharges, recordPosts } from '../support/shop';

const CANCEL_PATH = /^\/api\/orders\/[^/]+\/cancel$/;

test('double-clicking "Cancel order" sends one request; the order is cancelled and can no longer be paid', async ({ page, baseURL, request }) => {
  const orderId = await placeOrder(page);
  await page.goto(`/orders/${orderId}`);
  await hydrated(page);
  await expect(page.getByTestId('order-status')).toHaveText('Pending payment');
  const posts = recordPosts(page, CANCEL_PATH);
  // The first request is held on the server, so the second click lands while it is in
  // flight: only the button's lock keeps the browser from sending a second request.
  await doubleClickWhileHeld(request, baseURL!, 'double-click-cancel', page.getByTestId('cancel-order'));

  await expect(page.getByTestId('order-status')).toHaveText('Cancelled');
  await expect(page.getByRole('button', { name: 'Pay' })).toHaveCount(0);
  await expect(page.getByTestId('cancel-order')).toHaveCount(0);
  await expect(page.getByTestId('history')).toContainText('Cancelled');
  expect(posts).toHaveLength(1);
  await page.screenshot({ path: 'test-results/cancelled-order.png', fullPage: true });

  await page.reload();
  await expect(page.getByTestId('order-status')).toHaveText('Cancelled');
  await expect(page.getByRole('button', { name: 'Pay' })).toHaveCount(0);
  expect(await providerCharges(page, orderId)).toBe(0);
});

test('a cancel that comes after the order was paid in another tab shows it paid', async ({ page, context }) => {
  const orderId = await placeOrder(page);
  await page.goto(`/orders/${orderId}`);
  await hydrated(page);
  const other = await context.newPage();
  await other.goto(`/orders/${orderId}`);
  await hydrated(other);
  await other.getByRole('button', { name: 'Pay' }).click();
  await expect(other.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);

  const answer = page.waitForResponse((r) => CANCEL_PATH.test(new URL(r.url()).pathname));
  await page.getByTestId('cancel-order').click();
  expect((await answer).status()).toBe(422);
  // The page follows the order instead: paid, with neither form left.
  await expect(page.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);
  await expect(page.getByTestId('cancel-order')).toHaveCount(0);
  expect(await providerCharges(page, orderId)).toBe(1);
});
