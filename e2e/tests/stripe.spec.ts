// Paying through Stripe in the browser, against localstripe (a fake of Stripe's API and of
// Stripe.js that this project did not write; scripts/setup installs it): the card goes from
// the page to Stripe.js, and the shop receives only the payment method Stripe made.
import { spawn, ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { Page } from '@playwright/test';
import { test, expect, hydrated, PAY_PATH, placeOrder, recordPosts } from '../support/shop';
import { freePort, freshDatabaseName, startServer, stopServer, RunningServer } from '../support/server';

const LOCALSTRIPE = process.env.LOCALSTRIPE ?? '/opt/localstripe/bin/localstripe';
const WEBHOOK_SECRET = 'whsec_browser_tests_of_stripe';
const CARD = '4242424242424242';

let stripe: ChildProcess;
let stripeURL: string;
let scriptServer: http.Server;
let scriptURL: string;
let shop: RunningServer;

/** localstripe's Stripe.js leaves `createPaymentMethod` empty; this one does what Stripe's
 * does: it sends the card to Stripe's `/v1/payment_methods` under the publishable key. */
const CREATE_PAYMENT_METHOD = `createPaymentMethod: async (data) => {
      const body = new URLSearchParams({ type: 'card', key: apiKey });
      const card = data.card.value.card;
      Object.keys(card).forEach((field) => body.append('card[' + field + ']', card[field]));
      const response = await fetch(LOCALSTRIPE_BASE_API + '/v1/payment_methods', { method: 'POST', body });
      const res = await response.json().catch(() => ({}));
      return response.ok && !res.error ? { paymentMethod: res } : { error: res.error || { message: 'refused' } };
    },`;

/** localstripe's Stripe.js has no `handleNextAction`; its `confirmCardPayment` runs the same
 * bank step for an intent that waits for it (a dialog with "Complete authentication" and
 * "Fail authentication", then localstripe's `_authenticate`), so this one hands it on. */
const HANDLE_NEXT_ACTION = `handleNextAction: async function (options) {
      return this.confirmCardPayment(options.clientSecret);
    },`;

/** Serves localstripe at another port, standing in for what it lacks of Stripe:
 * - its Stripe.js with one name changed, since the fake declares a top-level
 *   `class Element`, which shadows the DOM's `Element` for every script of the page
 *   (wasm-bindgen's casts among them) and breaks hydration; Stripe's own script declares no
 *   such global;
 * - a `createPaymentMethod` that works ({@link CREATE_PAYMENT_METHOD}), and a
 *   `handleNextAction` ({@link HANDLE_NEXT_ACTION});
 * - `POST /v1/payment_methods` with a publishable key, as Stripe takes it from browsers
 *   (localstripe takes only a secret key there).
 * Everything else is passed to localstripe as it is. */
async function serveStripeJs(): Promise<string> {
  const port = await freePort();
  scriptServer = http.createServer(async (request, response) => {
    if (request.url === '/js.stripe.com/v3/') {
      const original = await (await fetch(`${stripeURL}/js.stripe.com/v3/`)).text();
      const script = original
        .replace(/\bclass Element\b/, 'class LocalstripeElement')
        .replace(/new Element\(/g, 'new LocalstripeElement(')
        .replace('createPaymentMethod: async () => {},', CREATE_PAYMENT_METHOD + HANDLE_NEXT_ACTION);
      response.writeHead(200, { 'content-type': 'text/javascript' });
      response.end(script);
      return;
    }
    const headers = { ...request.headers };
    if (request.method === 'POST' && request.url === '/v1/payment_methods') headers.authorization = 'Bearer sk_test_e2e';
    const forwarded = http.request(`${stripeURL}${request.url}`, { method: request.method, headers }, (answer) => {
      response.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(response);
    });
    request.pipe(forwarded);
  });
  await new Promise<void>((resolve) => scriptServer.listen(port, '127.0.0.1', resolve));
  return `http://127.0.0.1:${port}`;
}

test.beforeAll(async () => {
  const port = await freePort();
  stripeURL = `http://127.0.0.1:${port}`;
  stripe = spawn(LOCALSTRIPE, ['--port', String(port), '--from-scratch'], { stdio: 'ignore' });
  for (let i = 0; ; i++) {
    try {
      if ((await fetch(`${stripeURL}/v1/events`, { headers: { authorization: 'Bearer sk_test_e2e' } })).ok) break;
    } catch {
      // not listening yet
    }
    if (i > 300) throw new Error('localstripe did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  scriptURL = await serveStripeJs();
  shop = await startServer({
    port: await freePort(),
    database: freshDatabaseName(),
    env: {
      PAYMENT_PROVIDER: 'stripe',
      STRIPE_API_BASE: stripeURL,
      STRIPE_SECRET_KEY: 'sk_test_e2e',
      STRIPE_PUBLISHABLE_KEY: 'pk_test_e2e',
      STRIPE_JS_URL: `${scriptURL}/js.stripe.com/v3/`,
      STRIPE_WEBHOOK_SECRETS: WEBHOOK_SECRET,
    },
  });
  const hook = new URLSearchParams({ url: `${shop.baseURL}/webhooks/stripe`, secret: WEBHOOK_SECRET });
  hook.append('events[]', 'payment_intent.succeeded');
  hook.append('events[]', 'payment_intent.payment_failed');
  await fetch(`${stripeURL}/_config/webhooks/once`, {
    method: 'POST',
    headers: { authorization: 'Bearer sk_test_e2e' },
    body: hook,
  });
});

test.afterAll(async () => {
  if (shop) await stopServer(shop);
  scriptServer?.close();
  stripe?.kill();
});

test('the card goes to Stripe.js, the shop gets a payment method, and the order is paid once', async ({ page }) => {
  const orderId = await placeOrder(page, shop.baseURL);
  // Everything the page sends to the shop, to show the card number is never in it.
  const toShop: string[] = [];
  page.on('request', (r) => {
    if (r.url().startsWith(shop.baseURL)) toShop.push(`${r.url()} ${r.postData() ?? ''}`);
  });
  const pays: string[] = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && PAY_PATH.test(new URL(r.url()).pathname)) pays.push(r.postData() ?? '');
  });
  const answer = await page.goto(`${shop.baseURL}/orders/${orderId}`);
  const policy = answer!.headers()['content-security-policy'];
  expect(policy).toContain(`script-src 'self' 'nonce-`);
  expect(policy).toMatch(new RegExp(`script-src 'self' 'nonce-[0-9a-f]+' ${scriptURL} 'wasm-unsafe-eval';`));
  await hydrated(page);
  await expect(page.getByLabel('Card number')).toHaveCount(0);
  const field = page.getByTestId('card-element');
  await field.getByPlaceholder('number').fill(CARD);
  await field.getByPlaceholder('exp_month').fill('12');
  await field.getByPlaceholder('exp_year').fill('34');
  await field.getByPlaceholder('cvc').fill('123');
  await field.getByPlaceholder('postal_code').fill('12345');
  await page.screenshot({ path: test.info().outputPath('stripe-card-field.png'), fullPage: true });
  await page.getByRole('button', { name: 'Pay' }).click();

  await expect(page.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);
  expect(pays).toHaveLength(1);
  expect(JSON.parse(pays[0])).toEqual({ payment_method: expect.stringMatching(/^pm_/) });
  expect(toShop.filter((r) => r.includes(CARD))).toEqual([]);
  const intents = await (await fetch(`${stripeURL}/v1/payment_intents`, { headers: { authorization: 'Bearer sk_test_e2e' } })).json();
  const ours = intents.data.filter((pi: any) => pi.metadata.order_id === orderId);
  expect(ours.map((pi: any) => pi.status)).toEqual(['succeeded']);
});

test('a double click on "Pay" asks Stripe for one payment method and pays once', async ({ page }) => {
  const orderId = await placeOrder(page, shop.baseURL);
  const tokens: string[] = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && r.url().endsWith('/v1/payment_methods')) tokens.push(r.url());
  });
  const pays: string[] = [];
  page.on('request', (r) => {
    if (r.method() === 'POST' && PAY_PATH.test(new URL(r.url()).pathname)) pays.push(r.postData() ?? '');
  });
  await page.goto(`${shop.baseURL}/orders/${orderId}`);
  await hydrated(page);
  const field = page.getByTestId('card-element');
  await field.getByPlaceholder('number').fill(CARD);
  await field.getByPlaceholder('exp_month').fill('12');
  await field.getByPlaceholder('exp_year').fill('34');
  await field.getByPlaceholder('cvc').fill('123');
  await page.getByRole('button', { name: 'Pay' }).dblclick();

  await expect(page.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);
  expect(tokens).toHaveLength(1);
  expect(pays).toHaveLength(1);
});

/** Types `number` into Stripe.js's card field. */
async function typeCard(page: Page, number: string) {
  const field = page.getByTestId('card-element');
  await field.getByPlaceholder('number').fill(number);
  await field.getByPlaceholder('exp_month').fill('12');
  await field.getByPlaceholder('exp_year').fill('34');
  await field.getByPlaceholder('cvc').fill('123');
}

/** The statuses of the order's intents at localstripe. */
async function intentsOf(orderId: string): Promise<string[]> {
  const intents = await (await fetch(`${stripeURL}/v1/payment_intents`, { headers: { authorization: 'Bearer sk_test_e2e' } })).json();
  return intents.data.filter((pi: any) => pi.metadata.order_id === orderId).map((pi: any) => pi.status);
}

/** 3-D Secure cards: localstripe's Stripe.js plays the bank in a dialog on the page. */
const BANK_ASKS = '4000002500003155';
const BANK_ALWAYS_ASKS = '4000000000003220';

test.describe('3-D Secure', () => {
  test('a payment the bank confirms is paid once, after a double click', async ({ page }) => {
    const orderId = await placeOrder(page, shop.baseURL);
    const pays = recordPosts(page, PAY_PATH);
    await page.goto(`${shop.baseURL}/orders/${orderId}`);
    await hydrated(page);
    await typeCard(page, BANK_ASKS);
    await page.getByRole('button', { name: 'Pay' }).dblclick();
    await expect(page.getByTestId('bank-status')).toContainText('Your bank asks you to confirm this payment');
    await page.screenshot({ path: test.info().outputPath('bank-step.png'), fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    await page.screenshot({ path: test.info().outputPath('bank-step-phone.png'), fullPage: true });
    await page.getByRole('button', { name: 'Complete authentication' }).click();

    await expect(page.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);
    expect(pays).toHaveLength(1);
    expect(await intentsOf(orderId)).toEqual(['succeeded']);
  });

  test('a payment the bank refuses says so, charges nothing, and another card pays', async ({ page }) => {
    const orderId = await placeOrder(page, shop.baseURL);
    await page.goto(`${shop.baseURL}/orders/${orderId}`);
    await hydrated(page);
    await typeCard(page, BANK_ALWAYS_ASKS);
    await page.getByRole('button', { name: 'Pay' }).click();
    await page.getByRole('button', { name: 'Fail authentication' }).click();

    await expect(page.getByTestId('bank-status').getByRole('alert')).toContainText('Your bank did not confirm this payment');
    await expect(page.getByTestId('order-status')).toHaveText('Pending payment');
    await expect(page.getByTestId('bank-continue')).toHaveCount(0);
    await typeCard(page, CARD);
    await page.getByRole('button', { name: 'Pay' }).click();
    await expect(page.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);
    expect((await intentsOf(orderId)).sort()).toEqual(['canceled', 'succeeded']);
  });

  test('a reload in the middle of the bank step offers to continue it, and it pays once', async ({ page, browser }) => {
    const orderId = await placeOrder(page, shop.baseURL);
    await page.goto(`${shop.baseURL}/orders/${orderId}`);
    await hydrated(page);
    await typeCard(page, BANK_ASKS);
    await page.getByRole('button', { name: 'Pay' }).click();
    await expect(page.getByRole('button', { name: 'Complete authentication' })).toBeVisible();

    // The same shopper without scripts is told what the step needs.
    const noScripts = await browser.newContext({ javaScriptEnabled: false, storageState: await page.context().storageState() });
    const plain = await noScripts.newPage();
    await plain.goto(`${shop.baseURL}/orders/${orderId}`);
    await expect(plain.getByTestId('bank-waiting')).toHaveText('Your bank asks you to confirm this payment.');
    await expect(plain.locator('.error', { hasText: 'needs JavaScript' }).first()).toBeVisible();
    await plain.screenshot({ path: test.info().outputPath('bank-step-no-script.png'), fullPage: true });
    await noScripts.close();

    const pays = recordPosts(page, PAY_PATH);
    await page.reload();
    await hydrated(page);
    await page.getByRole('button', { name: 'Continue with your bank' }).click();
    await page.getByRole('button', { name: 'Complete authentication' }).click();
    await expect(page.getByTestId('order-status')).toHaveText(/^(Paid|Fulfilled)$/);
    expect(pays).toHaveLength(0);
    expect(await intentsOf(orderId)).toEqual(['succeeded']);
  });
});

test.describe('without JavaScript', () => {
  test.use({ javaScriptEnabled: false });

  test('the payment form says plainly that paying by card needs scripts', async ({ page }) => {
    const orderId = await placeOrder(page, shop.baseURL);
    await page.goto(`${shop.baseURL}/orders/${orderId}`);
    await expect(page.locator('.card-field .error')).toContainText('Paying by card needs JavaScript here');
    await expect(page.getByLabel('Card number')).toHaveCount(0);
    await page.screenshot({ path: test.info().outputPath('stripe-no-script.png'), fullPage: true });
  });
});
