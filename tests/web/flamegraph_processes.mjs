// Opens a pyunwind flame graph page of several processes (sample
// --subprocesses) in Debian's chromium (puppeteer-core) and uses its
// process choice as a person would, reporting as one JSON object:
//   title     the page's heading
//   rows      the processes' table: [{pid, samples, share, when}]
//   total     the table's last row: its samples
//   stacks    the summary's "stacks"
//   options   the process choice: [{value, text}]
//   threads   the thread choice's options, every process shown
//   all       the frames drawn, every process: [{fn, total, depth}]
//   tooltips  the titles of the frames named SEARCH, every process
//   chosen    after choosing the process PID: {frames: [fn...], threads:
//             [option texts], info, marked: [pids of marked rows],
//             hotspots: [fn...], search: [fn...] of frames marked by
//             typing SEARCH, matched}
//   thread    then its last thread chosen: the frames' functions
//   back      a click on PID's row again (every process): frames drawn
//   errors    console errors and page errors
// and saves a screenshot of each step as OUT_PREFIX-STEP.png.
//
//   node flamegraph_processes.mjs NODE_MODULES_DIR PAGE OUT_PREFIX PID SEARCH
import { fileUrl, run } from './browser.mjs';

const [modules, page_, outPrefix, pid, searchText] = process.argv.slice(2);
const frames = (page) => page.evaluate(() =>
  [...document.querySelectorAll('#graph .frame')].map((e) => ({
    fn: e.dataset.fn, total: Number(e.dataset.total),
    depth: Number(e.dataset.depth), match: e.classList.contains('match'),
    title: e.title })));
const options = (page, id) => page.evaluate((i) =>
  [...document.getElementById(i).options].map((o) => ({
    value: o.value, text: o.textContent })), id);
const shot = (page, step) =>
  page.screenshot({ path: `${outPrefix}-${step}.png`, fullPage: true });
await run(modules, fileUrl(page_), { width: 1400, height: 900 },
          async (page, out) => {
  Object.assign(out, await page.evaluate(() => ({
    title: document.getElementById('title').textContent,
    rows: [...document.querySelectorAll('.process-row')].map((r) => ({
      pid: Number(r.dataset.pid), samples: Number(r.dataset.samples),
      share: r.children[5].textContent, when: r.children[6].textContent })),
    total: Number(document.querySelector('.process-total').dataset.samples),
    stacks: Number(/stacks (\d+)/.exec(
        document.getElementById('summary').textContent)[1]),
  })));
  out.options = await options(page, 'process');
  out.threads = (await options(page, 'thread')).map((o) => o.text);
  const all = await frames(page);
  out.all = all.map((f) => ({ fn: f.fn, total: f.total, depth: f.depth }));
  out.tooltips = all.filter((f) => f.fn === searchText).map((f) => f.title);
  await shot(page, 'all');
  const opt = out.options.find((o) => o.text.startsWith('pid ' + pid + ' '));
  if (!opt) throw new Error('no process ' + pid + ' to choose');
  await page.select('#process', opt.value);
  out.chosen = {
    frames: [...new Set((await frames(page)).map((f) => f.fn))],
    threads: (await options(page, 'thread')).map((o) => o.text),
    ...(await page.evaluate(() => ({
      info: document.getElementById('info').textContent,
      marked: [...document.querySelectorAll('.process-row.chosen')]
          .map((r) => Number(r.dataset.pid)),
      hotspots: [...document.querySelectorAll('.hotspot')]
          .map((a) => a.dataset.fn) }))),
  };
  await shot(page, 'chosen');
  await page.keyboard.press('/');
  await page.keyboard.type(searchText);
  await new Promise((r) => setTimeout(r, 400)); // (drawn once typing pauses)
  out.chosen.search = (await frames(page)).filter((f) => f.match)
      .map((f) => f.fn);
  out.chosen.matched = await page.evaluate(
      () => document.getElementById('matched').textContent);
  await shot(page, 'search');
  await page.keyboard.press('Escape');
  const threads = await options(page, 'thread');
  await page.select('#thread', threads[threads.length - 1].value);
  out.thread = [...new Set((await frames(page)).map((f) => f.fn))];
  await page.evaluate((p) => [...document.querySelectorAll('.process-row')]
      .find((r) => r.dataset.pid === p).click(), pid);
  out.back = (await frames(page)).map((f) => ({ fn: f.fn, total: f.total,
                                                depth: f.depth }));
});
