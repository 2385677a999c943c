import { test, expect, Locator, Page } from '@playwright/test';
import { operatorBrowserLink, startConsoleServer, stopServer } from '../support/server';

const PASSWORD = 'e2e-operator-link-password';

// A new browser let in by a link from `server operator-browser`, as an operator on a phone
// would, with scripts off and the keyboard only; then a second browser with the same link.
test.use({ javaScriptEnabled: false, viewport: { width: 390, height: 844 } });

test('a link lets in the one browser that takes it, keyboard only and without scripts', async ({ browser }, testInfo) => {
  const server = await startConsoleServer(PASSWORD);
  const base = server.baseURL;
  try {
    const link = operatorBrowserLink(server, PASSWORD);
    const operator = await browser.newPage();
    await operator.goto(`${base}${link}`);
    await expect(operator.getByRole('heading', { name: 'Let this browser in' })).toBeVisible();
    await operator.screenshot({ path: testInfo.outputPath('link-phone.png'), fullPage: true });
    // Opening the page took nothing: the button does.
    const button = operator.getByRole('button', { name: 'Let this browser in' });
    await tabTo(operator, button);
    await operator.keyboard.press('Enter');
    await expect(operator).toHaveURL(/\/operator\/login$/);
    await operator.getByLabel('Password').focus();
    await operator.keyboard.type(PASSWORD);
    await operator.keyboard.press('Enter');
    await expect(operator.getByTestId('overview')).toBeVisible();

    const stranger = await browser.newPage();
    await stranger.goto(`${base}${link}`);
    await expect(stranger.getByText('another browser took it')).toBeVisible();
    await expect(stranger.getByRole('button', { name: 'Let this browser in' })).toHaveCount(0);
    await stranger.screenshot({ path: testInfo.outputPath('taken-phone.png'), fullPage: true });
  } finally {
    await stopServer(server);
  }
});

/** Presses Tab until `target` has the focus (at most ten times). */
async function tabTo(page: Page, target: Locator): Promise<void> {
  for (let i = 0; i < 10; i++) {
    await page.keyboard.press('Tab');
    if (await target.evaluate((el) => el === document.activeElement).catch(() => false)) return;
  }
  await expect(target).toBeFocused();
}
