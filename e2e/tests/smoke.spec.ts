import { test, expect, addToCart, hydrated } from '../support/shop';

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

test('the bundle is sent compressed under hashed names, split by page, and the next page takes it from the cache', async ({ page }) => {
  // Each answer of the server carries an id of its own; a file the browser kept shows the id
  // of the answer it kept.
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  const fetched = new Map<string, { encoding: string; answer: string; keep: string }>();
  cdp.on('Network.responseReceived', (e) => {
    const path = new URL(e.response.url).pathname;
    if (!path.startsWith('/pkg/')) return;
    const headers = Object.fromEntries(Object.entries(e.response.headers).map(([k, v]) => [k.toLowerCase(), String(v)]));
    fetched.set(path, {
      encoding: headers['content-encoding'] ?? '',
      answer: headers['x-request-id'] ?? '',
      keep: headers['cache-control'] ?? '',
    });
  });
  await page.goto('/');
  await hydrated(page);
  const first = new Map(fetched);
  // The stylesheet, the script, the loader of the split parts, and the shared bundle alone:
  // none of the checkout's or the order page's code.
  const names = [...first.keys()].map((p) => p.replace(/\.[A-Za-z0-9_-]{20,}\./, '.HASH.')).sort();
  expect(names).toEqual(['/pkg/__wasm_split.HASH.js', '/pkg/once.HASH.css', '/pkg/once.HASH.js', '/pkg/once.HASH.wasm']);
  for (const [path, { encoding, answer }] of first) {
    expect(encoding, path).toBe('br');
    expect(answer, path).not.toBe('');
  }

  // A file named by its content is kept for good; the build writes the split loader's name
  // into the script and the bundle after naming them, so those two are asked again each time.
  const kept = [...first].filter(([, f]) => f.keep === 'public, max-age=31536000, immutable').map(([p]) => p);
  expect(kept.map((p) => p.replace(/\.[A-Za-z0-9_-]{20,}\./, '.HASH.')).sort()).toEqual(['/pkg/__wasm_split.HASH.js', '/pkg/once.HASH.css']);
  for (const [path, { keep }] of first) if (!kept.includes(path)) expect(keep, path).toBe('no-cache');

  // Another page of the shop: the same files, the kept ones not asked of the server again.
  fetched.clear();
  await page.goto('/orders');
  await hydrated(page);
  expect([...fetched.keys()].sort()).toEqual([...first.keys()].sort());
  for (const path of kept) expect(fetched.get(path)!.answer, path).toBe(first.get(path)!.answer);

  // The checkout adds the parts of its own island, and takes the rest from the cache.
  await addToCart(page, 'MUG-001');
  fetched.clear();
  await page.goto('/checkout');
  await hydrated(page);
  const added = [...fetched.keys()].filter((p) => !first.has(p));
  expect(added.some((p) => p.startsWith('/pkg/split_checkout_panel'))).toBe(true);
  for (const path of added) expect(fetched.get(path)!.encoding, path).toBe('br');
  for (const path of kept) expect(fetched.get(path)!.answer, path).toBe(first.get(path)!.answer);
});
