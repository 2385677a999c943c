import { Page, TestInfo } from '@playwright/test';
import { test, expect, addToCart, hydrated, placeOrder } from '../support/shop';
import { startConsoleServer, stopServer } from '../support/server';

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

/** The same-origin files the page's document names (stylesheets, icons, preloads, scripts,
 * images), each fetched again: a file the browser did not ask for (an icon, a preload not
 * yet used) is checked too. */
async function namedFilesResolve(page: Page, base: string): Promise<string[]> {
  const named = await page.evaluate(() =>
    [...document.querySelectorAll('link[href], script[src], img[src]')]
      .map((e) => (e as HTMLLinkElement).href || (e as HTMLScriptElement).src)
      .filter((url) => url.startsWith(location.origin)),
  );
  const broken: string[] = [];
  for (const url of named) {
    const answer = await page.request.get(url);
    if (answer.status() !== 200) broken.push(`${answer.status()} ${url}, named by ${page.url()}`);
  }
  expect(named.length, `${page.url()} names its files`).toBeGreaterThan(0);
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

/** Checks the page now shown: styled as the stylesheet says, each file it named there, and
 * nothing it asked for broken; a screenshot to look at. Soft, so every page is reported. */
async function check(page: Page, base: string, broken: string[], name: string, testInfo: TestInfo) {
  await page.waitForLoadState('load');
  expect.soft(await styled(page), name).toEqual({
    font: expect.stringContaining('Inter'),
    margin: '0px',
    header: 'rgb(255, 255, 255)',
  });
  expect.soft(await namedFilesResolve(page, base), name).toEqual([]);
  expect.soft(broken.splice(0), name).toEqual([]);
  await page.screenshot({ path: testInfo.outputPath(`${name}.png`), fullPage: true });
}

test('every shop and console page gets each file it links, and shows the stylesheet', async ({ page }, testInfo) => {
  // The login's refusals are pages too: one wrong password, then the lock.
  const server = await startConsoleServer(PASSWORD, { OPERATOR_LOGIN_MAX_FAILURES: '1' });
  const base = server.baseURL;
  const broken = brokenFiles(page);
  const visit = async (path: string, name: string, hydrates = false) => {
    await page.goto(`${base}${path}`);
    if (hydrates) await hydrated(page);
    await check(page, base, broken, name, testInfo);
  };
  try {
    // The shop: the catalog (its products), the cart at the checkout, an order and the list.
    const orderId = await placeOrder(page, base);
    await addToCart(page, 'MUG-001', 2, base);
    await visit('/', 'home', true);
    await expect(page.getByRole('heading', { name: 'Stoneware mug' })).toBeVisible();
    await visit('/checkout', 'checkout', true);
    await expect(page.getByRole('button', { name: 'Place order' })).toBeVisible();
    await visit(`/orders/${orderId}`, 'order', true);
    await visit('/orders', 'orders', true);
    await visit('/no-such-page', 'not-found', true);

    // The console, from its login to one order's story.
    await visit('/operator/login', 'login');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect(page.getByTestId('overview')).toBeVisible();
    await visit('/operator', 'overview');
    // The charts' axes are lines, not shapes filled black across the page.
    const axes = page.locator('svg.chart .axis');
    expect(await axes.count()).toBeGreaterThan(0);
    expect(new Set(await axes.evaluateAll((paths) => paths.map((p) => getComputedStyle(p).fill)))).toEqual(new Set(['none']));
    await visit('/operator/reconciliation', 'reconciliation');
    await visit('/operator/dead-letters', 'dead-letters');
    await visit('/operator/emails', 'emails');
    await visit(`/operator/search?q=${orderId}`, 'journal');
    await expect(page).toHaveURL(/\/operator\/orders\/[A-Z0-9-]+$/);
    await expect(page.getByTestId('journal')).toBeVisible();
    await visit('/operator/search?q=nothing-of-ours', 'search');
    await visit('/operator/orders/NO-SUCH-ORDER', 'journal-not-found');

    // Logged out, the login's refusals: a wrong password, then the lock it began.
    await page.getByRole('button', { name: 'Log out' }).click();
    await expect(page).toHaveURL(/\/operator\/login$/);
    await page.getByLabel('Password').fill('a guess');
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect(page.getByTestId('notice')).toContainText('Wrong password');
    await check(page, base, broken, 'wrong-password', testInfo);
    await page.getByLabel('Password').fill('another guess');
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect(page.getByRole('heading', { name: 'Too many failed logins' })).toBeVisible();
    await check(page, base, broken, 'locked', testInfo);
  } finally {
    await stopServer(server);
  }
});
