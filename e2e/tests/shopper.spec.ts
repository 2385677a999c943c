// The shop as a shopper uses it: leaving and coming back mid-submit, reloads, duplicated
// tabs, two tabs paying, a connection lost after the click, a cart to edit, the keyboard
// only. Every test checks the shop's own records (orders, cart, the provider's ledger), not
// only what the page shows.
import {
  test,
  expect,
  addToCart,
  armGate,
  cart,
  CHECKOUT_FORM_PATH,
  consoleErrors,
  duplicateTab,
  hydrated,
  mouseClicker,
  openGate,
  orders,
  ORDER_URL,
  placeOrder,
  PLACE_ORDER_PATH,
  providerCharges,
  recordPosts,
  waitUntilHeld,
  DETAILS,
} from '../support/shop';
import { freePort, freshDatabaseName, startServer, stopServer, E2E_SERVER_ENV } from '../support/server';

test.afterEach(async ({ page }, testInfo) => {
  await page.screenshot({ path: testInfo.outputPath('final.png'), fullPage: true });
});

const PLACE_ORDER = { name: 'Place order' };

test('leaving the checkout mid-submit: no panic, one order, the next cart untouched', async ({ page, baseURL, request }) => {
  const errors = consoleErrors(page);
  await addToCart(page, 'MUG-001', 1);
  await page.goto('/checkout');
  await hydrated(page);
  await armGate(request, baseURL!, 'leave');
  await page.getByRole('button', PLACE_ORDER).click();
  await waitUntilHeld(request, baseURL!, 'leave');

  // The shopper moves on inside the app while the order is still being written.
  await page.getByRole('link', { name: 'Shop', exact: true }).click();
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Small goods, charged exactly once');
  await openGate(request, baseURL!, 'leave');
  await expect.poll(async () => (await orders(page)).length).toBe(1);
  // The finished submit does not take the shopper anywhere: its page is gone.
  await page.waitForTimeout(500);
  expect(new URL(page.url()).pathname).toBe('/');
  await addToCart(page, 'TEE-002', 1);

  await page.getByTestId('cart-count').click();
  await expect(page.locator('table.lines')).toContainText('Organic cotton tee');
  await expect(page.locator('table.lines')).not.toContainText('Stoneware mug');
  await page.waitForTimeout(500);
  expect((await cart(page)).lines.map((l) => l.sku)).toEqual(['TEE-002']);
  expect(await orders(page)).toHaveLength(1);
  expect(errors).toEqual([]);
});

test('an intent left in flight by an earlier page is finished with a message, never silently', async ({ page, baseURL, request }) => {
  await addToCart(page, 'NOTE-003', 1);
  await page.goto('/checkout');
  await hydrated(page);
  await armGate(request, baseURL!, 'earlier');
  await page.getByRole('button', PLACE_ORDER).click();
  await waitUntilHeld(request, baseURL!, 'earlier');
  // A full page load elsewhere: the submit's task dies with the page, its intent stays stored.
  await page.goto('/orders');
  await openGate(request, baseURL!, 'earlier');
  await expect.poll(async () => (await orders(page)).length).toBe(1);
  await addToCart(page, 'CAP-007', 1);

  await page.goto('/checkout');
  await hydrated(page);
  const earlier = (await orders(page))[0];
  await expect(page.getByTestId('earlier-order')).toContainText(`Your earlier order was placed: ${earlier.order_no}`);
  await expect(page.locator('table.lines')).toContainText('Wool cap');
  await page.getByRole('button', PLACE_ORDER).click();
  await expect(page).toHaveURL(ORDER_URL);
  const placed = await orders(page);
  expect(placed).toHaveLength(2);
  expect(placed[0].items.map((i: any) => i.sku)).toEqual(['CAP-007']);
});

test('a stored intent is resumed only if it is young and the server has seen its key', async ({ page }) => {
  await addToCart(page, 'TEA-006', 1);
  await page.goto('/');
  const plant = (key: string, ageMs: number) =>
    page.evaluate(
      ([key, ageMs]) =>
        sessionStorage.setItem(
          'once:intent:checkout',
          JSON.stringify({ key, url: '/api/checkout', body: '{}', since_ms: Date.now() - (ageMs as number) }),
        ),
      [key, ageMs] as const,
    );
  const posts = recordPosts(page, PLACE_ORDER_PATH);
  // Older than the server keeps keys: it may have been forgotten there, so never resent.
  await plant('a-key-from-last-week', 8 * 86_400_000);
  await page.goto('/checkout');
  await hydrated(page);
  await page.waitForTimeout(1000);
  // Young, but it never reached the shop (the tab was closed before it was sent): an old
  // click is no consent to order now.
  await plant(`never-sent-${Date.now()}`, 1000);
  await page.goto('/checkout');
  await hydrated(page);
  await expect.poll(() => page.evaluate(() => sessionStorage.getItem('once:intent:checkout'))).toBeNull();
  await page.waitForTimeout(500);
  expect(posts).toHaveLength(0);
  await expect(page.getByTestId('submit-status')).toBeEmpty();
  await expect(page.getByTestId('earlier-order')).toHaveCount(0);
  expect(await orders(page)).toHaveLength(0);
});

test('a reload mid-submit, then a click before hydration: one order', async ({ page, baseURL, request }) => {
  await addToCart(page, 'BAG-004', 1);
  await page.goto('/checkout');
  await hydrated(page);
  await armGate(request, baseURL!, 'reload-click');
  await page.getByRole('button', PLACE_ORDER).click();
  await waitUntilHeld(request, baseURL!, 'reload-click');

  // The reloaded page never hydrates: the click posts the server-rendered form.
  await page.route('**/pkg/*.wasm', () => {});
  const formPosts = recordPosts(page, CHECKOUT_FORM_PATH);
  await page.reload({ waitUntil: 'domcontentloaded' });
  await expect(page.locator('body')).not.toHaveAttribute('data-hydrated', 'true');
  await page.getByRole('button', PLACE_ORDER).click({ noWaitAfter: true });
  await expect.poll(() => formPosts.length).toBe(1);
  await openGate(request, baseURL!, 'reload-click');

  await expect(page).toHaveURL(ORDER_URL);
  expect(await orders(page)).toHaveLength(1);
});

test('a duplicated tab of a cart being ordered: one order, both tabs show it', async ({ page, request }) => {
  // A server of its own with a lease longer than the test holds the first request: a held
  // request sends no heartbeat, and this test is about the tab, not about a takeover.
  const options = { port: await freePort(), database: freshDatabaseName(), env: { ...E2E_SERVER_ENV, IDEMPOTENCY_LEASE_MS: '60000' } };
  const server = await startServer(options);
  const base = server.baseURL;
  try {
    await page.goto(`${base}/`);
    await addToCart(page, 'PEN-005', 1, base);
    await page.goto(`${base}/checkout`);
    await hydrated(page);
    await armGate(request, base, 'duplicate');
    await page.getByRole('button', PLACE_ORDER).click();
    await waitUntilHeld(request, base, 'duplicate');

    const copy = await duplicateTab(page, `${base}/checkout`);
    await hydrated(copy);
    // The copy says what it is doing: finishing the order the first tab started.
    await expect(copy.getByTestId('submit-status')).toHaveText('Finishing your order…');
    // Its button is locked meanwhile; a shopper clicking it anyway changes nothing.
    await expect(copy.getByRole('button', PLACE_ORDER)).toBeDisabled();
    await copy.getByRole('button', PLACE_ORDER).click({ force: true });
    await openGate(request, base, 'duplicate');

    await expect(page).toHaveURL(ORDER_URL);
    await expect(copy).toHaveURL(page.url());
    expect(await orders(page, base)).toHaveLength(1);
  } finally {
    await stopServer(server);
  }
});

test('two tabs paying the same order: one charge, the second tab is told', async ({ page }) => {
  const orderId = await placeOrder(page);
  await page.goto(`/orders/${orderId}`);
  await hydrated(page);
  const second = await page.context().newPage();
  await second.goto(`/orders/${orderId}`);
  await hydrated(second);

  // The sandbox's slow card keeps the first payment in the provider's hands for seconds.
  await page.getByLabel('Card number').fill('4000000000000077');
  await page.getByRole('button', { name: 'Pay' }).click();
  await expect(page.getByTestId('pay-status')).toHaveText('Paying…');
  await second.getByRole('button', { name: 'Pay' }).click();
  await expect(second.getByTestId('pay-status')).toContainText('already in progress');

  for (const tab of [page, second]) await expect(tab.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);
  expect(await providerCharges(page, orderId)).toBe(1);
});

test('a reload mid-payment follows the payment to Paid, and the card number is never stored', async ({ page }) => {
  const orderId = await placeOrder(page);
  await page.goto(`/orders/${orderId}`);
  await hydrated(page);
  await page.getByLabel('Card number').fill('4000000000000077'); // the sandbox's slow card
  await page.getByRole('button', { name: 'Pay' }).click();
  await expect(page.getByTestId('pay-status')).toHaveText('Paying…');
  const stored = await page.evaluate(() => JSON.stringify(Object.entries(sessionStorage)));
  expect(stored).toContain(`pay:${orderId}`);
  expect(stored).not.toContain('4000000000000077');

  await page.reload();
  await hydrated(page);
  await expect(page.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);
  expect(await providerCharges(page, orderId)).toBe(1);
  await expect.poll(() => page.evaluate((id) => sessionStorage.getItem(`once:intent:pay:${id}`), orderId)).toBeNull();
});

test('the connection lost after the click, with the request in flight: one order after reconnecting', async ({ page, context, baseURL, request }) => {
  await addToCart(page, 'LAMP-008', 1);
  await page.goto('/checkout');
  await hydrated(page);
  const posts = recordPosts(page, PLACE_ORDER_PATH);
  // The first request reaches the server, but its answer is lost with the connection.
  let first = true;
  await page.route('**/api/checkout', async (route) => {
    if (!first) return route.continue();
    first = false;
    const answered = route.fetch();
    await waitUntilHeld(request, baseURL!, 'offline');
    await context.setOffline(true);
    await openGate(request, baseURL!, 'offline');
    await answered;
    await route.abort('internetdisconnected');
  });
  await armGate(request, baseURL!, 'offline');
  await page.getByRole('button', PLACE_ORDER).click();
  await expect(page.getByTestId('submit-status')).toHaveText(/retrying/);
  await expect.poll(async () => (await orders(page)).length).toBe(1);
  await context.setOffline(false);

  await expect(page).toHaveURL(ORDER_URL, { timeout: 30_000 });
  expect(posts.length).toBeGreaterThanOrEqual(2);
  expect(await orders(page)).toHaveLength(1);
});

test('"Add to cart" before hydration posts the quantity shown, and a second click adds nothing more', async ({ page }) => {
  await page.route('**/pkg/*.wasm', () => {});
  await page.goto('/', { waitUntil: 'domcontentloaded' });
  await expect(page.locator('body')).not.toHaveAttribute('data-hydrated', 'true');
  // The shop's answer to each post is slow, so the second click lands while the first
  // post is already applied on the server and its page has not come back yet.
  let applied = 0;
  await page.route('**/_fn/add_to_cart', async (route) => {
    const response = await route.fetch();
    applied += 1;
    await new Promise((r) => setTimeout(r, 1000));
    await route.fulfill({ response }).catch(() => {}); // the first page was abandoned
  });
  const card = page.locator('li.product[data-sku="TEA-006"]');
  await expect(card.getByRole('spinbutton')).toHaveValue('1');
  await card.getByRole('spinbutton').fill('3');
  const click = await mouseClicker(card.getByRole('button', { name: 'Add to cart' }));
  await click();
  await expect.poll(() => applied).toBe(1);
  await click();
  await expect.poll(() => applied).toBe(2);

  // Both posts reached the server with the form's one add key: one add of three.
  await expect.poll(async () => (await cart(page)).lines.map((l) => [l.sku, l.quantity])).toEqual([['TEA-006', 3]]);
});

test('a double click on "Add to cart" adds once even when the first add answered before the second click: the button rests after an add', async ({ page }) => {
  await page.clock.install();
  await page.goto('/');
  await hydrated(page);
  const adds = recordPosts(page, /^\/_fn\/add_to_cart$/);
  const card = page.locator('li.product[data-sku="CAP-007"]');
  await card.getByRole('button', { name: 'More Wool cap' }).click();
  const button = card.getByRole('button', { name: 'Add to cart' });
  const click = await mouseClicker(button);
  // The page's timers stand still from here, so the rest after an add lasts until the test
  // moves the page's clock: the second click below lands in it however slow this machine is.
  // (A minute ahead: the page's clock runs until the pause lands, and may not go back.)
  await page.clock.pauseAt((await page.evaluate(() => Date.now())) + 60_000);
  await click();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (2)');
  await expect(card.getByRole('status')).toHaveText('Added to your cart ✓');
  await expect(button).toHaveAttribute('aria-disabled', 'true');
  // A fast shop answered the first click already, and the form has its next key: the
  // second click of a double click (or a shaky one, or a double tap) is the same add.
  await click();
  await page.waitForTimeout(500);
  expect(adds).toHaveLength(1);
  expect((await cart(page)).lines.map((l) => [l.sku, l.quantity])).toEqual([['CAP-007', 2]]);
  // Rested, the next click is a new add.
  await page.clock.runFor(1000);
  await expect(button).toHaveAttribute('aria-disabled', 'false');
  await click();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (4)');
  expect(adds).toHaveLength(2);
  // A new quantity is an add the shopper means: it ends the rest at once.
  await card.getByRole('button', { name: 'More Wool cap' }).click();
  await expect(button).toHaveAttribute('aria-disabled', 'false');
  await click();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (7)');
  expect(adds).toHaveLength(3);
});

test('a second click on "Add to cart" while its add is in flight sends nothing', async ({ page }) => {
  await page.goto('/');
  await hydrated(page);
  const adds = recordPosts(page, /^\/_fn\/add_to_cart$/);
  let release = () => {};
  const held = new Promise<void>((resolve) => (release = resolve));
  await page.route('**/_fn/add_to_cart', async (route) => {
    await held;
    await route.continue();
  });
  const card = page.locator('li.product[data-sku="MUG-001"]');
  const button = card.getByRole('button', { name: 'Add to cart' });
  const click = await mouseClicker(button);
  await click();
  await expect(button).toHaveAttribute('aria-disabled', 'true');
  await click();
  release();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (1)');
  await page.waitForTimeout(500);
  expect(adds).toHaveLength(1);
  expect((await cart(page)).lines.map((l) => [l.sku, l.quantity])).toEqual([['MUG-001', 1]]);
});

test('an add whose answer was lost keeps its key: clicking again adds once, and the page says what happened', async ({ page }) => {
  await page.goto('/');
  await hydrated(page);
  let first = true;
  await page.route('**/_fn/add_to_cart', async (route) => {
    if (!first) return route.continue();
    first = false;
    await route.fetch(); // the server adds...
    await route.abort('connectionreset'); // ...and the answer never arrives
  });
  const card = page.locator('li.product[data-sku="NOTE-003"]');
  await card.getByRole('button', { name: 'Add to cart' }).click();
  await expect(card.getByRole('alert')).toContainText('could not reach the shop');
  await card.getByRole('button', { name: 'Add to cart' }).click();
  await expect(card.getByRole('alert')).toHaveCount(0);
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (1)');
  expect((await cart(page)).lines.map((l) => [l.sku, l.quantity])).toEqual([['NOTE-003', 1]]);
});

test('the cart can be edited, and an out-of-stock cart fixed and ordered', async ({ page }) => {
  await addToCart(page, 'MUG-001', 2);
  await addToCart(page, 'LAMP-008', 16); // more lamps than the shop has
  await addToCart(page, 'TEE-002', 1);
  await page.goto('/checkout');
  await hydrated(page);
  const lamp = page.locator('tr[data-sku="LAMP-008"]');
  await expect(lamp).toContainText(/Only \d+ in stock/);

  await page.getByRole('button', { name: 'Remove Organic cotton tee' }).click();
  await expect(page.locator('tr[data-sku="TEE-002"]')).toHaveCount(0);
  await page.getByLabel('Quantity of Stoneware mug').fill('1');
  await page.locator('tr[data-sku="MUG-001"]').getByRole('button', { name: 'Update' }).click();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (17)');

  await page.getByRole('button', PLACE_ORDER).click();
  await expect(page.getByRole('alert')).toContainText('not in stock in the quantity you chose (see each line). Lower the quantity');
  expect(await orders(page)).toHaveLength(0);
  await hydrated(page);
  // A typed quantity applies when the field is left, without "Update".
  await page.getByLabel('Quantity of Desk lamp').fill('1');
  await page.keyboard.press('Tab');
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (2)');
  await page.getByRole('button', PLACE_ORDER).click();
  await expect(page).toHaveURL(ORDER_URL);
  const placed = await orders(page);
  expect(placed).toHaveLength(1);
  expect(placed[0].items.map((i: any) => [i.sku, i.quantity])).toEqual([['MUG-001', 1], ['LAMP-008', 1]]);
});

test('ordering waits for the cart read back after a change: its new key, never the old one', async ({ page }) => {
  await addToCart(page, 'MUG-001', 1);
  await page.goto('/checkout');
  await hydrated(page);
  const posts = recordPosts(page, PLACE_ORDER_PATH);
  // The read after the change is held: the page knows the change was made, not its new key.
  let releaseRead!: () => void;
  const readHeld = new Promise<void>((resolve) => (releaseRead = resolve));
  await page.route('**/_fn/get_checkout', async (route) => {
    await readHeld;
    await route.continue();
  });
  await page.getByLabel('Quantity of Stoneware mug').fill('2');
  await page.locator('tr[data-sku="MUG-001"]').getByRole('button', { name: 'Update' }).click();
  await expect.poll(async () => (await cart(page)).lines[0]?.quantity).toBe(2);
  // The button says it is locked (aria-disabled); a shopper who clicks anyway is told why.
  await expect(page.getByRole('button', PLACE_ORDER)).toHaveAttribute('aria-disabled', 'true');
  await page.getByRole('button', PLACE_ORDER).click({ force: true });
  await expect(page.getByTestId('submit-status')).toContainText('Your cart is being updated');
  expect(posts).toEqual([]);

  releaseRead();
  await expect(page.getByRole('button', PLACE_ORDER)).toHaveAttribute('aria-disabled', 'false');
  await page.getByRole('button', PLACE_ORDER).click();
  await expect(page).toHaveURL(ORDER_URL);
  expect(posts).toHaveLength(1);
  const placed = await orders(page);
  expect(placed).toHaveLength(1);
  expect(placed[0].items.map((i: any) => [i.sku, i.quantity])).toEqual([['MUG-001', 2]]);
});

test('without wasm, a refused cart change comes back to the page with the reason', async ({ page }) => {
  await addToCart(page, 'MUG-001', 2);
  await page.route('**/pkg/*.wasm', () => {});
  await page.goto('/checkout', { waitUntil: 'domcontentloaded' });
  // Another tab removes the line this page still shows.
  const removed = await page.request.post('/_fn/set_cart_quantity', {
    form: { sku: 'MUG-001', quantity: '0' },
    headers: { accept: 'application/json' },
  });
  expect(removed.ok()).toBeTruthy();
  await page.getByLabel('Quantity of Stoneware mug').fill('1');
  await page.locator('tr[data-sku="MUG-001"]').getByRole('button', { name: 'Update' }).click();
  await expect(page.getByTestId('form-error')).toHaveText('That product is no longer in your cart.');
  await expect(page.locator('body')).not.toHaveAttribute('data-hydrated', 'true');
  expect((await cart(page)).lines).toEqual([]);
});

test('checkout and payment with the keyboard only', async ({ page }) => {
  await page.goto('/');
  await hydrated(page);
  const tabTo = async (name: string) => {
    for (let i = 0; i < 80; i++) {
      await page.keyboard.press('Tab');
      const focused = await page.evaluate(() => {
        const el = document.activeElement as HTMLInputElement | null;
        const label = el?.labels?.[0]?.textContent?.trim() ?? '';
        return `${el?.getAttribute('aria-label') ?? ''}|${el?.textContent?.trim() ?? ''}|${label}`;
      });
      if (focused.split('|').includes(name)) return;
    }
    throw new Error(`no focusable "${name}"`);
  };
  await tabTo('Add to cart');
  await page.keyboard.press('Enter');
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (1)');
  await tabTo('Cart (1)');
  await page.keyboard.press('Enter');
  // A link is a page load: the keyboard starts again at the top of the new page.
  await expect(page.getByRole('heading', { name: 'Your cart' })).toBeVisible();
  await expect.poll(() => page.evaluate(() => document.activeElement === document.body)).toBe(true);
  await hydrated(page);
  // The details, field by field, by their labels: each one reached and filled from the keyboard.
  const a = DETAILS.shipping_address;
  for (const [label, text] of [
    ["Email, for the order's confirmation", DETAILS.email],
    ['Full name', a.name],
    ['Street and number', a.line1],
    ['Postal code', a.postal_code],
    ['City', a.city],
    ['Country', 'United K'],
  ]) {
    await tabTo(label);
    await page.keyboard.type(text);
  }
  await expect(page.getByLabel('Country')).toHaveValue('GB');
  await tabTo('Place order');
  await page.keyboard.press('Enter');
  await expect(page).toHaveURL(ORDER_URL);
  await hydrated(page);
  await tabTo('Pay');
  await page.keyboard.press('Enter');
  await expect(page.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);
  const placed = await orders(page);
  expect(placed).toHaveLength(1);
  expect(placed[0].status).toMatch(/^(paid|fulfilled)$/);
});

test('every page has its title and logs no error; a 404 is a proper 404 page', async ({ page }, testInfo) => {
  const errors = consoleErrors(page);
  const orderId = await placeOrder(page);
  const pages: [string, string, RegExp][] = [
    ['home', '/', /^Once — /],
    ['cart', '/checkout', /^Your cart · Once$/],
    ['orders', '/orders', /^My orders · Once$/],
    ['order', `/orders/${orderId}`, /^Order ONC-\d+ · Once$/],
    ['no-such-order', '/orders/00000000-0000-4000-8000-000000000000', /^No such order · Once$/],
  ];
  for (const [name, path, title] of pages) {
    const response = await page.goto(path);
    expect(response!.status()).toBe(200);
    await hydrated(page);
    await expect(page).toHaveTitle(title);
    await page.screenshot({ path: testInfo.outputPath(`${name}.png`), fullPage: true });
  }
  const missing = await page.goto('/no-such-page');
  expect(missing!.status()).toBe(404);
  await hydrated(page);
  await expect(page).toHaveTitle('Page not found · Once');
  await expect(page.getByRole('heading', { level: 1 })).toHaveText('Page not found');
  await page.screenshot({ path: testInfo.outputPath('not-found.png'), fullPage: true });
  // The browser reports the 404 document itself; that is the page working, not an error.
  expect(errors.filter((e) => !/no-such-page: Failed to load resource: .* 404/.test(e))).toEqual([]);
});
