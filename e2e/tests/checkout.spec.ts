import {
  test,
  expect,
  addToCart,
  armGate,
  CHECKOUT_FORM_PATH,
  doubleClickWhileHeld,
  hydrated,
  openGate,
  orders,
  ORDER_URL,
  PLACE_ORDER_PATH,
  recordAnswers,
  recordPosts,
  waitUntilHeld,
  waitUntilWaiting,
} from '../support/shop';
import { freePort, freshDatabaseName, startServer, stopServer, E2E_SERVER_ENV } from '../support/server';

test.afterEach(async ({ page }, testInfo) => {
  await page.screenshot({ path: testInfo.outputPath('final.png'), fullPage: true });
});

test('1. double-clicking "Place order" sends one request and places one order', async ({ page, baseURL, request }) => {
  await addToCart(page, 'MUG-001', 2);
  await page.goto('/checkout');
  await hydrated(page);
  const posts = recordPosts(page, PLACE_ORDER_PATH);
  // The first request is held on the server, so the second click lands while it is in
  // flight: only the button's lock keeps the browser from sending a second request.
  await doubleClickWhileHeld(request, baseURL!, 'double-click-order', page.getByRole('button', { name: 'Place order' }));

  await expect(page).toHaveURL(ORDER_URL);
  await expect(page.getByTestId('order-status')).toHaveText('Pending payment');
  await expect(page.getByTestId('order-no')).toHaveText(/^ONC-\d+$/);
  expect(posts).toHaveLength(1);
  expect(await orders(page)).toHaveLength(1);
});

test('2. several clicks before hydration place exactly one order', async ({ page, baseURL, request }) => {
  // The wasm never arrives during this test: every click is a native form post.
  await page.route('**/pkg/*.wasm', () => {});
  const posts = recordPosts(page, CHECKOUT_FORM_PATH);

  await addToCart(page, 'TEE-002', 1);
  await page.goto('/checkout', { waitUntil: 'domcontentloaded' });
  await expect(page.locator('body')).not.toHaveAttribute('data-hydrated', 'true');
  // Hold the first post inside its transaction so the later clicks really overlap it.
  await armGate(request, baseURL!, 'prehydration');
  // Raw mouse clicks: a shopper does not wait for the pending navigation, and neither do we.
  const box = (await page.getByRole('button', { name: 'Place order' }).boundingBox())!;
  const clickButton = () => page.mouse.click(box.x + box.width / 2, box.y + box.height / 2);
  await clickButton();
  await waitUntilHeld(request, baseURL!, 'prehydration');
  await clickButton();
  await clickButton();
  await openGate(request, baseURL!, 'prehydration');

  await expect(page).toHaveURL(ORDER_URL);
  await expect(page.getByTestId('order-status')).toHaveText('Pending payment');
  expect(posts.length).toBeGreaterThanOrEqual(2);
  expect(await orders(page)).toHaveLength(1);
});

test('3. the server killed mid-request and restarted: the retry completes one order', async ({ page, request }) => {
  const options = { port: await freePort(), database: freshDatabaseName(), env: E2E_SERVER_ENV };
  let server = await startServer(options);
  const base = server.baseURL;
  try {
    await page.goto(`${base}/`);
    await addToCart(page, 'NOTE-003', 3, base);
    await page.goto(`${base}/checkout`);
    await hydrated(page);
    await armGate(request, base, 'crash');
    await page.getByRole('button', { name: 'Place order' }).click();
    await waitUntilHeld(request, base, 'crash');

    await stopServer(server, 'SIGKILL');
    await expect(page.getByTestId('submit-status')).toHaveText(/retrying/);
    server = await startServer(options);

    await expect(page).toHaveURL(ORDER_URL, { timeout: 45_000 });
    await expect(page.getByTestId('order-status')).toHaveText('Pending payment');
    const placed = await orders(page, base);
    expect(placed).toHaveLength(1);
    expect(placed[0].total_cents).toBe(4200);
  } finally {
    await stopServer(server);
  }
});

test('4. a reload while the submit is in flight resumes the same intent, waiting for the first try', async ({ page, baseURL, request }) => {
  await addToCart(page, 'BAG-004', 1);
  await page.goto('/checkout');
  await hydrated(page);
  const answers = recordAnswers(page, PLACE_ORDER_PATH);
  await armGate(request, baseURL!, 'reload');
  await page.getByRole('button', { name: 'Place order' }).click();
  await waitUntilHeld(request, baseURL!, 'reload');

  await page.reload();
  await hydrated(page);
  await expect(page.getByTestId('submit-status')).not.toBeEmpty();
  // The resumed intent asks the server to wait for the held first try (Prefer: wait), so
  // it waits there, answered when the first try commits, instead of polling after a 409.
  await waitUntilWaiting(request, baseURL!);
  await openGate(request, baseURL!, 'reload');

  await expect(page).toHaveURL(ORDER_URL);
  await expect(page.getByTestId('order-status')).toHaveText('Pending payment');
  expect(await orders(page)).toHaveLength(1);
  expect(answers.length).toBeGreaterThanOrEqual(1);
  for (const answer of answers) {
    expect(answer.prefer).toMatch(/^wait=\d+$/);
    expect(answer.status).not.toBe(409);
  }
});

test('5. buying the same cart again after a success is a new intent', async ({ page }) => {
  await addToCart(page, 'TEA-006', 2);
  await page.goto('/checkout');
  await hydrated(page);
  await page.getByRole('button', { name: 'Place order' }).click();
  await expect(page).toHaveURL(ORDER_URL);
  const first = page.url();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (0)');

  await addToCart(page, 'TEA-006', 2);
  await page.goto('/checkout');
  await hydrated(page);
  await page.getByRole('button', { name: 'Place order' }).click();
  await expect(page).toHaveURL(ORDER_URL);
  expect(page.url()).not.toBe(first);
  expect(await orders(page)).toHaveLength(2);
});

test('6. offline during submit, then online: one order', async ({ page, context }) => {
  await addToCart(page, 'CAP-007', 1);
  await page.goto('/checkout');
  await hydrated(page);
  await context.setOffline(true);
  await page.getByRole('button', { name: 'Place order' }).click();
  await expect(page.getByTestId('submit-status')).toHaveText(/retrying/);
  await expect(page.getByRole('button', { name: 'Place order' })).toBeDisabled();
  await context.setOffline(false);

  await expect(page).toHaveURL(ORDER_URL, { timeout: 30_000 });
  expect(await orders(page)).toHaveLength(1);
});

test('7. a tab showing an older cart cannot order it: it shows the cart as it is now', async ({ page, context }) => {
  await addToCart(page, 'NOTE-003', 1);
  await page.goto('/checkout');
  await hydrated(page);
  // Another tab of the same shopper changes the cart.
  const other = await context.newPage();
  await addToCart(other, 'LAMP-008', 1);
  await other.close();

  await page.getByRole('button', { name: 'Place order' }).click();
  await expect(page.getByRole('alert')).toContainText(/your cart changed/i);
  await expect(page.locator('table.lines')).toContainText('Desk lamp');
  expect(await orders(page)).toHaveLength(0);

  // Now the page shows the cart as it is, under its current key: one order of both.
  await hydrated(page);
  await page.getByRole('button', { name: 'Place order' }).click();
  await expect(page).toHaveURL(ORDER_URL);
  const placed = await orders(page);
  expect(placed).toHaveLength(1);
  expect(placed[0].items).toHaveLength(2);
});
