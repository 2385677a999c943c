import { test, expect } from '../support/shop';

test('the catalog is rendered on the server, then the wasm takes over', async ({ page }, testInfo) => {
  // Hold the wasm back so that what we see first is the server-rendered HTML alone.
  let releaseWasm!: () => void;
  const wasmHeld = new Promise<void>((resolve) => (releaseWasm = resolve));
  await page.route('**/pkg/*.wasm', async (route) => {
    await wasmHeld;
    await route.continue();
  });
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push(e.message));

  await page.goto('/');
  await expect(page.getByRole('heading', { name: 'Stoneware mug' })).toBeVisible();
  await expect(page.getByText('€18.00')).toBeVisible();
  await expect(page.locator('body')).not.toHaveAttribute('data-hydrated', 'true');
  await page.screenshot({ path: testInfo.outputPath('catalog-before-hydration.png'), fullPage: true });

  releaseWasm();
  await expect(page.locator('body')).toHaveAttribute('data-hydrated', 'true');

  // Only the hydrated app reacts to the stepper and updates the cart without a reload.
  const mug = page.locator('li.product', { hasText: 'Stoneware mug' });
  await mug.getByRole('button', { name: 'More Stoneware mug' }).click();
  await expect(mug.getByRole('spinbutton')).toHaveValue('2');
  await mug.getByRole('button', { name: 'Add to cart' }).click();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (2)');
  await page.screenshot({ path: testInfo.outputPath('catalog-hydrated.png'), fullPage: true });

  // The cart lives in the session: it survives a reload.
  await page.reload();
  await expect(page.getByTestId('cart-count')).toHaveText('Cart (2)');
  expect(errors).toEqual([]);
});
