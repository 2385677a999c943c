import { test, expect, hydrated, orders, ORDER_URL, recordPosts, armGate, waitUntilHeld, openGate, typeDetails, DETAILS, PLACE_ORDER_PATH, CHECKOUT_FORM_PATH } from '../support/shop';
import { startConsoleServer, stopServer } from '../support/server';

const PLACE_ORDER = { name: 'Place order' };

const GRACE = {
  email: 'grace@example.com',
  shipping_address: { name: 'Grace Hopper', line1: '7 Harbour Road', postal_code: '22202', city: 'Arlington', country: 'US' },
};

/** Adds a mug through the shop's own button, so the cart holds no details yet. */
async function addMugByHand(page: import('@playwright/test').Page, base = '') {
  await page.goto(`${base}/`);
  await hydrated(page);
  await page.locator('[data-sku="MUG-001"]').getByRole('button', { name: 'Add to cart' }).click();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (1)');
}

test('a whole purchase with the details typed: the order, its email and the journal name them', async ({ page }, testInfo) => {
  const password = 'e2e-details-password';
  const server = await startConsoleServer(password);
  const base = server.baseURL;
  try {
    await addMugByHand(page, base);
    await page.goto(`${base}/checkout`);
    await hydrated(page);
    await typeDetails(page, GRACE);
    await page.getByLabel('City').blur();
    // Kept with the cart as typed: a reload shows them again.
    await expect.poll(async () => {
      await page.reload();
      await hydrated(page);
      return page.getByLabel('Street and number').inputValue();
    }).toBe('7 Harbour Road');
    await expect(page.getByLabel('Country')).toHaveValue('US');
    await page.screenshot({ path: testInfo.outputPath('checkout.png'), fullPage: true });
    await page.getByRole('button', PLACE_ORDER).click();
    await expect(page).toHaveURL(ORDER_URL);
    await expect(page.getByTestId('order-ship-to')).toContainText('Grace Hopper');
    await expect(page.getByTestId('order-ship-to')).toContainText('22202 Arlington');
    await expect(page.getByTestId('order-ship-to')).toContainText('United States');
    await expect(page.getByTestId('order-email')).toHaveText('grace@example.com');
    const orderNo = (await page.getByTestId('order-no').textContent())!;

    await hydrated(page);
    await page.getByRole('button', { name: 'Pay' }).click();
    await expect(page.getByTestId('order-status')).toHaveText('Fulfilled');
    await page.screenshot({ path: testInfo.outputPath('order.png'), fullPage: true });
    const [email] = await Promise.all([page.waitForEvent('popup'), page.getByTestId('email-link').click()]);
    await expect(email.getByTestId('email-recipient')).toHaveText('grace@example.com');
    await expect(email.getByTestId('email-ship-to')).toContainText('7 Harbour Road');
    await email.close();

    // The operator finds the order by the shopper's email, and its journal says where it ships.
    await page.goto(`${base}/operator/login`);
    await page.getByLabel('Password').fill(password);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('searchbox', { name: 'Find an order' }).fill('Grace@Example.com');
    await page.getByRole('searchbox', { name: 'Find an order' }).press('Enter');
    await expect(page.getByRole('heading', { level: 1 })).toHaveText(`Order ${orderNo}`);
    await expect(page.getByTestId('order-ship-to')).toHaveText('Grace Hopper, 7 Harbour Road, 22202 Arlington, US');
    await expect(page.getByTestId('order-email')).toHaveText('grace@example.com');
    await expect(page.getByTestId('journal').locator('tr[data-kind="fulfillment"]').first()).toBeVisible();
    await page.screenshot({ path: testInfo.outputPath('journal.png'), fullPage: true });
  } finally {
    await stopServer(server);
  }
});

test('an address edited while the order is being placed changes nothing: one order, with what was sent', async ({ page, baseURL, request }) => {
  await addMugByHand(page);
  await page.goto('/checkout');
  await hydrated(page);
  await typeDetails(page);
  const posts = recordPosts(page, PLACE_ORDER_PATH);
  await armGate(request, baseURL!, 'edit-while-held');
  await page.getByRole('button', PLACE_ORDER).click();
  await waitUntilHeld(request, baseURL!, 'edit-while-held');
  // The shopper spots a typo and fixes it, then presses again: the button is locked.
  await page.getByLabel('Street and number').fill('2 Main Street');
  await page.getByRole('button', PLACE_ORDER).click({ force: true });
  await openGate(request, baseURL!, 'edit-while-held');
  await expect(page).toHaveURL(ORDER_URL);
  await expect(page.getByTestId('order-ship-to')).toContainText('1 Main Street');
  expect(posts).toHaveLength(1);
  const placed = await orders(page);
  expect(placed).toHaveLength(1);
  expect(placed[0].shipping_address.line1).toBe('1 Main Street');
});

test('fields to fix are said next to them, with and without wasm, and nothing is sent', async ({ page }) => {
  await addMugByHand(page);
  await page.goto('/checkout');
  await hydrated(page);
  const posts = recordPosts(page, PLACE_ORDER_PATH);
  await page.getByLabel("Email, for the order's confirmation").fill('grace at example');
  await page.getByRole('button', PLACE_ORDER).click();
  const email = page.getByLabel("Email, for the order's confirmation");
  await expect(email).toHaveAttribute('aria-invalid', 'true');
  await expect(page.getByTestId('details-email-error')).toHaveText('Enter an email address like name@example.com.');
  await expect(page.getByTestId('details-name-error')).toHaveText('Enter your name.');
  await expect(page.getByTestId('details-country-error')).toHaveText('Choose the country.');
  await expect(page.getByLabel('Full name')).toHaveAttribute('aria-describedby', 'details-name-error');
  expect(posts).toHaveLength(0);

  // Without wasm the form posts, and comes back with what was typed and each problem.
  await page.route('**/pkg/*.wasm', () => {});
  const formPosts = recordPosts(page, CHECKOUT_FORM_PATH);
  await page.goto('/checkout', { waitUntil: 'domcontentloaded' });
  await page.getByLabel("Email, for the order's confirmation").fill('grace@example');
  await page.getByLabel('Full name').fill(DETAILS.shipping_address.name);
  await page.getByRole('button', PLACE_ORDER).click();
  await expect(page).toHaveURL(/\/checkout\?problem=invalid-details$/);
  expect(formPosts).toHaveLength(1);
  await expect(page.getByRole('alert')).toContainText('Some of your details need fixing');
  await expect(page.getByLabel('Full name')).toHaveValue('Ada Lovelace');
  await expect(page.getByTestId('details-email-error')).toHaveText('Enter an email address like name@example.com.');
  expect(await orders(page)).toHaveLength(0);
});
