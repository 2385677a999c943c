// Pages of other origins that auto-submit forms to every state-changing endpoint of the shop,
// as an attacker's page would: one on another loopback address (another site), one on another
// port of the shop's own address (another origin of the same site, which SameSite=Lax still
// sends the shopper's cookie to). The shopper's session cookie, cart and orders must come
// out of it unchanged.
import http from 'node:http';
import { AddressInfo } from 'node:net';
import { test, expect, addToCart, cart, orders, placeOrder } from '../support/shop';

/** A form another page can post: where to, how it is encoded, and its fields. */
interface Attack {
  path: string;
  enctype: string;
  fields: Record<string, string>;
}

function attacks(orderId: string): Attack[] {
  const form = 'application/x-www-form-urlencoded';
  // A JSON body in a form: text/plain sends `name=value` as is.
  const json = (body: object) => {
    const text = JSON.stringify(body);
    return { [text.slice(0, -1) + ',"pad":"']: '"}' };
  };
  return [
    { path: '/_fn/add_to_cart', enctype: form, fields: { sku: 'CAP-007', quantity: '9', add_key: 'from-elsewhere' } },
    { path: '/_fn/set_cart_quantity', enctype: form, fields: { sku: 'MUG-001', quantity: '0' } },
    { path: '/_fn/get_cart', enctype: form, fields: {} },
    { path: '/_fn/get_checkout', enctype: form, fields: {} },
    { path: '/checkout', enctype: form, fields: { idempotency_key: 'from-elsewhere' } },
    { path: '/api/checkout', enctype: 'text/plain', fields: json({}) },
    { path: '/api/orders', enctype: 'text/plain', fields: json({ items: [{ sku: 'PEN-005', quantity: 1 }] }) },
    {
      path: `/api/orders/${orderId}/payments`,
      enctype: 'text/plain',
      fields: json({ card_number: '4242424242424242' }),
    },
    { path: '/operator/logout', enctype: form, fields: {} },
  ];
}

/** The attacker's page: a form that submits itself to the shop as soon as it loads. */
function attackPage(shop: string, attack: Attack): string {
  const inputs = Object.entries(attack.fields)
    .map(([name, value]) => `<input type="hidden" name='${name.replace(/'/g, '&#39;')}' value='${value}'>`)
    .join('');
  return `<!DOCTYPE html><html><body><h1>Win a prize</h1>
    <form id="f" method="post" action="${shop}${attack.path}" enctype="${attack.enctype}">${inputs}</form>
    <script>document.getElementById('f').submit()</script></body></html>`;
}

/** A server of the attacker's pages on `host`; `/n` serves the n-th attack. */
async function attackerSite(host: string, shop: string, list: Attack[]): Promise<{ origin: string; close: () => void }> {
  const server = http.createServer((req, res) => {
    const attack = list[Number((req.url ?? '/0').slice(1))];
    res.writeHead(attack ? 200 : 404, { 'content-type': 'text/html' });
    res.end(attack ? attackPage(shop, attack) : 'no such page');
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  return { origin: `http://${host}:${port}`, close: () => server.close() };
}

for (const [name, host] of [
  ['another site (127.0.0.2)', '127.0.0.2'],
  ['another port of the same address', '127.0.0.1'],
] as const) {
  test(`forms auto-submitted from ${name} change nothing for the shopper`, async ({ page, baseURL }, testInfo) => {
    await addToCart(page, 'MUG-001', 2);
    const orderId = await placeOrder(page);
    await addToCart(page, 'TEE-002', 1);
    await page.goto('/orders');
    const cookieBefore = (await page.context().cookies(baseURL)).find((c) => c.name === 'once_session');
    expect(cookieBefore).toBeTruthy();
    const cartBefore = await cart(page);
    const ordersBefore = await orders(page);
    expect(ordersBefore).toHaveLength(1);

    const list = attacks(orderId);
    const attacker = await attackerSite(host, baseURL!, list);
    try {
      for (const [i, attack] of list.entries()) {
        // The shop's answer to the attacker's post: whatever it is, it must not act.
        const answered = page.waitForResponse(
          (r) => r.url() === `${baseURL}${attack.path}` && r.request().method() === 'POST',
        );
        await page.goto(`${attacker.origin}/${i}`);
        const response = await answered;
        expect(response.status(), attack.path).toBe(403);
        expect(response.headers()['set-cookie'] ?? '', attack.path).not.toContain('once_session=');
      }
      await page.screenshot({ path: testInfo.outputPath('refused.png'), fullPage: true });
    } finally {
      attacker.close();
    }

    const cookieAfter = (await page.context().cookies(baseURL)).find((c) => c.name === 'once_session');
    expect(cookieAfter?.value).toBe(cookieBefore!.value);
    expect(await cart(page)).toEqual(cartBefore);
    expect(await orders(page)).toEqual(ordersBefore);
    await page.goto('/orders');
    await expect(page.getByText(ordersBefore[0].order_no)).toBeVisible();
    await page.goto(`/orders/${orderId}`);
    await expect(page.getByRole('heading', { level: 1 })).not.toHaveText('There is no such order');
  });
}

test('a form posted from another site shows a plain page that says nothing was done', async ({ page, baseURL }) => {
  await addToCart(page, 'MUG-001', 1);
  const list = attacks('00000000-0000-0000-0000-000000000000').filter((a) => a.path === '/checkout');
  const attacker = await attackerSite('127.0.0.2', baseURL!, list);
  try {
    await page.goto(`${attacker.origin}/0`);
    await expect(page.getByRole('heading', { level: 1 })).toHaveText('This form did not come from the shop');
  } finally {
    attacker.close();
  }
});
