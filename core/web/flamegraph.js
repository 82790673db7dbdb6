// pyunwind flame graph: draws the profile embedded in the page (the
// #pyu-data JSON that core/src/out_flamegraph.c writes) with no network
// access.  Frames are merged by function; the root is at the top, callees
// below their callers ("inverted": the innermost functions at the top,
// their callers below).
//
// Click a frame: it becomes the graph's full width (zoom), and the info
// line gives its total and self samples as a share of the whole run and
// of the frame zoomed before.  Esc or the crumbs zoom out; "/" searches;
// "i" inverts; ArrowUp zooms to the parent, ArrowDown into the heaviest
// callee, ArrowLeft and ArrowRight to the neighbours.
//
// "Sandwich" (w, or a hotspot link): the callers of one function (its
// callers below it, then theirs) and its callees, over every stack it is
// in (counted once per stack, at its outermost call).
//
// A differential page ({"base": ..., "new": ...}) draws the new profile
// with each frame coloured by the change of its share of all samples from
// the baseline (red: larger, blue: smaller), and can list the baseline's
// stacks that vanished ("elided").  Frames are matched by the function
// names and files along their stack.
//
// A profile of several processes (sample --subprocesses, PID PID...):
// a table of them (pid, command, CPython, samples and share, when it was
// sampled from or ended), a process choice (the thread choice then lists
// that process's threads), and in each frame's tooltip the processes its
// samples came from.  With one process the page is as it always was.
//
// "lines" (l) splits each function's frame by the line it was on (a frame
// per function and line, labelled fn:LINE); the theme follows the
// system's dark preference unless chosen; "SVG" saves the view as drawn.
'use strict';
(function () {
  const RAW = JSON.parse(document.getElementById('pyu-data').textContent);
  const D = RAW.new || RAW;
  const B = RAW.new ? RAW.base : null;
  const $ = (id) => document.getElementById(id);
  const ROW = 18;
  const P = D.processes || [];
  const many = P.length > 1;
  const state = { process: -1, thread: -1, status: 0, inverted: false, zoom: [],
                  search: '', files: false, modules: false, selected: null,
                  elided: false, sandwich: null, lines: false };

  // a function's identity across profiles (its name and file) as a
  // number: one per distinct name and file, shared by the profile and its
  // baseline; per profile an array from function to key, made once
  const keyIds = new Map(), keyNames = [];
  function funcKeys(X) {
    if (!X.fkeys) {
      X.fkeys = X.functions.map((fn) => {
        const s = fn[0] + '\u0000' + fn[1];
        let id = keyIds.get(s);
        if (id === undefined) {
          id = keyNames.length;
          keyIds.set(s, id);
          keyNames.push(fn[0]);
        }
        return id;
      });
    }
    return X.fkeys;
  }
  function keyOf(X, f) { return funcKeys(X)[f]; }
  // a frame's key: its function's, or with "lines" its function's and
  // line's (frames of one line that ran other instructions are one)
  function frameKey(X, fr) {
    const f = X.frames[fr][0];
    if (!state.lines) return keyOf(X, f);
    if (!X.lkeys) X.lkeys = new Map();
    let id = X.lkeys.get(fr);
    if (id === undefined) {
      const fn = X.functions[f], line = X.frames[fr][1];
      const s = fn[0] + '\u0000' + fn[1] + '\u0000' + line;
      id = keyIds.get(s);
      if (id === undefined) {
        id = keyNames.length;
        keyIds.set(s, id);
        keyNames.push(line > 0 ? fn[0] + ':' + line : fn[0]);
      }
      X.lkeys.set(fr, id);
    }
    return id;
  }
  // a tree node for frame fr of X
  function nodeFor(X, fr, k, parent) {
    return { fn: X.frames[fr][0], line: state.lines ? X.frames[fr][1] : 0,
             key: k, total: 0, self: 0, kids: new Map(), parent };
  }

  // the frames (indices into X.frames) of a stack, outermost first
  function pathOf(X, node) {
    if (!X.paths) X.paths = new Map();
    let p = X.paths.get(node);
    if (p) return p;
    const out = [];
    for (let n = node, guard = 0; n !== 0 && guard < 100000; guard++) {
      out.push(X.nodes[n][1]);
      n = X.nodes[n][0];
    }
    out.reverse();
    X.paths.set(node, out);
    return out;
  }

  function pct(part, whole) {
    return whole > 0 ? (100 * part / whole).toFixed(2) + '%' : '0.00%';
  }

  function fnName(f) { return D.functions[f][0]; }
  // the module a function's file is, as an import names it: the path
  // below site-packages, dist-packages or lib/pythonX.Y, else the file's
  // name; "" for <GC> and <native>
  function fnModule(f) {
    const fn = D.functions[f];
    if (fn[3] !== 0 || !fn[1]) return '';
    let p = fn[1];
    const m = /\/(?:site-packages|dist-packages|lib\/python\d+\.\d+t?)\/(.*)$/
        .exec(p);
    p = m ? m[1] : p.split('/').pop();
    p = p.replace(/\.pyw?$/, '').replace(/\/__init__$/, '');
    return p.split('/').join('.');
  }
  // a frame's label: the function, with its file and line or its module
  // when asked for; with "lines" the line it was on (fn:LINE, or
  // fn (module:LINE))
  function label(n) {
    const line = n.line > 0 ? n.line : 0;
    const extra = state.files ? where(n)
                : state.modules ? fnModule(n.fn) + (line ? ':' + line : '')
                : '';
    if (!extra) return nodeName(n);
    return fnName(n.fn) + ' (' + extra + ')';
  }
  function nodeName(n) {
    return fnName(n.fn) + (n.line > 0 ? ':' + n.line : '');
  }
  // the file and line of a node: the function's first line, or with
  // "lines" the node's
  function where(n) {
    const fn = D.functions[n.fn];
    return fn[3] !== 0 ? '' : fn[1] + ':' + (n.line > 0 ? n.line : fn[2]);
  }

  // a stack the status choice keeps (status bits of the thread then)
  function keepStatus(st) {
    return !state.status || ((st[3] || 0) & state.status) !== 0;
  }

  // a thread's process (an index into X.processes)
  function procOf(X, th) { return X.threads[th][4] || 0; }
  function procName(pr) { return 'pid ' + P[pr][0]; }

  // the baseline's processes that stand for D's chosen one: those with
  // its command line, else the one at its place
  let baseProcs = null, baseProcsFor = -2;
  function baseKeepsProcess(th) {
    if (baseProcsFor !== state.process) {
      const cmd = P[state.process][1], bp = B.processes || [];
      baseProcs = new Set();
      bp.forEach((q, i) => { if (q[1] === cmd) baseProcs.add(i); });
      if (!baseProcs.size) baseProcs.add(state.process);
      baseProcsFor = state.process;
    }
    return baseProcs.has(procOf(B, th));
  }

  // the threads of X the process and thread choices keep: D's of that
  // process, or that one; of the baseline, the threads with the same
  // "main" flag in the processes that stand for it
  function keepThread(X, th) {
    if (state.process >= 0 &&
        !(X === D ? procOf(D, th) === state.process : baseKeepsProcess(th)))
      return false;
    if (state.thread < 0) return true;
    if (X === D) return th === state.thread;
    return X.threads[th][2] === D.threads[state.thread][2];
  }

  function build(X) {
    const root = { fn: -1, key: '', total: 0, self: 0, kids: new Map(),
                   parent: null };
    // (every process shown: each frame counts its samples by process,
    // for its tooltip)
    const byProc = X === D && many && state.process < 0;
    for (const st of X.stacks) {
      const [th, node, count] = st;
      if (!keepThread(X, th) || !keepStatus(st)) continue;
      const seq = pathOf(X, node);
      const inv = state.inverted, len = seq.length;
      const pr = byProc ? procOf(X, th) : -1;
      let n = root, leaf = null;
      root.total += count;
      for (let j = 0; j < len; j++) {
        const fr = seq[inv ? len - 1 - j : j];
        const k = frameKey(X, fr);
        let c = n.kids.get(k);
        if (!c) {
          c = nodeFor(X, fr, k, n);
          n.kids.set(k, c);
        }
        c.total += count;
        if (byProc) {
          if (!c.procs) c.procs = new Map();
          c.procs.set(pr, (c.procs.get(pr) || 0) + count);
        }
        n = c;
        if (j === 0) leaf = c;
      }
      n.self += count;
      // (--opcodes: the instruction the innermost frame ran, by name)
      const lf = len ? X.frames[X.nodes[node][1]] : null;
      if (lf && lf.length > 3) {
        const at = inv ? leaf : n;
        if (!at.ops) at.ops = new Map();
        at.ops.set(lf[3], (at.ops.get(lf[3]) || 0) + count);
      }
    }
    return root;
  }

  // the sandwich of the function with key k: [callers, callees] trees,
  // each rooted at that function
  function buildSandwich(k) {
    const mk = (fr) => nodeFor(D, fr, k, null);
    let callers = null, callees = null;
    const add = (root, seq, count) => {
      let n = root;
      root.total += count;
      for (const fr of seq) {
        const kk = frameKey(D, fr);
        let c = n.kids.get(kk);
        if (!c) {
          c = nodeFor(D, fr, kk, n);
          n.kids.set(kk, c);
        }
        c.total += count;
        n = c;
      }
      n.self += count;
    };
    for (const st of D.stacks) {
      const [th, node, count] = st;
      if (!keepThread(D, th) || !keepStatus(st)) continue;
      const seq = pathOf(D, node);
      const i = seq.findIndex((fr) => frameKey(D, fr) === k);
      if (i < 0) continue;
      if (!callers) { callers = mk(seq[i]); callees = mk(seq[i]); }
      add(callers, seq.slice(0, i).reverse(), count);
      add(callees, seq.slice(i + 1), count);
    }
    return callers ? [callers, callees] : null;
  }

  function keysOf(n) {
    const out = [];
    for (let c = n; c && c.fn >= 0; c = c.parent) out.push(c.key);
    return out.reverse();
  }

  // the baseline's node at n's place, or null
  function baseOf(n) {
    let b = baseRoot;
    for (const k of keysOf(n)) {
      b = b && b.kids.get(k);
      if (!b) return null;
    }
    return b;
  }

  // change of n's share of all samples from the baseline, in points
  function delta(n) {
    const b = baseOf(n);
    return 100 * (n.total / (all || 1) -
                  (b ? b.total : 0) / (baseRoot.total || 1));
  }

  function diffColour(d) {
    const a = Math.min(1, Math.abs(d) / 20);
    if (Math.abs(d) < 0.05) return 'hsl(0,0%,92%)';
    return d > 0 ? 'hsl(0,85%,' + (92 - 42 * a) + '%)'
                 : 'hsl(215,85%,' + (92 - 42 * a) + '%)';
  }

  function colour(f) {
    const kind = D.functions[f][3];
    if (kind === 1) return 'hsl(0,0%,70%)';
    if (kind === 2) return 'hsl(210,60%,75%)';
    if (kind === 3) return 'hsl(0,0%,45%)'; /* <unknown> */
    let h = 0;
    for (const ch of fnName(f)) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
    return 'hsl(' + (10 + h % 45) + ',' + (70 + h % 20) + '%,' +
           (58 + (h >> 8) % 14) + '%)';
  }

  function matches(n) {
    if (!state.search) return false;
    const s = state.search.toLowerCase();
    return nodeName(n).toLowerCase().includes(s) ||
           (state.files && where(n).toLowerCase().includes(s)) ||
           (state.modules && fnModule(n.fn).toLowerCase().includes(s));
  }

  let root = null, baseRoot = null, zoomNode = null, all = 0;

  function describe(n) {
    const at = where(n);
    let t = fnName(n.fn) + (at ? ' (' + at + ')' : '') + '\n' +
            'total ' + n.total + ' samples, ' + pct(n.total, all) +
            ' of all; self ' + n.self + ' samples, ' + pct(n.self, all) +
            ' of all';
    if (zoomNode && zoomNode !== root && zoomNode !== n)
      t += '; ' + pct(n.total, zoomNode.total) + ' of ' +
           nodeName(zoomNode);
    if (n.procs) {
      const ps = [...n.procs.entries()].sort((a, b) => b[1] - a[1] ||
                                                       a[0] - b[0]);
      t += '\nin ' + ps.length + ' process' + (ps.length > 1 ? 'es' : '') +
           ': ' + ps.slice(0, 4).map(([pr, c]) => procName(pr) + ' ' + c +
                                     ' (' + pct(c, n.total) + ')')
               .join(', ') +
           (ps.length > 4 ? ', and ' + (ps.length - 4) + ' more' : '');
    }
    if (n.ops)
      t += '\ninstructions (self): ' + [...n.ops.entries()]
          .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
          .map(([op, c]) => (op || '?') + ' ' + c).join(', ');
    if (B) {
      const b = baseOf(n), d = delta(n);
      t += '\nbaseline ' + pct(b ? b.total : 0, baseRoot.total) +
           ' of all, now ' + pct(n.total, all) + ': ' +
           (d >= 0 ? '+' : '') + d.toFixed(2) + ' points';
    }
    return t;
  }

  // the tree is built again only when the thread or the direction change
  // (zoom, search and labels only draw it again: fast at 100k stacks)
  let built = null, builtFor = '';

  function render() {
    const key = state.process + '/' + state.thread + '/' + state.status +
                '/' + state.inverted + '/' + state.lines;
    if (key !== builtFor) {
      built = build(D);
      if (B) baseRoot = build(B);
      builtFor = key;
    }
    root = built;
    all = root.total;
    zoomNode = root;
    for (const f of state.zoom) {
      const c = zoomNode.kids.get(f);
      if (!c) { state.zoom = []; zoomNode = root; break; }
      zoomNode = c;
    }
    const g = $('graph');
    g.textContent = '';
    const W = g.clientWidth || 1000;
    let maxDepth = 0, matched = 0, off = 0, part = '';
    const frag = document.createDocumentFragment();
    // (the samples of matches too narrow to draw count all the same)
    const unseen = (n, inMatch) => {
      const m = matches(n);
      if (m && !inMatch) matched += n.total;
      for (const c of n.kids.values()) unseen(c, inMatch || m);
    };
    const draw = (n, x, w, depth, inMatch) => {
      if (w < 0.5) {
        if (state.search) unseen(n, inMatch);
        return;
      }
      const el = document.createElement('div');
      el.className = 'frame';
      const m = matches(n);
      if (m) {
        el.classList.add('match');
        if (!inMatch) matched += n.total;
      } else if (state.search) {
        el.classList.add('dim');
      }
      if (n === state.selected) el.classList.add('selected');
      el.style.left = x + 'px';
      el.style.width = w + 'px';
      el.style.top = (off + depth) * ROW + 'px';
      if (part) el.dataset.part = part;
      if (B) {
        const d = delta(n);
        el.style.background = diffColour(d);
        el.dataset.delta = d.toFixed(2);
      } else {
        el.style.background = colour(n.fn);
      }
      if (w > 24) el.textContent = label(n);
      el.title = describe(n);
      el.dataset.fn = fnName(n.fn);
      if (n.line > 0) el.dataset.line = n.line;
      el.dataset.total = n.total;
      el.dataset.self = n.self;
      el.dataset.depth = depth;
      el._node = n;
      frag.appendChild(el);
      if (off + depth > maxDepth) maxDepth = off + depth;
      let cx = x;
      const kids = [...n.kids.values()].sort((a, b) => b.total - a.total);
      for (const c of kids) {
        const cw = w * c.total / n.total;
        draw(c, cx, cw, depth + 1, inMatch || m);
        cx += cw;
      }
    };
    const sw = state.sandwich && buildSandwich(state.sandwich);
    if (state.sandwich && !sw) state.sandwich = null;
    if (sw) {
      // callers above, callees below, each under a title row
      const title = (text, row) => {
        const t = document.createElement('div');
        t.className = 'part-title';
        t.style.top = row * ROW + 'px';
        t.textContent = text;
        frag.appendChild(t);
      };
      const name = nodeName(sw[0]);
      title('callers of ' + name + ' (its callers below it, then theirs)', 0);
      off = 1;
      part = 'callers';
      draw(sw[0], 0, W, 0, false);
      off = maxDepth + 2;
      title('callees of ' + name, off - 1);
      part = 'callees';
      draw(sw[1], 0, W, 0, false);
      part = '';
    } else if (zoomNode === root) {
      let x = 0;
      const kids = [...root.kids.values()].sort((a, b) => b.total - a.total);
      for (const c of kids) {
        const w = W * c.total / (root.total || 1);
        draw(c, x, w, 0, false);
        x += w;
      }
    } else {
      draw(zoomNode, 0, W, 0, false);
      // (matches outside the zoomed frame are not counted)
    }
    g.appendChild(frag);
    g.style.height = (maxDepth + 1) * ROW + 'px';
    elided();
    $('matched').textContent = state.search
        ? 'matched: ' + matched + ' samples, ' + pct(matched, all) : '';
    // crumbs: the way back out of a zoom
    const crumbs = $('crumbs');
    crumbs.textContent = '';
    const link = (text, depth) => {
      const a = document.createElement('a');
      a.textContent = text;
      a.onclick = () => { state.zoom = state.zoom.slice(0, depth); render(); };
      crumbs.appendChild(a);
    };
    link('all', 0);
    state.zoom.forEach((k, i) => link('› ' + keyNames[k], i + 1));
    $('info').textContent = sw
        ? 'sandwich of ' + nodeName(sw[0]) + ': in ' + sw[0].total +
          ' samples, ' + pct(sw[0].total, all) + ' of all (Esc: back)'
        : state.selected && state.selected.fn >= 0
        ? describe(state.selected) + '  (w: its callers and callees)'
        : 'total ' + all + ' samples' +
          (state.thread >= 0 ? ' in this thread'
           : state.process >= 0 ? ' in process ' + P[state.process][0]
           : '') +
          (state.inverted ? ' (inverted: innermost functions first)' : '');
  }

  // the baseline's stacks with no counterpart now: the outermost vanished
  // frame of each, with its baseline share
  function elided() {
    const list = $('elided-list');
    list.hidden = !(B && state.elided);
    if (list.hidden) return;
    list.textContent = '';
    const rows = [];
    const walk = (b, n, names) => {
      for (const [k, c] of b.kids) {
        const m = n && n.kids.get(k);
        const here = names.concat(B.functions[c.fn][0] +
                                  (c.line > 0 ? ':' + c.line : ''));
        if (!m) rows.push([here, c.total]);
        else walk(c, m, here);
      }
    };
    walk(baseRoot, root, []);
    rows.sort((a, b) => b[1] - a[1]);
    const h = document.createElement('div');
    h.textContent = rows.length + ' stacks of the baseline vanished:';
    list.appendChild(h);
    for (const [names, total] of rows) {
      const r = document.createElement('div');
      r.className = 'elided-row';
      r.dataset.path = names.join(' › ');
      r.dataset.share = (100 * total / (baseRoot.total || 1)).toFixed(2);
      r.textContent = r.dataset.path + ' — baseline ' + total +
                      ' samples, ' + pct(total, baseRoot.total) + ' of all';
      r.style.background = diffColour(-100 * total / (baseRoot.total || 1));
      list.appendChild(r);
    }
  }

  function zoomTo(n) {
    state.zoom = keysOf(n);
    state.selected = n;
    render();
    // the selection's node after the rebuild
    let z = root;
    for (const f of state.zoom) z = z && z.kids.get(f);
    state.selected = z || null;
    $('info').textContent = z ? describe(z) : '';
    for (const el of $('graph').children)
      el.classList.toggle('selected', el._node === z);
  }

  // the view as drawn, as an SVG document: the title and the info line
  // above the frames, each frame a box clipped to its width with its
  // label and its tooltip, in the page's colours
  function svgOfView() {
    const esc = (t) => t.replace(/[&<>"]/g, (c) => ({ '&': '&amp;',
      '<': '&lt;', '>': '&gt;', '"': '&quot;' }[c]));
    const g = $('graph'), W = g.clientWidth, TOP = 36;
    const H = g.clientHeight + TOP;
    const css = getComputedStyle(document.body);
    const out = ['<svg xmlns="http://www.w3.org/2000/svg" width="' + W +
                 '" height="' + H + '" viewBox="0 0 ' + W + ' ' + H +
                 '" font-family="monospace" font-size="11">',
                 '<rect width="100%" height="100%" fill="' +
                 css.backgroundColor + '"/>',
                 '<text x="2" y="13" font-size="13" fill="' + css.color +
                 '">' + esc($('title').textContent) + '</text>',
                 '<text x="2" y="29" fill="' + css.color + '">' +
                 esc($('info').textContent.split('\n')[0]) + '</text>'];
    for (const el of g.children) {
      const x = parseFloat(el.style.left) || 0;
      const y = (parseFloat(el.style.top) || 0) + TOP;
      if (el.classList.contains('part-title')) {
        out.push('<text x="' + x + '" y="' + (y + 13) +
                 '" font-weight="bold" fill="' + css.color + '">' +
                 esc(el.textContent) + '</text>');
        continue;
      }
      const w = parseFloat(el.style.width) || 0;
      const fill = el.classList.contains('match')
          ? '#e040fb' : el.style.backgroundColor;
      out.push('<svg x="' + x.toFixed(2) + '" y="' + y + '" width="' +
               w.toFixed(2) + '" height="' + (ROW - 1) + '"' +
               (el.classList.contains('dim') ? ' opacity="0.35"' : '') +
               '><title>' + esc(el.title) + '</title>' +
               '<rect width="100%" height="100%" rx="2" fill="' + fill +
               '" stroke="' + css.backgroundColor + '"/>' +
               (el.textContent ? '<text x="3" y="12">' +
                                 esc(el.textContent) + '</text>' : '') +
               '</svg>');
    }
    out.push('</svg>');
    return out.join('\n') + '\n';
  }

  // samples (stacks counted) per thread of D, and per process
  const threadCounts = D.threads.map(() => 0);
  for (const st of D.stacks) threadCounts[st[0]] += st[2];
  const procCounts = P.map(() => 0);
  D.threads.forEach((t, n) => {
    if (procOf(D, n) < procCounts.length)
      procCounts[procOf(D, n)] += threadCounts[n];
  });

  // hotspots: the functions with the most self samples (of the chosen
  // process); each link shows its sandwich
  function hotspots() {
    const self = new Map();
    let total = 0;
    for (const [th, node, count] of D.stacks) {
      if (state.process >= 0 && procOf(D, th) !== state.process) continue;
      total += count;
      const p = pathOf(D, node);
      if (!p.length) continue;
      const fr = p[p.length - 1], k = frameKey(D, fr);
      self.set(k, (self.get(k) || [nodeFor(D, fr, k, null), 0]));
      self.get(k)[1] += count;
    }
    const hot = [...self.entries()].sort((a, b) => b[1][1] - a[1][1])
        .slice(0, 8);
    const hs = $('hotspots');
    hs.textContent = 'hotspots (self' +
        (state.process >= 0 ? ', process ' + P[state.process][0] : '') +
        '): ';
    for (const [k, [nd, n]] of hot) {
      const a = document.createElement('a');
      a.className = 'hotspot';
      a.dataset.fn = fnName(nd.fn);
      a.dataset.self = n;
      a.textContent = nodeName(nd) + ' ' + pct(n, total);
      a.onclick = () => {
        state.sandwich = k;
        state.zoom = [];
        render();
      };
      hs.appendChild(a);
    }
  }

  // seconds since the run's start, as the table gives them
  const secsAt = (ns) => (ns / 1e9).toFixed(2) + ' s';
  // when a process was sampled, unless for the whole run (one found in
  // the run's first 5 ms, 0.00 s here, counts as sampled from the start)
  function when(q) {
    const parts = [];
    if (q[4] >= 5e6) parts.push('from ' + secsAt(q[4]));
    if (q[6]) parts.push('ended at ' + secsAt(q[5]));
    return parts.length ? parts.join(', ') : 'whole run';
  }

  // the processes' table (several processes only): a row each, the
  // samples of its threads and their share of all; a row chooses its
  // process
  function processTable() {
    const box = $('processes');
    box.hidden = false;
    const all = procCounts.reduce((a, c) => a + c, 0);
    const table = document.createElement('table');
    const row = (cells, head) => {
      const tr = document.createElement('tr');
      for (const [text, cls, title] of cells) {
        const td = document.createElement(head ? 'th' : 'td');
        td.textContent = text;
        if (cls) td.className = cls;
        if (title) td.title = title;
        tr.appendChild(td);
      }
      table.appendChild(tr);
      return tr;
    };
    row([['pid'], ['command'], ['CPython'], ['threads', 'num'],
         ['samples', 'num', 'the stacks recorded of its threads (as in ' +
          'the thread choice: a sample of 4 threads counts 4)'],
         ['share', 'num', 'of every process\'s samples'],
         ['sampled', '', 'when it was sampled, when not from the start ' +
          'of the run to its end']], true);
    P.forEach((q, pr) => {
      const nthreads = D.threads.filter((t, n) => procOf(D, n) === pr)
          .length;
      const tr = row([[String(q[0]), 'num'],
                      [q[1] || '?', 'command', q[1]],
                      [(q[2] || '?') + (q[3] ? ' (free-threaded)' : '')],
                      [String(nthreads), 'num'],
                      [String(procCounts[pr]), 'num'],
                      [pct(procCounts[pr], all), 'num'],
                      [when(q), '', q[6] ? 'it exited, or ran another ' +
                       'program, at ' + secsAt(q[5]) + ' of the run' : '']]);
      tr.className = 'process-row';
      tr.dataset.index = pr;
      tr.dataset.pid = q[0];
      tr.dataset.samples = procCounts[pr];
      tr.onclick = () => {
        const sel = $('process');
        sel.value = String(state.process === pr ? -1 : pr);
        sel.dispatchEvent(new Event('change'));
      };
    });
    const tr = row([['all', 'num'], [P.length + ' processes'], [''], [''],
                    [String(all), 'num'], [pct(all, all), 'num'], ['']]);
    tr.className = 'process-total';
    tr.dataset.samples = all;
    box.textContent = '';
    box.appendChild(table);
  }

  // marks the chosen process's row
  function markProcess() {
    for (const tr of document.querySelectorAll('.process-row'))
      tr.classList.toggle('chosen', Number(tr.dataset.index) === state.process);
  }

  // the thread choice: the threads of the chosen process (of every one:
  // each with its pid when there are several)
  function threadChoice() {
    const sel = $('thread');
    sel.textContent = '';
    const opt = (v, t) => {
      const o = document.createElement('option');
      o.value = v;
      o.textContent = t;
      sel.appendChild(o);
    };
    opt(-1, 'all threads');
    D.threads.forEach((t, n) => {
      if (state.process >= 0 && procOf(D, n) !== state.process) return;
      opt(n, (many && state.process < 0 ? procName(procOf(D, n)) + ': ' : '') +
             t[3] + ' — ' + threadCounts[n] + ' samples');
    });
    sel.value = '-1';
  }

  function summary() {
    const i = D.info, secs = i.duration_ns / 1e9;
    const ticks = i.samples + i.missed;
    const modes = ['wall', 'cpu', 'gil', 'exception'];
    const versions = [...new Set(P.map((q) => q[2]).filter((v) => v))];
    const nb = B && B.processes ? B.processes.length : 0;
    $('title').textContent =
        (many ? P.length + ' processes: CPython ' +
                (versions.join(', ') || '?')
              : 'Process ' + i.pid + ': CPython ' + i.python) +
        ', ' + (modes[i.mode] || '?') + ' mode' +
        (B ? ' — compared with ' + (nb > 1 ? nb + ' processes'
                                             : 'process ' + B.info.pid) +
             ' (red: a larger share of all samples ' +
             'than in the baseline, blue: smaller)'
           : '');
    if (B) $('elided-box').hidden = false;
    hotspots();
    $('summary').innerHTML = '';
    // (of several processes: each tick samples every process then, and
    // the profile does not keep how many ticks there were: the missed
    // ticks without a share, and no efficiency)
    const parts = many ? [
      ['samples (every process)', i.samples],
      ['duration', secs.toFixed(2) + ' s'],
      ['rate', (secs > 0 ? (i.samples / secs).toFixed(1) : '0') + '/s'],
      ['failed', i.failed + ' (' + pct(i.failed, i.samples) + ')'],
      ['missed ticks', i.missed],
      ['stacks', D.stacks.reduce((a, s) => a + s[2], 0)],
    ] : [
      ['samples', i.samples], ['duration', secs.toFixed(2) + ' s'],
      ['rate', (secs > 0 ? (i.samples / secs).toFixed(1) : '0') + '/s'],
      ['failed', i.failed + ' (' + pct(i.failed, i.samples) + ')'],
      ['missed', i.missed + ' (' + pct(i.missed, ticks) + ')'],
      ['sampling efficiency', pct(i.samples - i.failed, ticks)],
      ['stacks', D.stacks.reduce((a, s) => a + s[2], 0)],
    ];
    // the threads' status over the stacks: the GIL held, waited for, the
    // garbage collector, an exception being handled
    const stacks = D.stacks.reduce((a, s) => a + s[2], 0);
    const share = (bit) => pct(D.stacks.reduce(
        (a, s) => a + (((s[3] || 0) & bit) ? s[2] : 0), 0), stacks);
    parts.push(['GIL held', share(1)], ['GIL waited for', share(2)],
               ['GC', share(8)], ['exception', share(16)]);
    parts.forEach(([k, v], n) => {
      if (n) $('summary').appendChild(document.createTextNode(' · '));
      $('summary').appendChild(document.createTextNode(k + ' '));
      const b = document.createElement('b');
      b.textContent = v;
      $('summary').appendChild(b);
    });
    if (many) {
      processTable();
      $('process-box').hidden = false;
      const sel = $('process');
      const opt = (v, t) => {
        const o = document.createElement('option');
        o.value = v;
        o.textContent = t;
        sel.appendChild(o);
      };
      opt(-1, 'all processes — ' + stacks + ' samples');
      P.forEach((q, pr) => {
        const cmd = q[1].length > 60 ? q[1].slice(0, 59) + '…' : q[1];
        opt(pr, procName(pr) + (cmd ? ' ' + cmd : '') + ' — ' +
                procCounts[pr] + ' samples');
      });
    }
    threadChoice();
  }

  $('graph').addEventListener('click', (e) => {
    const el = e.target.closest('.frame');
    if (!el || !el._node) return;
    if (state.sandwich) { // (a sandwich is not zoomed into)
      $('info').textContent = describe(el._node);
      return;
    }
    zoomTo(el._node);
  });
  $('process').addEventListener('change', (e) => {
    state.process = Number(e.target.value);
    state.thread = -1;
    state.zoom = [];
    state.selected = null;
    state.sandwich = null;
    threadChoice();
    markProcess();
    hotspots();
    render();
  });
  $('thread').addEventListener('change', (e) => {
    state.thread = Number(e.target.value);
    state.zoom = [];
    state.selected = null;
    render();
  });
  let typing = 0;
  $('status').addEventListener('change', (e) => {
    state.status = Number(e.target.value);
    state.zoom = [];
    state.selected = null;
    render();
  });
  $('search').addEventListener('input', (e) => {
    // (drawn once typing pauses, not at every key)
    clearTimeout(typing);
    typing = setTimeout(() => {
      state.search = e.target.value.trim();
      render();
    }, 120);
  });
  $('inverted').addEventListener('change', (e) => {
    state.inverted = e.target.checked;
    state.zoom = [];
    state.selected = null;
    render();
  });
  $('elided').addEventListener('change', (e) => {
    state.elided = e.target.checked;
    render();
  });
  $('files').addEventListener('change', (e) => {
    state.files = e.target.checked;
    render();
  });
  $('modules').addEventListener('change', (e) => {
    state.modules = e.target.checked;
    render();
  });
  $('lines').addEventListener('change', (e) => {
    state.lines = e.target.checked;
    state.zoom = [];
    state.selected = null;
    state.sandwich = null;
    hotspots();
    render();
  });
  // (no choice: the system's preference, through the style sheet)
  $('theme').addEventListener('change', (e) => {
    if (e.target.value) document.documentElement.dataset.theme = e.target.value;
    else delete document.documentElement.dataset.theme;
  });
  $('svg').addEventListener('click', () => {
    const a = $('svg-link');
    if (a.href) URL.revokeObjectURL(a.href);
    a.href = URL.createObjectURL(new Blob([svgOfView()],
                                          { type: 'image/svg+xml' }));
    a.click();
  });
  document.addEventListener('keydown', (e) => {
    if (e.target.tagName === 'INPUT' && e.key !== 'Escape') return;
    if (e.key === '/') {
      e.preventDefault();
      $('search').focus();
    } else if (e.key === 'w' && state.selected && state.selected.fn >= 0) {
      state.sandwich = state.sandwich ? null : state.selected.key;
      render();
    } else if (e.key === 'Escape') {
      state.zoom = [];
      state.selected = null;
      state.sandwich = null;
      $('search').blur();
      render();
    } else if (e.key === 'i' || e.key === 'l') {
      const box = $(e.key === 'i' ? 'inverted' : 'lines');
      box.checked = !box.checked;
      box.dispatchEvent(new Event('change'));
    } else if (e.key === 'ArrowUp' && state.zoom.length) {
      state.zoom = state.zoom.slice(0, -1);
      state.selected = null;
      render();
    } else if (e.key === 'ArrowDown' && !state.sandwich && zoomNode) {
      // into the zoomed frame's heaviest callee
      const kids = [...zoomNode.kids.values()];
      if (kids.length) {
        e.preventDefault();
        zoomTo(kids.reduce((a, b) => (b.total > a.total ? b : a)));
      }
    } else if ((e.key === 'ArrowLeft' || e.key === 'ArrowRight') &&
               !state.sandwich && zoomNode && zoomNode.parent) {
      // to the zoomed frame's neighbour, in the order they are drawn
      const sibs = [...zoomNode.parent.kids.values()]
          .sort((a, b) => b.total - a.total);
      const at = sibs.indexOf(zoomNode) +
                 (e.key === 'ArrowRight' ? 1 : -1);
      if (at >= 0 && at < sibs.length) zoomTo(sibs[at]);
    }
  });
  window.addEventListener('resize', render);
  summary();
  render();
})();
