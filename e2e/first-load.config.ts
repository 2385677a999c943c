import { defineConfig } from '@playwright/test';
import base from './playwright.config';

// The first-load benchmark (scripts/first-load): the browser tests' chromium, server and
// provider, but only the benchmark's own file, whose figures are printed, never asserted.
export default defineConfig({
  ...base,
  testDir: './bench',
  timeout: 600_000,
  use: { ...base.use, screenshot: 'off', trace: 'off' },
});
