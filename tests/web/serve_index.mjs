// pyunwind serve's index page (/debug/pprof/) in Debian's chromium, driven
// by puppeteer-core: the targets' table as the page shows it, then the
// page a click on the first target's "dump" link opens.  Prints one JSON
// object: {"errors", "title", "rows": [[cell text...]], "links": [the
// hrefs of the page, resolved], "dump": the dump page's text}, and saves
// a screenshot of the index.
//
//   node serve_index.mjs NODE_MODULES_DIR URL OUT_PREFIX
import { run } from './browser.mjs';

const [modules, url, outPrefix] = process.argv.slice(2);
const origin = new URL(url).origin;
const escaped = origin.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
await run(modules, url, { width: 1200, height: 800 }, async (page, out) => {
  out.title = await page.title();
  out.rows = await page.$$eval('#targets tr', (trs) =>
      trs.slice(1).map((tr) => [...tr.cells].map((td) => td.innerText)));
  out.links = await page.$$eval('a', (as) => as.map((a) => a.href));
  await page.screenshot({ path: `${outPrefix}.png` });
  const dump = await page.$('#targets a');
  if (!dump) throw new Error('no link in the targets table');
  await Promise.all([page.waitForNavigation(), dump.click()]);
  out.dump = await page.evaluate(() => document.body.innerText);
}, { allow: new RegExp('^' + escaped + '/') });
