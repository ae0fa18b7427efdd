// The console's browser test: Debian's Chromium (/usr/bin/chromium; no browser download),
// driven by Playwright, against a fresh in-memory local stack that serves the built console.
// The page is opened on http://localhost:PORT and calls the API on http://127.0.0.1:PORT, so
// every request is cross-origin and meets the API's CORS as a deployed console does.
import { defineConfig } from "@playwright/test";

const port = Number(process.env.CONSOLE_TEST_PORT ?? 3917);
const bin = process.env.GRIDLINE_LOCAL_BIN ?? "../target/debug/gridline-local";

export default defineConfig({
  testDir: "tests",
  timeout: 180_000,
  expect: { timeout: 15_000 },
  workers: 1,
  retries: 0,
  reporter: [["list"]],
  outputDir: "test-results",
  use: {
    baseURL: `http://localhost:${port}`,
    viewport: { width: 1280, height: 900 },
    trace: "retain-on-failure",
    screenshot: "only-on-failure",
    launchOptions: {
      executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
      // Chromium's own background calls would be refused by a closed network: keep it quiet.
      args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"],
    },
  },
  webServer: {
    command: `${bin} serve --in-memory --port ${port} --engine-port 0 --console dist --allowed-origins http://localhost:${port}`,
    url: `http://127.0.0.1:${port}/config.json`,
    reuseExistingServer: false,
    timeout: 120_000,
    stdout: "ignore",
    stderr: "pipe",
  },
});
