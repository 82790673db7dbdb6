// Opens a pyunwind flame graph page of a profile sampled with --opcodes in
// Debian's chromium (puppeteer-core) and reads the tooltips (titles) of
// the frames of function FUNC, then the same in the inverted view (the
// `i` key).  Prints {errors, titles: [...], inverted: [...]}; screenshot
// OUT-inverted.png.
//
//   node flamegraph_ops.mjs NODE_MODULES_DIR PAGE OUT FUNC
import { fileUrl, run } from './browser.mjs';

const [modules, page_, out_, func] = process.argv.slice(2);
const titles = (page) => page.evaluate((fn) =>
  [...document.querySelectorAll('.frame')]
      .filter((e) => e.dataset.fn === fn).map((e) => e.title), func);
await run(modules, fileUrl(page_), { width: 1200, height: 700 },
          async (page, out) => {
  await page.waitForSelector('.frame');
  out.titles = await titles(page);
  await page.keyboard.press('i');
  await new Promise((r) => setTimeout(r, 300));
  out.inverted = await titles(page);
  await page.screenshot({ path: out_ + '-inverted.png' });
});
