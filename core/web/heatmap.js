// pyunwind heat map: the source of every profiled file, each line with its
// self and total samples, coloured by one of them, with links from a line
// to the functions it called and from a function's first line to the
// lines that called it.  Clicking a link shows the target line and makes
// it flash, every time it is clicked.  A profile sampled with --opcodes
// adds a bytecode panel: under each line, the instructions that ran on it
// with their self and total samples.  Drawn from the #pyu-data JSON that
// core/src/out_heatmap.c writes; no network access.
'use strict';
(function () {
  const D = JSON.parse(document.getElementById('pyu-data').textContent);
  const $ = (id) => document.getElementById(id);
  let by = 'total';
  let bytecode = false;

  function pct(n) {
    return D.total ? (100 * n / D.total).toFixed(2) + '%' : '0.00%';
  }

  function heat(n, max) {
    if (!n) return '';
    const a = Math.sqrt(n / (max || 1));
    return 'hsl(' + (50 - 50 * a) + ',95%,' + (92 - 40 * a) + '%)';
  }

  function fileTotal(f) {
    return Object.values(f.self).reduce((a, b) => a + b, 0);
  }

  function index() {
    const v = $('view');
    v.textContent = '';
    const t = document.createElement('table');
    t.id = 'index';
    t.innerHTML = '<tr><th>self</th><th>self %</th><th>hottest line</th>' +
                  '<th class="path">file</th></tr>';
    const order = D.files.map((f, i) => i)
        .sort((a, b) => fileTotal(D.files[b]) - fileTotal(D.files[a]));
    for (const i of order) {
      const f = D.files[i];
      const r = t.insertRow();
      r.className = 'file-row';
      r.insertCell().textContent = fileTotal(f);
      r.insertCell().textContent = pct(fileTotal(f));
      // the line with the most samples on it (total), linked, its count
      const hot = r.insertCell();
      hot.className = 'hot';
      let best = 0;
      for (const [line, n] of Object.entries(f.total))
        if (n > (f.total[best] || 0)) best = line;
      if (best) {
        const a = document.createElement('a');
        a.href = '#file=' + i + '&line=' + best;
        a.textContent = 'line ' + best;
        hot.appendChild(a);
        hot.appendChild(document.createTextNode(' (' + f.total[best] + ')'));
      }
      const c = r.insertCell();
      c.className = 'path';
      const a = document.createElement('a');
      a.href = '#file=' + i;
      a.textContent = f.path;
      c.appendChild(a);
    }
    v.appendChild(t);
    tree(v);
  }

  // The files as a tree of their directories: each directory with the
  // self samples of the files under it, hottest first at every level; a
  // directory with one subdirectory and no file of its own is shown with
  // it on one row ("/usr/lib/python3.15").
  function tree(v) {
    const root = { name: '', dirs: new Map(), files: [], self: 0 };
    D.files.forEach((f, i) => {
      const parts = f.path.split('/').filter((x) => x);
      const leaf = parts.pop() || f.path;
      let d = root;
      root.self += fileTotal(f);
      for (const p of parts) {
        // (an absolute path's first directory keeps its '/')
        const name = d === root && f.path.startsWith('/') ? '/' + p : p;
        if (!d.dirs.has(name))
          d.dirs.set(name, { name, dirs: new Map(), files: [], self: 0 });
        d = d.dirs.get(name);
        d.self += fileTotal(f);
      }
      d.files.push({ name: leaf, i, self: fileTotal(f) });
    });
    const h = document.createElement('h2');
    h.textContent = 'by directory';
    v.appendChild(h);
    const t = document.createElement('table');
    t.id = 'tree';
    t.innerHTML = '<tr><th>self</th><th>self %</th><th class="path">' +
                  'directory / file</th></tr>';
    const row = (self, depth, cls, fill) => {
      const r = t.insertRow();
      r.className = cls;
      r.dataset.self = self;
      r.dataset.depth = depth;
      r.insertCell().textContent = self;
      r.insertCell().textContent = pct(self);
      const c = r.insertCell();
      c.className = 'path';
      c.style.paddingLeft = (8 + 18 * depth) + 'px';
      fill(c);
      return r;
    };
    // (a row's data-path is its directory's whole path, which its text
    // leaves out above it: "/tmp" over "wt/tests" and "cache/lib")
    const join = (a, b) => (a ? a + '/' + b : b);
    const walk = (d, prefix, depth, base) => {
      // (a chain of lone directories on one row)
      let name = prefix + d.name;
      let full = join(base, d.name);
      while (d.dirs.size === 1 && !d.files.length) {
        d = [...d.dirs.values()][0];
        name += '/' + d.name;
        full = join(full, d.name);
      }
      if (depth >= 0) {
        const r = row(d.self, depth, 'dir-row',
                      (c) => { c.textContent = name + '/'; });
        r.dataset.path = full;
      }
      const kids = [...[...d.dirs.values()].map((x) => ['d', x]),
                    ...d.files.map((x) => ['f', x])]
          .sort((a, b) => b[1].self - a[1].self);
      for (const [kind, x] of kids) {
        if (kind === 'd') {
          walk(x, '', depth + 1, full);
        } else {
          const r = row(x.self, depth + 1, 'tree-file', (c) => {
            const a = document.createElement('a');
            a.href = '#file=' + x.i;
            a.textContent = x.name;
            c.appendChild(a);
          });
          r.dataset.path = D.files[x.i].path;
        }
      }
    };
    walk(root, '', -1, '');
    v.appendChild(t);
  }

  function show(i, line) {
    const f = D.files[i];
    const v = $('view');
    v.textContent = '';
    const h = document.createElement('h2');
    h.textContent = f.path + ' — self ' + fileTotal(f) + ' samples (' +
                    pct(fileTotal(f)) + ')';
    v.appendChild(h);
    const lines = f.source ||
        Array.from({ length: Math.max(0, ...Object.keys(f.total).map(Number)) },
                   () => '');
    if (!f.source) {
      const p = document.createElement('p');
      p.className = 'nosource';
      p.textContent = 'the source file is not on the machine that wrote ' +
                      'this page: counts only';
      v.appendChild(p);
    }
    const max = Math.max(1, ...Object.values(f[by]));
    const t = document.createElement('table');
    t.className = 'src';
    lines.forEach((text, k) => {
      const n = k + 1, self = f.self[n] || 0, total = f.total[n] || 0;
      const r = t.insertRow();
      r.id = 'L' + n;
      r.dataset.line = n;
      r.dataset.self = self;
      r.dataset.total = total;
      r.style.background = heat(by === 'self' ? self : total, max);
      r.insertCell().textContent = n;
      r.cells[0].className = 'n';
      r.insertCell().textContent = self || '';
      r.cells[1].className = 'n';
      r.insertCell().textContent = total || '';
      r.cells[2].className = 'n';
      const code = r.insertCell();
      code.className = 'code';
      code.textContent = text;
      const links = [];
      for (const [tf, tl, cnt, name] of f.calls[n] || [])
        links.push(['calls ' + name + ' (' + cnt + ')', tf, tl, 'call']);
      for (const [tf, tl, cnt] of f.callers[n] || [])
        links.push(['called from ' + D.files[tf].path.split('/').pop() +
                    ':' + tl + ' (' + cnt + ')', tf, tl, 'caller']);
      if (bytecode && f.instrs && f.instrs[n])
        code.appendChild(instrs(f.instrs[n]));
      if (links.length) {
        const d = document.createElement('div');
        d.className = 'links';
        for (const [label, tf, tl, kind] of links) {
          const a = document.createElement('a');
          a.textContent = label;
          a.className = kind;
          a.dataset.file = tf;
          a.dataset.line = tl;
          a.onclick = () => go(tf, tl);
          d.appendChild(a);
        }
        code.appendChild(d);
      }
    });
    v.appendChild(t);
    if (line) flash(line);
  }

  // A line's instructions: dis's offset (2 bytes a code unit), the name
  // the target ran it by (with the instruction it specialises when that
  // differs), self and total samples, and a bar of the total.
  function instrs(list) {
    const t = document.createElement('table');
    t.className = 'bytecode';
    t.innerHTML = '<tr><th>offset</th><th class="op">instruction</th>' +
                  '<th>self</th><th>total</th><th></th></tr>';
    const max = Math.max(1, ...list.map((x) => x[4]));
    for (const [instr, op, base, self, total] of list) {
      const r = t.insertRow();
      r.dataset.instr = instr;
      r.dataset.self = self;
      r.dataset.total = total;
      r.insertCell().textContent = 2 * instr;
      const c = r.insertCell();
      c.className = 'op';
      c.textContent = op || '?';
      if (base && base !== op) {
        const b = document.createElement('span');
        b.className = 'base';
        b.textContent = ' (' + base + ')';
        c.appendChild(b);
      }
      r.insertCell().textContent = self;
      r.insertCell().textContent = total;
      const bar = document.createElement('div');
      bar.className = 'bar';
      bar.style.width = Math.round(120 * total / max) + 'px';
      r.insertCell().appendChild(bar);
    }
    return t;
  }

  let current = -1;
  function go(file, line) {
    if (file !== current) {
      current = file;
      show(file, 0);
    }
    history.replaceState(null, '', '#file=' + file + '&line=' + line);
    flash(line);
  }

  // the highlight restarts on every click, also on the same line
  function flash(line) {
    const r = document.getElementById('L' + line);
    if (!r) return;
    r.classList.remove('flash');
    void r.offsetWidth; // (restarts the animation)
    r.classList.add('flash');
    r.scrollIntoView({ block: 'center' });
  }

  function route() {
    const m = /file=(\d+)(?:&line=(\d+))?/.exec(location.hash);
    if (m && D.files[m[1]]) {
      current = Number(m[1]);
      show(current, Number(m[2] || 0));
    } else {
      current = -1;
      index();
    }
  }

  const i = D.info;
  const modes = ['wall', 'cpu', 'gil', 'exception'];
  $('title').textContent = 'Process ' + i.pid + ': CPython ' + i.python +
                           ', ' + (modes[i.mode] || '?') + ' mode: heat map';
  $('summary').textContent = i.samples + ' samples in ' +
      (i.duration_ns / 1e9).toFixed(2) + ' s, ' + D.total + ' stacks; ' +
      D.files.length + ' files.  Columns: line, self samples (the line ' +
      'ran), total samples (a frame was on the line).';
  for (const r of document.querySelectorAll('input[name=by]'))
    r.addEventListener('change', (e) => {
      by = e.target.value;
      route();
    });
  if (D.has_instrs) {
    $('bytecode-toggle').hidden = false;
    $('bytecode').addEventListener('change', (e) => {
      bytecode = e.target.checked;
      route();
    });
  }
  $('to-index').addEventListener('click', (e) => {
    e.preventDefault();
    location.hash = '';
    route();
  });
  window.addEventListener('hashchange', route);
  route();
})();
