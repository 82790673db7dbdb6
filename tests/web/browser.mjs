// What every page harness here shares: Debian's chromium driven by
// puppeteer-core (from the test set-up's NODE_MODULES_DIR), one page that
// records its console errors, page errors, dialogs and any request that
// leaves the machine (the pages must work offline), and the harness's
// result printed as one JSON object whose "errors" holds all of those and
// the harness's own failure.
import path from 'node:path';
import { createRequire } from 'node:module';

// The file: URL of a path.
export const fileUrl = (p) => `file://${path.resolve(p)}`;

// Opens url in a viewport of the given size and awaits body(page, out);
// then prints out.  opts: args (more chromium switches), out (the result's
// first fields), cleanup (called once the browser is closed), allow (a
// RegExp of URLs the page may request besides files: a local server's).
export async function run(modules, url, viewport, body, opts = {}) {
  const require = createRequire(path.join(modules, 'x.js'));
  const puppeteer = require('puppeteer-core');
  const errors = [];
  const out = { errors, ...(opts.out || {}) };
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true, args: ['--no-sandbox', ...(opts.args || [])] });
  try {
    const page = await browser.newPage();
    await page.setViewport(viewport);
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('dialog', async (d) => {
      errors.push('dialog: ' + d.message());
      await d.dismiss();
    });
    page.on('request', (r) => {
      if (!/^(file|data|blob):/.test(r.url()) &&
          !(opts.allow && opts.allow.test(r.url())))
        errors.push('network request: ' + r.url());
    });
    await page.goto(url);
    await body(page, out);
  } catch (e) {
    errors.push('harness: ' + e.message);
  } finally {
    await browser.close();
    if (opts.cleanup) opts.cleanup();
  }
  console.log(JSON.stringify(out));
}
