import { test, expect, addToCart, hydrated, consoleErrors, ORDER_URL, typeDetails } from '../support/shop';

// The shop under its content security policy: scripts only from the shop and with the
// nonce of their answer, the wasm compiled under 'wasm-unsafe-eval'. A shopper's whole
// path (home, cart, checkout, order, pay) hydrates and works, and the browser reports no
// error and no violation of the policy.
test('the shop hydrates and works under its content security policy', async ({ page }, testInfo) => {
  const errors = consoleErrors(page);
  await page.addInitScript(() => {
    document.addEventListener('securitypolicyviolation', (e) =>
      console.error(`CSP violation: ${e.violatedDirective} ${e.blockedURI}`),
    );
  });

  const home = await page.goto('/');
  const policy = home!.headers()['content-security-policy'];
  expect(policy).toContain("'wasm-unsafe-eval'");
  expect(policy).not.toContain("'unsafe-eval'");
  expect(policy).not.toContain("'unsafe-inline'");
  await hydrated(page);

  const mug = page.locator('li.product', { hasText: 'Stoneware mug' });
  await mug.getByRole('button', { name: 'Add to cart' }).click();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (1)');

  await page.goto('/checkout');
  await hydrated(page);
  await typeDetails(page);
  await page.getByRole('button', { name: 'Place order' }).click();
  await expect(page).toHaveURL(ORDER_URL);
  await hydrated(page);
  await page.getByLabel('Card number').fill('4242424242424242');
  await page.getByRole('button', { name: 'Pay' }).click();
  await expect(page.getByTestId('order-status')).toHaveText(/Paid|Fulfilled/);
  await page.screenshot({ path: testInfo.outputPath('paid-under-csp.png'), fullPage: true });
  expect(errors).toEqual([]);
});

// The policy is what stops a script injected into a page: one without the nonce is refused.
test('a script without the answer\'s nonce does not run', async ({ page }) => {
  await addToCart(page, 'MUG-001');
  await page.goto('/');
  await hydrated(page);
  const ran = await page.evaluate(async () => {
    (window as any).injected = false;
    const script = document.createElement('script');
    script.textContent = 'window.injected = true;';
    document.body.appendChild(script);
    await new Promise((r) => setTimeout(r, 100));
    return (window as any).injected;
  });
  expect(ran).toBe(false);
});
