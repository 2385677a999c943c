import { defineConfig } from '@playwright/test';
import base from './playwright.config';

// The first-load benchmark (scripts/first-load): the browser tests' chromium, server and
// provider, but only the benchmark's own file, whose figures are printed, never asserted.
// FIRST_LOAD_BASE_URL measures a shop running elsewhere instead (an earlier build, to compare).
export default defineConfig({
  ...base,
  testDir: './bench',
  timeout: 600_000,
  use: {
    ...base.use,
    baseURL: process.env.FIRST_LOAD_BASE_URL ?? base.use?.baseURL,
    screenshot: 'off',
    trace: 'off',
  },
});
