// Opens a pyunwind heat map page of a profile sampled with --opcodes in
// Debian's chromium (puppeteer-core): opens the file FILE, counts the
// bytecode tables shown before the "bytecode" toggle is checked, checks
// it, and reads every line's instructions.  Prints one JSON object
// {errors, hidden_before, lines: {LINE: [[instr, op, base, self, total]]}};
// screenshot OUT-file.png.
//
//   node heatmap_bytecode.mjs NODE_MODULES_DIR PAGE OUT FILE
import { fileUrl, run } from './browser.mjs';

const [modules, page_, out_, file] = process.argv.slice(2);
await run(modules, fileUrl(page_), { width: 1200, height: 900 },
          async (page, out) => {
  const opened = await page.evaluate((f) => {
    const a = [...document.querySelectorAll('.file-row a')]
        .find((x) => x.textContent === f);
    if (a) a.click();
    return !!a;
  }, file);
  if (!opened) throw new Error('no file ' + file + ' in the index');
  await page.waitForSelector('table.src');
  out.hidden_before = await page.evaluate(
      () => document.querySelectorAll('table.bytecode').length);
  await page.click('#bytecode');
  await page.waitForSelector('table.bytecode');
  out.lines = await page.evaluate(() => {
    const lines = {};
    for (const t of document.querySelectorAll('table.bytecode')) {
      const line = t.closest('tr[data-line]').dataset.line;
      lines[line] = [...t.querySelectorAll('tr[data-instr]')].map((r) => {
        const op = r.cells[1].firstChild.textContent;
        const b = r.cells[1].querySelector('.base');
        return [Number(r.dataset.instr), op,
                b ? b.textContent.replace(/^ \(|\)$/g, '') : op,
                Number(r.dataset.self), Number(r.dataset.total)];
      });
    }
    return lines;
  });
  const hot = await page.evaluate(() => {
    const t = [...document.querySelectorAll('table.bytecode')]
        .sort((a, b) => b.rows.length - a.rows.length)[0];
    return t ? t.closest('tr[data-line]').dataset.line : null;
  });
  if (hot) await page.evaluate((l) => document.getElementById('L' + l)
      .scrollIntoView({ block: 'center' }), hot);
  await page.screenshot({ path: out_ + '-file.png' });
});
