// Opens a pyunwind heat map page in Debian's chromium (puppeteer-core):
// reads the index, opens the file FILE, reads every line's counts, then
// clicks the first "calls FUNC" link twice and reports how many times the
// target line started to flash (each click must restart it).  Prints one
// JSON object {errors, index: [[self, path]], source: [the text of FILE's
// lines as shown], nosource (the page says it has none), hot: [{path, text, href}]
// (the index's hottest line of each file), hotOpened (the line FILE's
// hottest-line link opened, highlighted), tree: [{kind (dir or file),
// depth, self, path}], lines: {LINE: [self,
// total]}, link: {file, line}, flashes, visible}; screenshots OUT-*.png.
//
//   node heatmap.mjs NODE_MODULES_DIR PAGE OUT FILE FUNC
import { fileUrl, run } from './browser.mjs';

const [modules, page_, out_, file, func] = process.argv.slice(2);
await run(modules, fileUrl(page_), { width: 1200, height: 700 },
          async (page, out) => {
  out.index = await page.evaluate(() => [...document.querySelectorAll('.file-row')]
      .map((r) => [Number(r.cells[0].textContent), r.cells[3].textContent]));
  out.tree = await page.evaluate(() => [...document.querySelectorAll(
      '#tree tr.dir-row, #tree tr.tree-file')].map((r) => ({
        kind: r.className === 'dir-row' ? 'dir' : 'file',
        depth: Number(r.dataset.depth), self: Number(r.dataset.self),
        path: r.dataset.path })));
  // each file's hottest line as the index shows it, then where its link
  // leads: the file's page, scrolled to that line, highlighted
  out.hot = await page.evaluate(() => [...document.querySelectorAll('.file-row')]
      .map((r) => ({ path: r.cells[3].textContent, text: r.cells[2].textContent,
                     href: r.cells[2].querySelector('a')?.getAttribute('href') })));
  await page.screenshot({ path: out_ + '-index.png', fullPage: true });
  await page.evaluate((f) => [...document.querySelectorAll('.file-row')]
      .find((r) => r.cells[3].textContent === f).cells[2].querySelector('a')
      .click(), file);
  await page.waitForSelector('table.src');
  await new Promise((r) => setTimeout(r, 100));
  out.hotOpened = await page.evaluate(() => {
    const r = document.querySelector('tr.flash');
    return r ? Number(r.dataset.line) : null;
  });
  await page.evaluate(() => { location.hash = ''; });
  await page.waitForSelector('.file-row');
  const opened = await page.evaluate((f) => {
    const a = [...document.querySelectorAll('.file-row a')]
        .find((x) => x.textContent === f);
    if (a) a.click();
    return !!a;
  }, file);
  if (!opened) throw new Error('no file ' + file + ' in the index');
  await page.waitForSelector('table.src');
  // (the source's text as shown, line by line: empty when the page had
  // none to show)
  out.source = await page.evaluate(() => [...document.querySelectorAll(
      'tr[data-line] td.code')].map((c) => c.textContent));
  out.nosource = await page.evaluate(() => !!document.querySelector('.nosource'));
  out.lines = await page.evaluate(() => Object.fromEntries(
      [...document.querySelectorAll('tr[data-line]')]
          .filter((r) => Number(r.dataset.total) > 0)
          .map((r) => [r.dataset.line, [Number(r.dataset.self),
                                        Number(r.dataset.total)]])));
  // count every start of the highlight on the link's target
  out.link = await page.evaluate((fn) => {
    const a = [...document.querySelectorAll('.links a.call')]
        .find((x) => x.textContent.startsWith('calls ' + fn + ' '));
    if (!a) return null;
    window.__flashes = 0;
    const target = document.getElementById('L' + a.dataset.line);
    new MutationObserver(() => {
      if (target.classList.contains('flash')) window.__flashes++;
    }).observe(target, { attributes: true, attributeFilter: ['class'] });
    return { file: Number(a.dataset.file), line: Number(a.dataset.line) };
  }, func);
  if (!out.link) throw new Error('no link to ' + func);
  for (let i = 0; i < 2; i++) {
    await page.evaluate((fn) => [...document.querySelectorAll('.links a.call')]
        .find((x) => x.textContent.startsWith('calls ' + fn + ' ')).click(), func);
    await new Promise((r) => setTimeout(r, 200));
  }
  out.flashes = await page.evaluate(() => window.__flashes);
  out.visible = await page.evaluate((l) => {
    const r = document.getElementById('L' + l).getBoundingClientRect();
    return r.top >= 0 && r.bottom <= window.innerHeight;
  }, out.link.line);
  await page.screenshot({ path: out_ + '-file.png' });
});
