// How long a shopper on a slow phone waits: the home page and the checkout loaded into an
// empty cache in chromium, with the network and the CPU throttled as Lighthouse's mobile
// profile does (1.6 Mbit/s down, 750 kbit/s up, 150 ms round trips, 4× slower CPU). For each
// page it prints the bytes on the wire by kind, when the server-rendered HTML had arrived,
// when the page without any script had loaded (its stylesheet too: what a shopper can read
// and post before hydration), and when the page was interactive (every island hydrated,
// `body[data-hydrated]`), then the same page loaded again from the browser's cache.
// Figures are printed (scripts/first-load), never asserted: these machines are noisy.
import { test, expect, Browser, Page } from '@playwright/test';
import { addToCart } from '../support/shop';

const NETWORK = {
  offline: false,
  latency: 150,
  downloadThroughput: (1.6 * 1024 * 1024) / 8,
  uploadThroughput: (750 * 1024) / 8,
};
const CPU_SLOWDOWN = 4;
const RUNS = Number(process.env.FIRST_LOAD_RUNS ?? 5);

type Kind = 'html' | 'css' | 'js' | 'wasm' | 'other';
interface Load {
  /** Milliseconds from the start of the navigation. */
  htmlArrived: number;
  loaded: number;
  interactive: number | null;
  bytes: Record<Kind, number>;
}

function kindOf(url: string, mime: string): Kind {
  const path = new URL(url).pathname;
  if (mime.includes('html')) return 'html';
  if (path.endsWith('.css')) return 'css';
  if (path.endsWith('.js')) return 'js';
  if (path.endsWith('.wasm')) return 'wasm';
  return 'other';
}

/** Throttles `page` and counts the bytes each of its responses took on the wire (headers and
 * the body as sent, compressed or not). */
async function throttled(page: Page): Promise<Record<Kind, number>> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send('Network.enable');
  await cdp.send('Network.emulateNetworkConditions', NETWORK);
  await cdp.send('Emulation.setCPUThrottlingRate', { rate: CPU_SLOWDOWN });
  const bytes: Record<Kind, number> = { html: 0, css: 0, js: 0, wasm: 0, other: 0 };
  const kinds = new Map<string, Kind>();
  cdp.on('Network.responseReceived', (e) => kinds.set(e.requestId, kindOf(e.response.url, e.response.mimeType)));
  cdp.on('Network.loadingFinished', (e) => {
    bytes[kinds.get(e.requestId) ?? 'other'] += e.encodedDataLength;
  });
  return bytes;
}

/** Records when `<body>` is marked hydrated, in the page's own clock. */
const WATCH_HYDRATION = () => {
  new MutationObserver((_, observer) => {
    if (document.body?.dataset.hydrated === 'true') {
      (window as any).__interactiveAt = performance.now();
      observer.disconnect();
    }
  }).observe(document, { attributes: true, subtree: true, attributeFilter: ['data-hydrated'] });
};

async function load(page: Page, path: string, bytes: Record<Kind, number>, scripts: boolean): Promise<Load> {
  for (const k of Object.keys(bytes) as Kind[]) bytes[k] = 0;
  await page.goto(path, { waitUntil: 'load' });
  let interactive: number | null = null;
  if (scripts) {
    await page.waitForFunction(() => (window as any).__interactiveAt !== undefined, null, { timeout: 60_000 });
    interactive = await page.evaluate(() => (window as any).__interactiveAt as number);
  }
  // Every response counted, including a wasm bundle still arriving after `load`.
  await page.waitForLoadState('networkidle');
  const timing = await page.evaluate(() => {
    const nav = performance.getEntriesByType('navigation')[0] as PerformanceNavigationTiming;
    return { htmlArrived: nav.responseEnd, loaded: nav.loadEventEnd };
  });
  return { ...timing, interactive, bytes: { ...bytes } };
}

/** One cold load (a new browser context: an empty cache) and then a load from its cache. */
async function coldAndWarm(browser: Browser, baseURL: string, path: string, scripts: boolean) {
  const context = await browser.newContext({ baseURL, javaScriptEnabled: scripts });
  const page = await context.newPage();
  if (path === '/checkout') {
    expect((await page.request.get('/')).ok()).toBeTruthy();
    await addToCart(page, 'MUG-001');
  }
  if (scripts) await page.addInitScript(WATCH_HYDRATION);
  const bytes = await throttled(page);
  const cold = await load(page, path, bytes, scripts);
  const warm = await load(page, path, bytes, scripts);
  await context.close();
  return { cold, warm };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};
const kb = (n: number) => `${(n / 1024).toFixed(1)} KB`;
const ms = (n: number) => `${Math.round(n)} ms`;

for (const path of ['/', '/checkout']) {
  test(`first load of ${path}`, async ({ browser, baseURL }) => {
    const plain: Load[] = [];
    const cold: Load[] = [];
    const warm: Load[] = [];
    for (let run = 0; run < RUNS; run++) {
      plain.push((await coldAndWarm(browser, baseURL!, path, false)).cold);
      const live = await coldAndWarm(browser, baseURL!, path, true);
      cold.push(live.cold);
      warm.push(live.warm);
    }
    const htmlOnly = median(plain.map((l) => l.loaded));
    const htmlArrived = median(plain.map((l) => l.htmlArrived));
    const interactive = median(cold.map((l) => l.interactive!));
    const warmInteractive = median(warm.map((l) => l.interactive!));
    const wire = (loads: Load[], kind: Kind) => median(loads.map((l) => l.bytes[kind]));
    const lines = [
      `first load of ${path} (median of ${RUNS}; 1.6 Mbit/s, 150 ms RTT, CPU ${CPU_SLOWDOWN}× slower)`,
      `  on the wire, empty cache: html ${kb(wire(cold, 'html'))}, css ${kb(wire(cold, 'css'))}, ` +
        `js ${kb(wire(cold, 'js'))}, wasm ${kb(wire(cold, 'wasm'))}, other ${kb(wire(cold, 'other'))}`,
      `  js + wasm on the wire: ${kb(wire(cold, 'js') + wire(cold, 'wasm'))}`,
      `  HTML arrived ${ms(htmlArrived)}; HTML-only page loaded ${ms(htmlOnly)}; interactive ${ms(interactive)}`,
      `  interactive / HTML-only page: ${(interactive / htmlOnly).toFixed(2)}; interactive / HTML arrived: ${(interactive / htmlArrived).toFixed(2)}`,
      `  again from the cache: interactive ${ms(warmInteractive)}, js + wasm on the wire ${kb(wire(warm, 'js') + wire(warm, 'wasm'))}`,
      `RESULT first-load path=${path} html_only_ms=${Math.round(htmlOnly)} html_arrived_ms=${Math.round(htmlArrived)} ` +
        `interactive_ms=${Math.round(interactive)} ratio=${(interactive / htmlOnly).toFixed(2)} ` +
        `js_wasm_bytes=${wire(cold, 'js') + wire(cold, 'wasm')} html_bytes=${wire(cold, 'html')} ` +
        `warm_interactive_ms=${Math.round(warmInteractive)} warm_js_wasm_bytes=${wire(warm, 'js') + wire(warm, 'wasm')}`,
    ];
    console.log(lines.join('\n'));
  });
}
