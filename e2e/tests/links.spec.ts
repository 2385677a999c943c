import { Page } from '@playwright/test';
import { test, expect, addToCart, hydrated, placeOrder } from '../support/shop';
import { freePort, freshDatabaseName, startServer, stopServer, E2E_SERVER_ENV } from '../support/server';

const PASSWORD = 'e2e-operator-password';

/** The kinds of file a page asks for by itself: a broken one leaves the page unstyled,
 * inert or with holes in it. */
const FILE_KINDS = new Set(['stylesheet', 'script', 'image', 'font']);

/** From now on, every file `page` asks for (a kind above, or anything under /pkg, such as the
 * bundle's preload) that did not come with 200 or 304, or did not come at all. */
function brokenFiles(page: Page): string[] {
  const broken: string[] = [];
  const asked = (url: string, kind: string) =>
    FILE_KINDS.has(kind) || new URL(url).pathname.startsWith('/pkg/');
  page.on('response', (r) => {
    const request = r.request();
    if (asked(r.url(), request.resourceType()) && ![200, 304].includes(r.status())) {
      broken.push(`${r.status()} ${request.resourceType()} ${r.url()} on ${page.url()}`);
    }
  });
  page.on('requestfailed', (request) => {
    if (asked(request.url(), request.resourceType())) {
      broken.push(`failed (${request.failure()?.errorText}) ${request.resourceType()} ${request.url()} on ${page.url()}`);
    }
  });
  return broken;
}

/** What the stylesheet sets, read from the page as the browser computed it; a page without
 * its stylesheet shows the browser's defaults (a serif font, an 8px margin, no header). */
async function styled(page: Page) {
  return page.evaluate(() => {
    const body = getComputedStyle(document.body);
    const header = document.querySelector('header.topbar');
    return {
      font: body.fontFamily,
      margin: body.margin,
      header: header ? getComputedStyle(header).backgroundColor : 'no header',
    };
  });
}

async function expectStyled(page: Page, name: string) {
  expect(await styled(page), name).toEqual({
    font: expect.stringContaining('Inter'),
    margin: '0px',
    header: 'rgb(255, 255, 255)',
  });
}

test('every shop and console page gets each file it links, and shows the stylesheet', async ({ page }, testInfo) => {
  const server = await startServer({
    port: await freePort(),
    database: freshDatabaseName(),
    env: { ...E2E_SERVER_ENV, OPERATOR_PASSWORD: PASSWORD, RECONCILE_EVERY_SECS: '3600' },
  });
  const base = server.baseURL;
  const broken = brokenFiles(page);
  const visit = async (path: string, name: string, ready: () => Promise<void>) => {
    await page.goto(`${base}${path}`);
    await ready();
    await page.waitForLoadState('load');
    await expectStyled(page, name);
    await page.screenshot({ path: testInfo.outputPath(`${name}.png`), fullPage: true });
  };
  try {
    // The shop: the catalog (its products), the cart at the checkout, an order and the list.
    const orderId = await placeOrder(page, base);
    await addToCart(page, 'MUG-001', 2, base);
    const shop = () => hydrated(page);
    await visit('/', 'home', shop);
    await expect(page.getByRole('heading', { name: 'Stoneware mug' })).toBeVisible();
    await visit('/checkout', 'checkout', shop);
    await expect(page.getByRole('button', { name: 'Place order' })).toBeVisible();
    await visit(`/orders/${orderId}`, 'order', shop);
    await visit('/orders', 'orders', shop);
    await visit('/no-such-page', 'not-found', shop);

    // The console, from its login to one order's story.
    const plain = async () => {};
    await visit('/operator/login', 'login', plain);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect(page.getByTestId('overview')).toBeVisible();
    await visit('/operator', 'overview', plain);
    // The charts' axes are lines, not shapes filled black across the page.
    const axes = page.locator('svg.chart .axis');
    expect(await axes.count()).toBeGreaterThan(0);
    for (const fill of await axes.evaluateAll((paths) => paths.map((p) => getComputedStyle(p).fill))) {
      expect(fill).toBe('none');
    }
    await visit('/operator/reconciliation', 'reconciliation', plain);
    await visit('/operator/dead-letters', 'dead-letters', plain);
    await visit('/operator/emails', 'emails', plain);
    await visit(`/operator/search?q=${orderId}`, 'journal', plain);
    await expect(page).toHaveURL(/\/operator\/orders\/[A-Z0-9-]+$/);
    await expect(page.getByTestId('journal')).toBeVisible();
    await visit('/operator/search?q=nothing-of-ours', 'search', plain);

    expect(broken).toEqual([]);
  } finally {
    await stopServer(server);
  }
});
