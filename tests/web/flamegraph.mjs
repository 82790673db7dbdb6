// Opens a pyunwind flame graph page in Debian's chromium (puppeteer-core)
// and uses it as a person would, reporting what the page shows after each
// step as one JSON object:
//   load      the frames drawn: {fn, total, self, depth, left, width}
//   click     clicking the first frame named CLICK: the info line
//   zoom      clicking ZOOM, then hovering CLICK inside it: its title
//   escape    Esc: the number of frames (the unzoomed view again)
//   keys      the outermost row after ArrowDown, ArrowRight, ArrowLeft,
//             ArrowDown (keyboard navigation from the unzoomed view)
//   inverted  the inverted view's outermost row and the graph's width
//   search    typing SEARCH: frames marked, the "matched" line
//   hotspots  the hotspot links: [function, self samples]
//   sandwich  the hotspot link of SEARCH clicked: {part, depth, fn, total}
//   gil       Status "holding the GIL" chosen: the outermost row
//   modules   "modules" checked (any status): the frames' labels
//   summary   the summary line
//   lines     "lines" checked (modules off): the frames with their line
//             and label; linesMatched, the "matched" line of a search for
//             SEARCH then; linesHotspots, the hotspot links' texts
//   theme     the page's background: light, the system preferring dark,
//             "light" chosen then, "dark" chosen with a light system
//   svg       "SVG" clicked: the file it offers (name, whether chromium
//             parses it, its frames and their labels, its size as an
//             image chromium drew) and the frames the page drew
//   errors    console errors and page errors
// and saves a screenshot of each step as OUT_PREFIX-STEP.png.
//
//   node flamegraph.mjs NODE_MODULES_DIR PAGE OUT_PREFIX CLICK ZOOM SEARCH
import { fileUrl, run } from './browser.mjs';

const [modules, page_, outPrefix, clickName, zoomName, searchText] =
    process.argv.slice(2);
const frames = (page) => page.evaluate(() =>
  [...document.querySelectorAll('#graph .frame')].map((e) => ({
    fn: e.dataset.fn, total: Number(e.dataset.total),
    self: Number(e.dataset.self), depth: Number(e.dataset.depth),
    left: parseFloat(e.style.left), width: parseFloat(e.style.width),
    match: e.classList.contains('match'), title: e.title,
    line: Number(e.dataset.line || 0), text: e.textContent })));
const clickFrame = (page, name) => page.evaluate((n) => {
  const el = [...document.querySelectorAll('#graph .frame')]
      .find((e) => e.dataset.fn === n);
  if (el) el.click();
  return !!el;
}, name);
const shot = (page, step) =>
  page.screenshot({ path: `${outPrefix}-${step}.png` });
await run(modules, fileUrl(page_), { width: 1400, height: 800 },
          async (page, out) => {
  out.load = await frames(page);
  out.graphWidth = await page.evaluate(() => document.getElementById('graph').clientWidth);
  await shot(page, 'load');
  if (!(await clickFrame(page, clickName))) throw new Error('no frame ' + clickName);
  out.click = await page.evaluate(() => document.getElementById('info').textContent);
  await shot(page, 'click');
  await page.keyboard.press('Escape');
  if (!(await clickFrame(page, zoomName))) throw new Error('no frame ' + zoomName);
  out.zoom = (await frames(page)).filter((f) => f.fn === clickName).map((f) => f.title);
  out.zoomDepth0 = (await frames(page)).filter((f) => f.depth === 0).map((f) => f.fn);
  await shot(page, 'zoom');
  await page.keyboard.press('Escape');
  out.escape = (await frames(page)).length;
  const row0 = async () => (await frames(page)).filter((f) => f.depth === 0)
      .map((f) => f.fn);
  await page.keyboard.press('ArrowDown');
  out.keys = { down: await row0() };
  await page.keyboard.press('ArrowRight');
  out.keys.right = await row0();
  await page.keyboard.press('ArrowLeft');
  out.keys.left = await row0();
  await page.keyboard.press('ArrowDown');
  out.keys.down2 = await row0();
  await page.keyboard.press('Escape');
  await page.keyboard.press('i');
  out.inverted = (await frames(page)).filter((f) => f.depth === 0);
  await shot(page, 'inverted');
  await page.keyboard.press('i');
  await page.keyboard.press('/');
  await page.keyboard.type(searchText);
  await new Promise((r) => setTimeout(r, 400)); // (drawn once typing pauses)
  out.search = (await frames(page)).filter((f) => f.match).map((f) => f.fn);
  out.matched = await page.evaluate(() => document.getElementById('matched').textContent);
  await shot(page, 'search');
  await page.keyboard.press('Escape');
  out.hotspots = await page.evaluate(() => [...document.querySelectorAll('.hotspot')]
      .map((a) => [a.dataset.fn, Number(a.dataset.self)]));
  const clicked = await page.evaluate((n) => {
    const a = [...document.querySelectorAll('.hotspot')].find((x) => x.dataset.fn === n);
    if (a) a.click();
    return !!a;
  }, searchText);
  if (!clicked) throw new Error('no hotspot ' + searchText);
  out.sandwich = (await frames(page)).map((f) => ({ fn: f.fn, total: f.total,
                                                   depth: f.depth }));
  out.sandwichParts = await page.evaluate(() => [...document.querySelectorAll('#graph .frame')]
      .map((e) => e.dataset.part));
  await shot(page, 'sandwich');
  await page.keyboard.press('Escape');
  await page.select('#status', '1');
  out.gil = (await frames(page)).filter((f) => f.depth === 0)
      .map((f) => ({ fn: f.fn, total: f.total }));
  await shot(page, 'gil');
  await page.select('#status', '0');
  await page.click('#modules');
  out.modules = await page.evaluate(() => [...document.querySelectorAll(
      '#graph .frame')].map((e) => e.textContent).filter((t) => t));
  out.summary = await page.evaluate(
      () => document.getElementById('summary').textContent);
  await shot(page, 'modules');
  await page.click('#modules');
  const clearSearch = async () => {
    await page.evaluate(() => {
      const s = document.getElementById('search');
      s.value = '';
      s.dispatchEvent(new Event('input'));
      s.blur();
    });
    await new Promise((r) => setTimeout(r, 400));
  };
  await clearSearch();
  await page.evaluate(() => document.activeElement.blur());
  await page.keyboard.press('l');
  out.lines = (await frames(page)).map((f) => ({ fn: f.fn, line: f.line,
      total: f.total, depth: f.depth, text: f.text, title: f.title }));
  out.linesHotspots = await page.evaluate(() => [...document.querySelectorAll(
      '#hotspots a')].map((a) => a.textContent));
  await shot(page, 'lines');
  await page.type('#search', searchText);
  await new Promise((r) => setTimeout(r, 400));
  out.linesMatched = await page.evaluate(
      () => document.getElementById('matched').textContent);
  await clearSearch();
  await page.click('#lines');
  const bg = () => page.evaluate(
      () => getComputedStyle(document.body).backgroundColor);
  out.theme = { light: await bg() };
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme',
                                     value: 'dark' }]);
  out.theme.systemDark = await bg();
  await shot(page, 'dark');
  await page.select('#theme', 'light');
  out.theme.chosenLight = await bg();
  await page.emulateMediaFeatures([{ name: 'prefers-color-scheme',
                                     value: 'light' }]);
  await page.select('#theme', 'dark');
  out.theme.chosenDark = await bg();
  await page.click('#svg');
  out.svg = await page.evaluate(async () => {
    const a = document.getElementById('svg-link');
    const text = await (await fetch(a.href)).text();
    const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
    const img = new Image();
    img.src = a.href;
    await img.decode();
    const boxes = [...doc.documentElement.children]
        .filter((e) => e.tagName === 'svg');
    return { download: a.getAttribute('download'),
             parsed: !doc.querySelector('parsererror'),
             frames: boxes.length,
             labels: boxes.map((b) => b.querySelector('text')?.textContent || '')
                 .filter((t) => t),
             drawn: [...document.querySelectorAll('#graph .frame')]
                 .map((e) => e.textContent).filter((t) => t),
             width: img.naturalWidth, height: img.naturalHeight,
             graphWidth: document.getElementById('graph').clientWidth };
  });
  await page.select('#theme', '');
});
