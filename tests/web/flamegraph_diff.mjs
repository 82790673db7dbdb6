// Opens a differential flame graph page (pyunwind report NEW --diff BASE
// --format flamegraph) in Debian's chromium (puppeteer-core), turns on
// the "elided" list, and prints one JSON object: {"errors", "title",
// "frames": [{fn, depth, delta, rgb: [r, g, b] of its background}],
// "elided": [{path, share}]}; saves a screenshot as OUT.png.
//
//   node flamegraph_diff.mjs NODE_MODULES_DIR PAGE OUT
import { fileUrl, run } from './browser.mjs';

const [modules, page_, outPath] = process.argv.slice(2);
await run(modules, fileUrl(page_), { width: 1200, height: 500 },
          async (page, out) => {
  await page.click('#elided');
  Object.assign(out, await page.evaluate(() => ({
    title: document.getElementById('title').textContent,
    frames: [...document.querySelectorAll('#graph .frame')].map((e) => ({
      fn: e.dataset.fn, depth: Number(e.dataset.depth),
      delta: Number(e.dataset.delta),
      rgb: getComputedStyle(e).backgroundColor.match(/\d+/g).slice(0, 3)
          .map(Number) })),
    elided: [...document.querySelectorAll('.elided-row')].map((e) => ({
      path: e.dataset.path, share: Number(e.dataset.share) })),
  })));
  await page.screenshot({ path: outPath + '.png' });
});
