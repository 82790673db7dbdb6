// Opens a pyunwind flame graph page of a profile sampled with --opcodes in
// Debian's chromium (puppeteer-core) and reads the tooltips (titles) of
// the frames of function FUNC, then the same in the inverted view (the
// `i` key).  Prints {errors, titles: [...], inverted: [...]}; screenshot
// OUT-inverted.png.
//
//   node flamegraph_ops.mjs NODE_MODULES_DIR PAGE OUT FUNC
import path from 'node:path';
import { createRequire } from 'node:module';

const [modules, page_, out_, func] = process.argv.slice(2);
const require = createRequire(path.join(modules, 'x.js'));
const puppeteer = require('puppeteer-core');
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true, args: ['--no-sandbox'] });
const errors = [];
const out = { errors };
const titles = (page) => page.evaluate((fn) =>
  [...document.querySelectorAll('.frame')]
      .filter((e) => e.dataset.fn === fn).map((e) => e.title), func);
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 700 });
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`file://${path.resolve(page_)}`);
  await page.waitForSelector('.frame');
  out.titles = await titles(page);
  await page.keyboard.press('i');
  await new Promise((r) => setTimeout(r, 300));
  out.inverted = await titles(page);
  await page.screenshot({ path: out_ + '-inverted.png' });
} catch (e) {
  errors.push('harness: ' + e.message);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
