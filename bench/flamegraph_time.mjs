// Times a flame graph page in Debian's chromium (puppeteer-core): opening
// it (until its frames are drawn), a search, clicking a frame (zoom),
// inverting.  Prints "STEP MILLISECONDS" lines.
//   node flamegraph_time.mjs NODE_MODULES_DIR PAGE
import path from 'node:path';
import { createRequire } from 'node:module';

const [modules, page_] = process.argv.slice(2);
const require = createRequire(path.join(modules, 'x.js'));
const puppeteer = require('puppeteer-core');
const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true, args: ['--no-sandbox'] });
const page = await browser.newPage();
await page.setViewport({ width: 1400, height: 800 });
const time = async (step, fn) => {
  const t0 = performance.now();
  await fn();
  console.log(step, Math.round(performance.now() - t0));
};
await time('open', () => page.goto(`file://${path.resolve(page_)}`));
// (the search is drawn once typing pauses, 120 ms: that pause is left out)
await time('search', async () => {
  await page.evaluate(() => {
    const s = document.getElementById('search');
    s.value = 'func_1';
    s.dispatchEvent(new Event('input'));
  });
  await page.waitForFunction(
      () => document.getElementById('matched').textContent !== '');
});
await time('zoom', () => page.evaluate(
    () => document.querySelector('#graph .frame').click()));
await time('invert', () => page.evaluate(() => {
  const c = document.getElementById('inverted');
  c.checked = true;
  c.dispatchEvent(new Event('change'));
}));
await browser.close();
