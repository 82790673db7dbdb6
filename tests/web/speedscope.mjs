// Opens a speedscope file in speedscope's own app (the npm package's
// dist/release/index.html) in Debian's chromium, driven by puppeteer-core,
// the way `speedscope FILE` does (a script calling
// speedscope.loadFileFromBase64, named by #localProfilePath), then shows
// the Sandwich view of each profile (thread) in turn.  Prints one JSON
// object: {"title", "errors": [console errors and page errors],
// "profiles": [{"name", "text": the Sandwich table's text}]}, and saves a
// screenshot of each view next to OUT.
//
//   node speedscope.mjs NODE_MODULES_DIR PROFILE OUT_PREFIX
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { run } from './browser.mjs';

const [modules, profile, outPrefix] = process.argv.slice(2);
const app = path.join(modules, 'speedscope', 'dist', 'release', 'index.html');

const js = path.join(os.tmpdir(), `pyunwind-speedscope-${process.pid}.js`);
fs.writeFileSync(js, `speedscope.loadFileFromBase64(${JSON.stringify(
    path.basename(profile))}, ${JSON.stringify(
    fs.readFileSync(profile).toString('base64'))})`);

const url = `file://${app}#localProfilePath=${js}`;
await run(modules, url, { width: 1400, height: 900 },
          async (page, out) => {
  // the flame graph's canvas appears once the profile is imported
  await page.waitForFunction(
      () => document.title !== 'speedscope' || document.querySelector('canvas'),
      { timeout: 20000 });
  await new Promise((r) => setTimeout(r, 500));
  out.title = await page.title();
  // the Sandwich view: its keyboard shortcut
  await page.keyboard.press('3');
  await new Promise((r) => setTimeout(r, 500));
  // every profile: the toolbar's "name (i/n)" selector, next profile by
  // the keyboard shortcut n
  for (let i = 0; i < 64; i++) {
    const text = await page.evaluate(() => document.body.innerText);
    await page.screenshot({ path: `${outPrefix}-${i}.png` });
    out.profiles.push({ text });
    const m = /\((\d+)\/(\d+)\)/.exec(text);
    if (!m || Number(m[1]) >= Number(m[2])) break;
    await page.keyboard.press('n');
    await new Promise((r) => setTimeout(r, 400));
  }
}, { args: ['--allow-file-access-from-files'], out: { profiles: [] },
     cleanup: () => fs.unlinkSync(js) });
