"""The profile formats, each read by its real consumer: pprof by `go tool
pprof` (Debian's golang-go, installed by scripts/setup --asan).  The
numbers the consumer prints must be the profile's: the stacks the sampler
says it recorded, and the split the target measures by its own clock
(tests/targets/split.py: three() 3 ms, one() 1 ms)."""

import collections
import json
import os
import random
import re
import shutil
import subprocess
import time

import pytest

from conftest import (DEADLINE, PYUNWIND, ROOT, RUNNING, TIMEOUT, OnPty,
                      Target, interpreters, labelled, longer, pyunwind,
                      samples_for, until_shown, wait_until)
from test_sample import (SOME, assert_split, collapsed, count, enough, sample,
                         split_target, state_of)

PYTHONS = interpreters()
GO = shutil.which("go")
# what a viewer is given is the same profile structure on every version:
# the viewers' tests run on the oldest and the newest (the writers on
# SOME, test_every_format_from_a_capture)
# (the versions that do not give the kernel their threads' names)
NO_NAMES = ("3.9", "3.10", "3.11", "3.12", "3.13")
ENDS = [p for p in SOME if p[0].startswith(("3.11", "3.15"))] or SOME[:1]


def go_pprof(*args):
    if not GO:
        pytest.fail("go is not installed (scripts/setup --asan installs "
                    "golang-go)")
    env = dict(os.environ)
    env.setdefault("HOME", "/root")
    r = subprocess.run([GO, "tool", "pprof", *args], capture_output=True,
                       text=True, timeout=TIMEOUT, env=env)
    assert r.returncode == 0, r.stderr
    return r.stdout


def pprof_raw(path, labels=False):
    """go tool pprof -raw (path: a file, or a URL it fetches): (sample
    types, period, [(values, thread label, [function names, innermost
    first])]); with labels, each sample's whole label text in place of
    its thread label."""
    # (a URL: go tool pprof's own deadline for the fetch is 1.5 times the
    # profile's seconds, which a loaded machine or the ASan build can
    # miss by a second; the deadline is go_pprof's)
    fetch = ["-timeout", str(TIMEOUT - 20)] if "://" in path else []
    text = go_pprof("-raw", *fetch, path)
    types = period = None
    samples, locations = [], {}
    part = None
    for line in text.splitlines():
        if line.startswith(("Samples:", "Locations", "Mappings")):
            part = line.rstrip(":")
            continue
        if line.startswith("Period:"):
            period = int(line.split()[1])
        if part == "Samples":
            m = re.match(r"^\s+(\d+(?:\s+\d+)*):((?: \d+)*)\s*$", line)
            if m:
                samples.append([[int(v) for v in m.group(1).split()], None,
                                [int(i) for i in m.group(2).split()]])
            elif labels and samples and line.strip():
                samples[-1][1] = (samples[-1][1] or "") + line.strip() + " "
            elif re.search(r"(?:^|\s)thread:\[([^\]]*)\]", line):
                # (string labels share a line: "status:[has_gil]
                # thread:[tid:N]")
                samples[-1][1] = re.search(r"(?:^|\s)thread:\[([^\]]*)\]",
                                           line).group(1)
            elif line.strip() and types is None:
                types = line.split()
        elif part == "Locations":
            m = re.match(r"^\s+(\d+): 0x[0-9a-f]+ M=\d+ (\S+) (\S+):(\d+)",
                         line)
            if m:
                locations[int(m.group(1))] = (m.group(2), m.group(3),
                                              int(m.group(4)))
    return types, period, [(v, th, [locations[i][0] for i in ids])
                           for v, th, ids in samples]


@pytest.mark.parametrize("label,python", SOME, ids=[p[0] for p in SOME])
def test_pprof_read_by_go_tool_pprof(label, python, workdir):
    """go tool pprof reads the profile: its sample count is the stacks the
    sampler recorded, the time values are the count times the period, the
    main thread shows the target's split and the sleeper sleeps."""
    t = split_target(python, workdir)
    out = os.path.join(workdir, "profile.pb.gz")
    roles = t.truth["roles"]

    def attempt(k):  # (longer runs until the split can be judged)
        r = sample(t.pid, "-d", longer("1.5", k), "--verbose", "--format",
                   "pprof", "-o", out)
        stacks = int(re.search(r"(\d+) stacks", r.stderr).group(1))
        types, period, samples = pprof_raw(out)
        assert types == ["samples/count", "wall/nanoseconds"], types
        assert period == 1000000  # 1000 Hz
        assert sum(v[0] for v, _, _ in samples) == stacks
        assert all(v[1] == v[0] * period for v, _, _ in samples)
        by_thread = collections.defaultdict(list)
        for v, th, funcs in samples:
            # collapsed-style (frames outermost first,
            # "file:function:line"), for assert_split
            by_thread[th].append(([":%s:" % f for f in reversed(funcs)],
                                  v[0]))
        main = by_thread["tid:%d" % roles["main"]]
        return enough(main, 0.1) and (stacks, by_thread)
    try:
        stacks, by_thread = until_shown(attempt)
    finally:
        t.close()
    assert set(by_thread) == {"tid:%d" % roles["main"],
                              "tid:%d" % roles["sleeper"]}, set(by_thread)
    assert_split(by_thread["tid:%d" % roles["main"]], tolerance=0.1)
    sleeper = by_thread["tid:%d" % roles["sleeper"]]
    assert all(f[-1] == ":sleeper:" for f, _ in sleeper), sleeper
    # the text report agrees: its total, and <module> under its own name
    top = go_pprof("-top", "-sample_index=samples", out)
    assert "Total samples = %d" % stacks in top, top
    assert re.search(r"\s<module>$", top, re.M), top
    # the status label: the main thread holds the GIL, the sleeper never
    gil = go_pprof("-top", "-sample_index=samples", "-tagfocus",
                   "status=has_gil", out)
    main_samples = sum(n for _, n in by_thread["tid:%d" % roles["main"]])
    assert abs(int(re.search(r"Showing nodes accounting for (\d+)",
                             gil).group(1)) - main_samples) <= \
        main_samples * 0.02, gil
    # the thread_name label: the name the target gave the sleeper, which
    # CPython 3.14+ passes to the kernel (3.13 and before do not)
    if not label.startswith(NO_NAMES):
        named = go_pprof("-top", "-sample_index=samples", "-tagfocus",
                         "thread_name=sleeper", out)
        assert int(re.search(r"Showing nodes accounting for (\d+)",
                             named).group(1)) == sum(n for _, n in sleeper), \
            named


@pytest.mark.parametrize("fmt,what", [("pprof", "binary"),
                                      ("flamegraph", "an HTML page"),
                                      ("heatmap", "an HTML page")])
def test_pprof_is_not_written_to_a_terminal(fmt, what, workdir):
    """Binary output, and an HTML page, on a terminal is refused in one
    line (a pipe or -o takes it)."""
    import pty
    pid, fd = pty.fork()
    if pid == 0:
        from conftest import PYUNWIND
        os.execv(PYUNWIND, [PYUNWIND, "sample", "--format", fmt, "1"])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 2, out
    text = out.decode()
    assert "--format %s is %s: write it to a file with -o FILE" % (
        fmt, what) in text and len(text.strip().splitlines()) == 1, text


def test_format_from_the_output_name(workdir):
    """-o FILE without --format: the format its name ends in, and one line
    saying which file was written and how to open it; --format that the
    name says otherwise is kept, with a warning (an HTML name takes
    either HTML format, a .json name any JSON one); a name that names no
    format keeps the default, top."""
    python = labelled(PYTHONS, "3.15.2-debian")
    t = split_target(python, workdir)
    try:
        def run(name, *args, cmd="sample"):
            path = os.path.join(workdir, name)
            extra = ["-d", "0.3", str(t.pid)] if cmd == "sample" else \
                [os.path.join(workdir, "p.raw")]
            r = pyunwind(cmd, "-o", path, *args, *extra)
            assert r.returncode == 0, r.stderr
            # (the count line, and the line on missed ticks that a busy
            # machine brings, are not this test's)
            lines = [line for line in r.stderr.splitlines()
                     if not re.match(r"pyunwind: (\d+ samples in|why ticks "
                                     r"were missed )", line)]
            return path, lines

        path, lines = run("p.pprof")
        assert lines == ["pyunwind: wrote %s (pprof: go tool pprof -http=: "
                         "%s)" % (path, path)], lines
        assert pprof_raw(path)[2], path  # (go tool pprof reads it)
        path, lines = run("p.pb.gz")
        assert pprof_raw(path)[2], path
        path, lines = run("p.speedscope.json")
        assert json.load(open(path))["$schema"].startswith(
            "https://www.speedscope.app/"), path
        assert lines[0].startswith("pyunwind: wrote %s (speedscope: "
                                   % path), lines
        path, lines = run("p.gecko.json")
        assert "meta" in json.load(open(path)) and "threads" in \
            json.load(open(path)), path
        path, lines = run("p.json")
        assert "samples" in json.load(open(path)), path
        for name in ("p.collapsed", "p.folded"):
            path, lines = run(name)
            assert collapsed(open(path).read()), path
        path, lines = run("p.raw")
        assert lines == ["pyunwind: wrote %s (raw: pyunwind report %s, in "
                         "any format)" % (path, path)], lines
        path, lines = run("r.html", cmd="report")
        assert open(path).read().startswith("<!DOCTYPE html>"), path
        assert lines == ["pyunwind: wrote %s (flamegraph: an HTML page: "
                         "open it in a web browser)" % path], lines
        path, lines = run("p.html", "--format", "heatmap")
        assert lines[-1].endswith("(heatmap: an HTML page: open it in a "
                                  "web browser)") and len(lines) == 1, lines
        path, lines = run("p.html", "--format", "json")
        assert lines[0] == "pyunwind: warning: %s is written as --format "\
            "json, though its name ends in .html (--format flamegraph)" % \
            path, lines
        assert "samples" in json.load(open(path)), path
        path, lines = run("p.profile")
        assert lines == ["pyunwind: wrote %s (top)" % path], lines
        assert "self%" in open(path).read()
        # (not a file to open: no word of it)
        r = pyunwind("report", "-o", "/dev/null",
                     os.path.join(workdir, "p.raw"))
        assert r.returncode == 0 and r.stderr == "", r.stderr
    finally:
        t.close()


@pytest.mark.debugger
def test_pprof_from_the_debuggers(workdir):
    """gdb's Profile.write(path, 'pprof') and lldb's py-sample --format
    pprof: go tool pprof reads them, their totals are the profile's (gdb:
    the same Profile's data()), and the split is the target's."""
    from debuggers import LLDB, LLDB_PLUGIN, Gdb, Lldb
    python = labelled(PYTHONS, "3.15.2-debian")
    t = split_target(python, workdir)
    gdb_out = os.path.join(workdir, "gdb.pb.gz")
    lldb_out = os.path.join(workdir, "lldb.pb.gz")

    def main_of(path):
        _, _, samples = pprof_raw(path)
        return [([":%s:" % f for f in reversed(funcs)], v[0])
                for v, th, funcs in samples
                if th == "tid:%d" % t.truth["roles"]["main"]]

    # (each window longer again until it has the samples the split is
    # judged on)
    def gdb_window(k):
        tr = Gdb().run(["python p = pyunwind_gdb.sample(duration=%s)"
                        % longer("1", k),
                        "python p.write(%r, 'pprof')" % gdb_out,
                        "python print('total', p.data()['total'])",
                        "detach"], ["-p", str(t.pid)])
        m = re.search(r"^total (\d+)$", tr.text, re.M)
        assert m, tr.text[-2000:]
        total = int(m.group(1))
        assert "Total samples = %d" % total in go_pprof(
            "-top", "-sample_index=samples", gdb_out)
        return total > 1000 and enough(main_of(gdb_out), 0.1)

    def lldb_window(k):
        setup, args, teardown = lldb.attach(t.pid)
        tr = lldb.run(["py-sample -d %s --verbose --format pprof -o %s"
                       % (longer("1", k), lldb_out), *teardown], args,
                      setup=setup)
        m = re.search(r"(\d+) stacks", tr.text)
        assert m, tr.text[-2000:]
        assert "Total samples = %s" % m.group(1) in go_pprof(
            "-top", "-sample_index=samples", lldb_out)
        return enough(main_of(lldb_out), 0.1)
    try:
        until_shown(gdb_window)
        assert LLDB and os.path.exists(LLDB_PLUGIN), "lldb plugin not built"
        lldb = Lldb()
        until_shown(lldb_window)
        for path in (gdb_out, lldb_out):
            assert_split(main_of(path), tolerance=0.1)
    finally:
        t.close()


# ---------------------------------------------------------------- speedscope

WEB = os.path.join(ROOT, "tests", "web")
ARTIFACTS = os.environ.get("PYUNWIND_ARTIFACTS",
                           os.path.join(ROOT, "build", "test-artifacts"))


def node_modules():
    d = subprocess.run([os.path.join(ROOT, "scripts", "get-web-tools"),
                        "--dir"], capture_output=True, text=True).stdout
    d = os.path.join(d.strip(), "node_modules")
    if not (os.path.isdir(os.path.join(d, "speedscope")) and
            os.path.isdir(os.path.join(d, "puppeteer-core")) and
            shutil.which("chromium")):
        pytest.fail("speedscope, puppeteer-core or chromium is missing "
                    "(scripts/setup --asan and scripts/get-web-tools "
                    "install them)")
    return d


def web_harness(script, page, artifact, *args):
    """Runs tests/web/SCRIPT (over tests/web/browser.mjs) on the page or
    file `page`, its screenshots named after ARTIFACTS/artifact; returns
    the JSON object it prints."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    r = subprocess.run(["node", os.path.join(WEB, script), node_modules(),
                        page, os.path.join(ARTIFACTS, artifact), *args],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def speedscope_app(profile, name):
    """speedscope's own app in headless chromium (tests/web/speedscope.mjs):
    (page title, console errors, [Sandwich view rows per profile: {name:
    (total ns, self ns)}], [profile names])."""
    out = web_harness("speedscope.mjs", profile, name)
    # (times with their unit; unitless weights, as imported from the
    # collapsed format, as "1,000")
    units = {"ns": 1, "µs": 1e3, "ms": 1e6, "s": 1e9, "": 1}
    row = re.compile(r"^([\d.,]+)(ns|µs|ms|s|) \([^)]*\)\n\t([\d.,]+)"
                     r"(ns|µs|ms|s|) \([^)]*\)\n\t(.*)$", re.M)
    views, names = [], []
    for p in out["profiles"]:
        # the toolbar's second line: the profile's name, then "(i/n)"
        # when there are several
        name = p["text"].splitlines()[1]
        names.append(re.sub(r" \(\d+/\d+\)$", "", name))
        views.append({m.group(5): (
            float(m.group(1).replace(",", "")) * units[m.group(2)],
            float(m.group(3).replace(",", "")) * units[m.group(4)])
            for m in row.finditer(p["text"])})
    return out.get("title"), out["errors"], views, names


def function_times(data, native_id):
    """{function name: (total, self)} in samples, for one thread of a
    profile's data() (json): total counts a function once per stack."""
    funcs = data["functions"]
    frames = data["frames"]
    th = [i for i, t in enumerate(data["threads"])
          if t["native_thread_id"] == native_id][0]
    out = collections.defaultdict(lambda: [0, 0])
    for st in data["stacks"]:
        if st["thread"] != th:
            continue
        names = [funcs[frames[f]["function"]]["name"] for f in st["frames"]]
        for n in set(names):
            out[n][0] += st["count"]
        out[names[-1]][1] += st["count"]
    return out


@pytest.mark.debugger
def test_speedscope_opened_by_speedscope(workdir):
    """A profile written as speedscope and as json from one gdb Profile:
    speedscope's own app (headless chromium) opens it without an error,
    one profile per thread (the main thread first, the sleeper by the name
    the target gave it), and its Sandwich view
    gives every function the total and self time the profile has (count x
    1 ms, to the app's two decimals); the main thread's split is the
    target's."""
    from debuggers import Gdb
    python = labelled(PYTHONS, "3.15.2-debian")
    t = split_target(python, workdir)
    ss = os.path.join(workdir, "profile.speedscope.json")
    js = os.path.join(workdir, "profile.json")

    def window(k):  # (longer until the split can be judged)
        if os.path.exists(js):
            os.unlink(js)
        tr = Gdb().run(["python p = pyunwind_gdb.sample(duration=%s)"
                        % longer("1.5", k),
                        "python p.write(%r, 'speedscope')" % ss,
                        "python p.write(%r, 'json')" % js,
                        "detach"], ["-p", str(t.pid)])
        assert os.path.exists(js), tr.text[-2000:]
        with open(js) as f:
            data = json.load(f)
        times = function_times(data, t.truth["roles"]["main"])
        n = times["three"][0] + times["one"][0]
        return n >= samples_for(0.1) and data
    try:
        data = until_shown(window)
    finally:
        t.close()
    title, errors, views, names = speedscope_app(ss, "speedscope")
    assert errors == [], errors
    assert title.startswith("pyunwind: PID %d, CPython 3.15" % t.pid), title
    roles = t.truth["roles"]
    # (CPython 3.14+ gives a thread the kernel name of its
    # threading.Thread: the split target names its sleeper "sleeper")
    assert names == ["Thread %d (main thread)" % roles["main"],
                     "Thread %d (sleeper)" % roles["sleeper"]], names
    period = data["interval_ns"]
    for view, tid in zip(views, (roles["main"], roles["sleeper"])):
        want = function_times(data, tid)
        assert set(view) == set(want), (set(view), set(want))
        for name, (total, self_) in want.items():
            for shown, count in zip(view[name], (total, self_)):
                # the app rounds to two decimals of its unit
                assert abs(shown - count * period) <= \
                    max(0.006 * count * period, 0.01 * 1e6), \
                    (name, shown, count)
    main = views[0]
    share = main["three"][0] / (main["three"][0] + main["one"][0])
    assert abs(share - 0.75) < 0.1, main


@pytest.mark.parametrize("label,python", ENDS, ids=[p[0] for p in ENDS])
def test_speedscope_from_the_cli(label, python, workdir):
    """pyunwind sample --format speedscope, opened by speedscope's app:
    no error, the sampler's stacks in all, the main thread's split."""
    t = split_target(python, workdir)
    out = os.path.join(workdir, "profile.speedscope.json")

    # (longer runs until the split can be judged: the main thread has
    # half the stacks, nearly all of them in three() or one())
    def attempt(k):
        r = sample(t.pid, "-d", longer("2", k), "--verbose", "--format",
                   "speedscope", "-o", out)
        stacks = int(re.search(r"(\d+) stacks", r.stderr).group(1))
        return stacks >= 2.2 * samples_for(0.1) and stacks
    try:
        stacks = until_shown(attempt)
    finally:
        t.close()
    title, errors, views, names = speedscope_app(out, "speedscope-" + label)
    assert errors == [], errors
    roles = t.truth["roles"]
    assert names[0] == "Thread %d (main thread)" % roles["main"], names
    # every stack has <module> or Thread._bootstrap outermost: their
    # totals over the threads are all the stacks, 1 ms each
    outer = sum(v.get("<module>", (0, 0))[0] +
                v.get("Thread._bootstrap", (0, 0))[0] for v in views)
    assert abs(outer - stacks * 1e6) <= 0.006 * stacks * 1e6, (outer,
                                                               stacks)
    main = views[0]
    share = main["three"][0] / (main["three"][0] + main["one"][0])
    assert abs(share - 0.75) < 0.1, main


# ------------------------------------------------------------ raw / report

def report(*args, ok=True):
    r = pyunwind("report", *args)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def capture(python, workdir, seconds="2", tolerance=0.1):
    """A capture of the split target: (path, stacks reported, truth).  Its
    main thread has the samples that judge the split to tolerance (None:
    any capture): a run that has too few is taken again, longer."""
    t = split_target(python, workdir)
    path = os.path.join(workdir, "run.raw")

    def attempt(k):
        r = sample(t.pid, "-d", longer(seconds, k), "--verbose", "--format",
                   "raw", "-o", path)
        stacks = int(re.search(r"(\d+) stacks", r.stderr).group(1))
        if tolerance is not None:
            main = collapsed(report(path, "--format", "collapsed").stdout)[
                t.truth["roles"]["main"]]
            if not enough(main, tolerance):
                return None
        return path, stacks, t.truth
    try:
        return until_shown(attempt)
    finally:
        t.close()


@pytest.mark.parametrize("label,python", SOME, ids=[p[0] for p in SOME])
def test_every_format_from_a_capture(label, python, workdir):
    """One capture, every format from it by pyunwind report, each read by
    its reader: all show the sampler's stacks and the target's split."""
    path, stacks, truth = capture(python, workdir)
    main = truth["roles"]["main"]
    got = collapsed(report(path, "--format", "collapsed").stdout)
    assert sum(n for s in got.values() for _, n in s) == stacks
    assert_split(got[main], tolerance=0.1)
    data = json.loads(report(path, "--format", "json").stdout)
    assert data["total"] == stacks and data["mode"] == "wall"
    top = report(path, "--format", "top", "--limit", "0").stdout
    assert "%d stacks from 2 threads" % stacks in top, top
    one = report(path, "--format", "top", "--thread", str(main)).stdout
    assert re.search(r"^\d+ stacks from 1 thread$", one, re.M), one
    pb = os.path.join(workdir, "run.pb.gz")
    report(path, "--format", "pprof", "-o", pb)
    assert "Total samples = %d" % stacks in go_pprof(
        "-top", "-sample_index=samples", pb)
    _, _, samples = pprof_raw(pb)
    assert_split([([":%s:" % f for f in reversed(funcs)], v[0])
                  for v, th, funcs in samples if th == "tid:%d" % main],
                 tolerance=0.1)
    ss = os.path.join(workdir, "run.speedscope.json")
    report(path, "--format", "speedscope", "-o", ss)
    _, errors, views, _ = speedscope_app(ss, "report-" + label)
    assert errors == []
    share = views[0]["three"][0] / (views[0]["three"][0] +
                                    views[0]["one"][0])
    assert abs(share - 0.75) < 0.1, views[0]
    # raw again: the selection as a new capture, read back the same
    again = os.path.join(workdir, "again.raw")
    report(path, "--format", "raw", "-o", again)
    assert collapsed(report(again, "--format", "collapsed").stdout) == got


def test_report_filters(workdir):
    """--thread keeps one thread; --from/--to split the samples between
    windows exactly; --mode gil narrows a wall capture to the thread
    holding the GIL (the sleeper never does); a mode the capture cannot
    give is refused in one line."""
    python = labelled(PYTHONS, "3.15.2-debian")
    path, stacks, truth = capture(python, workdir, tolerance=None)
    roles = truth["roles"]
    only = collapsed(report(path, "--format", "collapsed", "--thread",
                            str(roles["main"])).stdout)
    assert set(only) == {roles["main"]}
    whole = json.loads(report(path, "--format", "json").stdout)
    half = "%.9f" % (whole["duration_ns"] / 2e9)
    first = json.loads(report(path, "--format", "json", "--to",
                              half).stdout)
    rest = json.loads(report(path, "--format", "json", "--from",
                             half).stdout)
    assert first["samples"] + rest["samples"] == whole["samples"]
    assert first["total"] + rest["total"] == whole["total"] == stacks
    # each half has half the schedule's ticks, served (samples) or missed
    # (a loaded machine misses more in one half than in the other)
    ticks = lambda p: p["samples"] + p["missed"]
    assert abs(ticks(first) - ticks(rest)) < ticks(whole) * 0.1, \
        (first["samples"], first["missed"], rest["samples"], rest["missed"])
    assert abs(first["duration_ns"] - float(half) * 1e9) < 1e6, \
        first["duration_ns"]
    gil = collapsed(report(path, "--format", "collapsed", "--mode",
                           "gil").stdout)
    assert set(gil) == {roles["main"]}, set(gil)
    r = report(path, "--mode", "cpu", ok=False)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "sampled in wall mode" in r.stderr


def test_a_killed_run_keeps_its_capture(workdir):
    """SIGKILL to the sampler mid-run: the capture holds every sample up
    to its last flush (at most 10 ms before), the report says it ends
    early, the split is there, and the target runs on."""
    python = labelled(PYTHONS, "3.15.2-debian")
    t = split_target(python, workdir)
    path = os.path.join(workdir, "killed.raw")
    try:
        p = subprocess.Popen([PYUNWIND, "sample", str(t.pid), "-d", "3600",
                              "--format", "raw", "-o", path],
                             stderr=subprocess.DEVNULL)

        def enough_so_far():  # (killed once the capture holds enough)
            if not os.path.exists(path):
                return False
            r = report(path, "--format", "json", ok=False)
            if r.returncode != 0:  # (not even the header flushed yet)
                return False
            main = collapsed(report(path, "--format", "collapsed").stdout)
            return json.loads(r.stdout)["samples"] > 1000 and \
                enough(main[t.truth["roles"]["main"]], 0.1)
        try:
            wait_until(enough_so_far, "1,000 samples in the capture")
        finally:
            p.kill()
            p.wait()
        r = report(path, "--format", "json")
        data = json.loads(r.stdout)
        assert "ends early" in r.stderr, r.stderr
        assert data["samples"] > 1000, data["samples"]
        got = collapsed(report(path, "--format", "collapsed").stdout)
        assert_split(got[t.truth["roles"]["main"]], tolerance=0.1)
        assert state_of(t.pid) in RUNNING
    finally:
        t.close()


def test_report_on_bad_captures(workdir):
    """Hostile captures: not a capture, cut anywhere, bytes flipped
    anywhere (a few hundred variations of a real one): never a crash,
    exit 0 (what was whole, with a note when cut) or 3 with one line
    naming the byte."""
    python = labelled(PYTHONS, "3.15.2-debian")
    path, _, _ = capture(python, workdir, seconds="0.3", tolerance=None)
    with open(path, "rb") as f:
        good = f.read()
    bad = os.path.join(workdir, "bad.raw")
    with open(bad, "wb") as f:
        f.write(b"not a capture at all\n")
    r = report(bad, ok=False)
    assert r.returncode == 3 and "not a capture" in r.stderr, r.stderr
    rng = random.Random(1234)
    for i in range(300):
        data = bytearray(good)
        if i % 3 == 0:
            data = data[:rng.randrange(8, len(data))]
        else:
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(8, len(data))] = rng.randrange(256)
        with open(bad, "wb") as f:
            f.write(data)
        r = report(bad, "--format", "json", ok=False)
        assert r.returncode in (0, 3), (i, r.returncode, r.stderr)
        assert len(r.stderr.splitlines()) <= 1, r.stderr
        if r.returncode == 0:
            json.loads(r.stdout)
        else:
            assert "at byte" in r.stderr, r.stderr


# ------------------------------------------------- gecko (Firefox Profiler)

class FirefoxProfiler:
    """The Firefox Profiler's own code reading a profile: its command line
    client (@firefox-devtools/profiler-cli, from npm, installed by
    scripts/get-web-tools), which loads a file the way profiler.firefox.com
    does (upgrading older format versions) into a daemon and answers
    queries as JSON."""

    def __init__(self, profile, workdir):
        self.cli = os.path.join(node_modules(), "@firefox-devtools",
                                "profiler-cli", "dist", "profiler-cli.js")
        assert os.path.exists(self.cli), (
            "profiler-cli is missing (scripts/get-web-tools installs it)")
        self.env = dict(os.environ,
                        PROFILER_CLI_SESSION_DIR=os.path.join(workdir, "fx"))
        # (profiler-cli gives its daemon 500 ms to start, which a loaded
        # machine can exceed: that daemon is stopped and the load made
        # again, in a session of its own, until DEADLINE)
        deadline = time.monotonic() + DEADLINE
        for k in range(1000):
            self.session = "s%d-%d" % (os.getpid(), k)
            r = self._cli("load", profile)
            if r.returncode == 0 and "Session started" in r.stdout:
                break
            said = r.stdout + r.stderr
            assert "did not become ready" in said and \
                time.monotonic() < deadline, said
            m = re.search(r"as pid (\d+)", said)
            if m:
                try:
                    os.kill(int(m.group(1)), 9)
                except ProcessLookupError:
                    pass

    def _cli(self, *args):
        return subprocess.run(["node", self.cli, *args, "--session",
                               self.session], capture_output=True,
                              text=True, timeout=TIMEOUT, env=self.env)

    def __call__(self, *args):
        r = self._cli(*args, "--json")
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout)

    def threads(self):
        """{tid: (handle, name)}"""
        info = self("profile", "info", "--all")
        return {t["tid"]: (t["threadHandle"], t["name"])
                for p in info["processes"] for t in p["threads"]}

    def functions(self, handle):
        """{function name: [total, self]} in samples, for one thread."""
        got = self("thread", "functions", "--thread", handle, "--limit", "0",
                   "--include-idle")
        out = collections.defaultdict(lambda: [0, 0])
        for f in got["functions"]:
            out[f["name"]][0] += f["totalSamples"]
            out[f["name"]][1] += f["selfSamples"]
        return out

    def markers(self, handle):
        """{marker name: samples it spans, summed}; and the markers."""
        got = self("thread", "markers", "--thread", handle, "--list",
                   "--limit", "0")
        out = collections.Counter()
        for m in got["flatMarkers"]:
            out[m["name"]] += m["data"]["samples"]
        return out, got["flatMarkers"]

    def close(self):
        self._cli("stop")


def assert_gecko_matches(fx, data, names=True):
    """Every thread of a profile's json, read back by the Firefox Profiler
    from the gecko file of the same profile: its name, every function's
    total and self samples, and status markers that span as many samples
    as the json gives each status."""
    threads = fx.threads()
    assert set(threads) == {t["native_thread_id"]
                            for t in data["threads"]}, threads
    words = {"Has GIL": "has_gil", "Waiting for GIL": "gil_requested",
             "On CPU": "on_cpu", "Running GC": "gc",
             "Has exception": "exception"}
    for t in data["threads"]:
        handle, name = threads[t["native_thread_id"]]
        if names:
            label = "main thread" if t["main"] else t["name"]
            assert name == "Thread %d%s" % (
                t["native_thread_id"], " (%s)" % label if label else ""), \
                name
        want = function_times(data, t["native_thread_id"])
        assert fx.functions(handle) == want, t
        spans, listed = fx.markers(handle)
        assert {words[k]: v for k, v in spans.items()} == \
            {k: v for k, v in t["status"].items() if v}, (t, spans)
        for a, b in zip(listed, listed[1:]):  # a marker per run of samples
            if a["name"] == b["name"]:
                assert b["start"] >= a["start"] + a["duration"] - 1e-6


@pytest.mark.parametrize("label,python", ENDS, ids=[p[0] for p in ENDS])
def test_gecko_read_by_the_firefox_profiler(label, python, workdir):
    """A capture of the split target with its exception handler thread,
    written as gecko and as json by pyunwind report: the Firefox
    Profiler's own loader (profiler-cli) reads the gecko file (format
    version 70, upgraded on load) with every thread, function and status
    as the json has them, the threads named as the target named them
    (3.14+); the handler thread's exception markers are there; and
    the Profiler's zoom into 0.5-1.5 s keeps the samples that report
    --from 0.5 --to 1.5 keeps: the samples sit at their times."""
    t = split_target(python, workdir, "--handler")
    path = os.path.join(workdir, "run.raw")
    try:
        sample(t.pid, "-d", "2", "--format", "raw", "-o", path)
    finally:
        t.close()
    roles = t.truth["roles"]
    data = json.loads(report(path, "--format", "json").stdout)
    # the threads' names: the ones the target gave them, which CPython
    # 3.14+ passes to the kernel (3.11 and 3.13 do not: no names)
    names = {t["native_thread_id"]: t["name"] for t in data["threads"]}
    want = {tid: ("" if role == "main" or label.startswith(NO_NAMES)
                  else role) for role, tid in roles.items()}
    assert names == want, (names, want)
    gecko = os.path.join(workdir, "run.gecko.json")
    report(path, "--format", "gecko", "-o", gecko)
    fx = FirefoxProfiler(gecko, workdir)
    try:
        assert_gecko_matches(fx, data)
        # (the split itself: test_every_format_from_a_capture; here the
        # handler thread takes the GIL from the main thread, which moves
        # it)
        handler = fx.threads()[roles["handler"]][0]
        assert "Has exception" in fx.markers(handler)[0]
        meta = fx("profile", "meta")
        assert meta["interval"] == 1, meta
        window = json.loads(report(path, "--format", "json", "--from",
                                   "0.5", "--to", "1.5").stdout)
        fx("zoom", "push", "0.5,1.5")
        for tid in roles.values():
            handle = fx.threads()[tid][0]
            assert fx.functions(handle) == function_times(window, tid), tid
    finally:
        fx.close()


@pytest.mark.debugger
def test_gecko_from_the_cli_and_the_debuggers(workdir):
    """pyunwind sample --format gecko, gdb's Profile.write(path, 'gecko')
    and lldb's py-sample --format gecko: the Firefox Profiler reads each,
    with the stacks the sampler recorded (gdb: the same Profile's data()).
    gdb's raw capture of a window now has the samples' times: --to and
    --from halves add up to the whole, each about half."""
    from debuggers import LLDB, LLDB_PLUGIN, Gdb, Lldb
    python = labelled(PYTHONS, "3.15.2-debian")
    t = split_target(python, workdir)
    cli_out = os.path.join(workdir, "cli.gecko.json")
    gdb_out = os.path.join(workdir, "gdb.gecko.json")
    gdb_json = os.path.join(workdir, "gdb.json")
    gdb_raw = os.path.join(workdir, "gdb.raw")
    lldb_out = os.path.join(workdir, "lldb.gecko.json")
    # Each profile taken again, longer, until it has the samples that
    # judge its split to 0.1: the main thread has half the stacks, nearly
    # all of them in three() or one().
    need = 2.2 * samples_for(0.1)

    def cli(k):
        r = sample(t.pid, "-d", longer("1", k), "--verbose", "--format",
                   "gecko", "-o", cli_out)
        n = int(re.search(r"(\d+) stacks", r.stderr).group(1))
        return n >= need and n

    def gdb(k):
        for path in (gdb_raw, gdb_json):
            if os.path.exists(path):
                os.unlink(path)
        tr = Gdb().run(["python p = pyunwind_gdb.sample(duration=%s)"
                        % longer("1", k),
                        "python p.write(%r, 'gecko')" % gdb_out,
                        "python p.write(%r, 'json')" % gdb_json,
                        "python p.write(%r, 'raw')" % gdb_raw,
                        "detach"], ["-p", str(t.pid)])
        assert os.path.exists(gdb_raw), tr.text[-2000:]
        with open(gdb_json) as f:
            data = json.load(f)
        return data["total"] >= need and data

    def lldb_window(k):
        setup, args, teardown = lldb.attach(t.pid)
        tr = lldb.run(["py-sample -d %s --verbose --format gecko -o %s"
                       % (longer("1", k), lldb_out), *teardown], args,
                      setup=setup)
        n = int(re.search(r"(\d+) stacks", tr.text).group(1))
        return n >= need and n
    try:
        cli_stacks = until_shown(cli)
        data = until_shown(gdb)
        assert LLDB and os.path.exists(LLDB_PLUGIN), "lldb plugin not built"
        lldb = Lldb()
        lldb_stacks = until_shown(lldb_window)
    finally:
        t.close()
    for path, stacks in ((cli_out, cli_stacks), (gdb_out, data["total"]),
                         (lldb_out, lldb_stacks)):
        fx = FirefoxProfiler(path, workdir)
        try:
            threads = fx.threads()
            outer = 0
            for handle, _ in threads.values():
                f = fx.functions(handle)
                outer += f["<module>"][0] + f["Thread._bootstrap"][0]
            assert outer == stacks, (path, outer, stacks)
            main = fx.functions(threads[t.truth["roles"]["main"]][0])
            assert abs(main["three"][0] / (main["three"][0] +
                                           main["one"][0]) - 0.75) < 0.1
            if path == gdb_out:
                assert_gecko_matches(fx, data)
        finally:
            fx.close()
    whole = json.loads(report(gdb_raw, "--format", "json").stdout)
    assert whole["total"] == data["total"]
    half = whole["duration_ns"] / 2e9
    first = json.loads(report(gdb_raw, "--format", "json", "--to",
                              str(half)).stdout)
    rest = json.loads(report(gdb_raw, "--format", "json", "--from",
                             str(half)).stdout)
    assert first["total"] + rest["total"] == whole["total"]
    # (each half has samples of its own: they sit at their times, not all
    # at one end.  How many in each is the machine's: a loaded one serves
    # fewer ticks in one half, and the window's missed ticks are all on
    # its last sample, so they cannot even the halves out)
    assert first["total"] > 0 and rest["total"] > 0, \
        (first["total"], rest["total"])


# ---------------------------------------------------------------- flamegraph

def flamegraph_page(page, name, click, zoom, search):
    """tests/web/flamegraph.mjs: the page used in headless chromium."""
    return web_harness("flamegraph.mjs", page, name, click, zoom, search)


def totals(data, pred=lambda names: True):
    """Samples of the stacks whose function names (outermost first) pass
    pred, from a profile's json."""
    funcs, frames = data["functions"], data["frames"]
    return sum(st["count"] for st in data["stacks"]
               if pred([funcs[frames[f]["function"]]["name"]
                        for f in st["frames"]]))


@pytest.mark.parametrize("label,python", ENDS, ids=[p[0] for p in ENDS])
def test_flamegraph_in_chromium(label, python, workdir):
    """The flame graph page of a capture, in headless chromium: no console
    error and no network request; the outermost row's totals are the
    profile's (json of the same capture); clicking three() tells its total
    and share of all; zoomed into main(), three() tells its share of
    main(); Esc zooms out; the inverted view's outermost row fills the
    width; a search marks every busy() frame and tells their samples;
    by lines, busy()'s frames are its lines with the json's samples on
    each; the theme follows the system's preference unless chosen; the
    SVG export is a file chromium parses and draws, with every frame."""
    path, stacks, truth = capture(python, workdir)
    data = json.loads(report(path, "--format", "json").stdout)
    page = os.path.join(workdir, "flame.html")
    report(path, "--format", "flamegraph", "-o", page)
    with open(page, encoding="utf-8") as f:
        html = f.read()
    # self-contained (the one URL is the SVG export's namespace, a name)
    html = html.replace('"http://www.w3.org/2000/svg"', "")
    assert "http:" not in html and "https:" not in html
    got = flamegraph_page(page, "flamegraph-" + label, "three", "main",
                          "busy")
    assert got["errors"] == [], got["errors"]
    top = {f["fn"]: f["total"] for f in got["load"] if f["depth"] == 0}
    assert top == {"<module>": totals(data, lambda n: n[0] == "<module>"),
                   "Thread._bootstrap": totals(
                       data, lambda n: n[0] == "Thread._bootstrap")}, top
    assert sum(top.values()) == stacks
    three = totals(data, lambda n: "three" in n)
    main = totals(data, lambda n: "main" in n)
    # (the page rounds as JavaScript's toFixed(2) does: compared as
    # numbers, to half a hundredth)
    m = re.search(r"total (\d+) samples, ([\d.]+)% of all", got["click"])
    assert m and int(m.group(1)) == three, got["click"]
    assert abs(float(m.group(2)) - 100 * three / stacks) <= 0.0051
    assert len(got["zoom"]) == 1 and got["zoomDepth0"] == ["main"]
    m = re.search(r"; ([\d.]+)% of main$", got["zoom"][0])
    assert m and abs(float(m.group(1)) - 100 * three / main) <= 0.0051, \
        got["zoom"]
    assert abs(three / main - 0.75) < 0.1
    assert got["escape"] == len(got["load"])
    # keyboard: ArrowDown zooms into the heaviest outermost function (the
    # two are about even: either, when they tie), ArrowRight to the other,
    # ArrowLeft back, ArrowDown into its heaviest callee
    keys = got["keys"]
    first = keys["down"][0]
    assert top[first] == max(top.values()), (keys, top)
    assert keys["right"] == [next(f for f in top if f != first)], keys
    assert keys["left"] == keys["down"] == [first], keys
    kids = collections.Counter()
    funcs, frames = data["functions"], data["frames"]
    for st in data["stacks"]:
        names = [funcs[frames[f]["function"]]["name"] for f in st["frames"]]
        if len(names) > 1 and names[0] == first:
            kids[names[1]] += st["count"]
    assert keys["down2"] == [kids.most_common(1)[0][0]], (keys, kids)
    inv = got["inverted"]
    # the outermost row, inverted, is each function's self samples (frames
    # narrower than half a pixel are not drawn: a function that ran itself
    # in a few samples, main() between its calls): the row drawn fills the
    # width of the samples it holds
    for f in inv:
        assert f["total"] == totals(data, lambda n: n[-1] == f["fn"]), f
    drawn = sum(f["total"] for f in inv)
    assert stacks - drawn < stacks * 0.01
    assert abs(sum(f["width"] for f in inv) -
               got["graphWidth"] * drawn / stacks) < 1, inv
    selfs = collections.Counter()
    for st in data["stacks"]:
        selfs[funcs[frames[st["frames"][-1]]["function"]]["name"]] += \
            st["count"]
    shown = {f["fn"] for f in inv}
    for fn, n in selfs.items():
        if fn not in shown:
            assert n / stacks * got["graphWidth"] < 0.5, (fn, n, inv)
    busy = totals(data, lambda n: "busy" in n)
    assert got["search"] and set(got["search"]) == {"busy"}
    assert got["matched"].startswith("matched: %d samples" % busy), \
        got["matched"]
    # hotspots: the functions with the most self samples
    assert dict(got["hotspots"]) == dict(selfs.most_common(8))
    # the sandwich of busy(): itself, then its callers three() and one()
    # with the samples of the stacks where each calls it
    parts = got["sandwichParts"]
    callers = {f["fn"]: f["total"] for f, p in zip(got["sandwich"], parts)
               if p == "callers" and f["depth"] == 1}
    assert callers == {
        "three": totals(data, lambda n: "busy" in n and
                        n[n.index("busy") - 1] == "three"),
        "one": totals(data, lambda n: "busy" in n and
                      n[n.index("busy") - 1] == "one")}, callers
    top = [f for f, p in zip(got["sandwich"], parts) if f["depth"] == 0]
    assert [(f["fn"], f["total"]) for f in top] == [("busy", busy)] * 2
    # the status filter: stacks of a thread holding the GIL (the main
    # thread, busy; the sleeper never), as the json counts them
    gil = collections.Counter()
    for st in data["stacks"]:
        if "has_gil" in st["status"]:
            gil[funcs[frames[st["frames"][0]]["function"]]["name"]] += \
                st["count"]
    assert {f["fn"]: f["total"] for f in got["gil"]} == dict(gil), got["gil"]
    assert set(gil) == {"<module>"}, gil
    # labels with modules: threading's functions and split.py's, each
    # named as an import names its module
    assert "Thread.run (threading)" in got["modules"], got["modules"]
    assert "main (split)" in got["modules"], got["modules"]
    # the summary's shares of the threads' status: the GIL held in the
    # main thread's stacks (about half of all), never waited for here
    held = 100 * sum(gil.values()) / stacks
    m = re.search(r"GIL held ([\d.]+)%", got["summary"])
    assert m and abs(float(m.group(1)) - held) <= 0.0051, got["summary"]
    assert 40 < held <= 50.01, held
    # lines: a frame per function and line, labelled fn:LINE, each with
    # the samples the json has on that line (busy's loop: two lines at
    # least), its tooltip naming the file and line; search and hotspots
    # work on them too
    for f in got["lines"]:
        assert f["line"] > 0 or f["fn"].startswith("<"), f
        assert f["text"] in ("", "%s:%d" % (f["fn"], f["line"])), f
    shown = collections.Counter()
    for f in got["lines"]:
        if f["fn"] == "busy":
            shown[f["line"]] += f["total"]
            assert f["title"].startswith("busy (%s:%d)\n" % (
                truth["file"], f["line"])), f["title"]
    want = collections.Counter()
    for st in data["stacks"]:
        for fr in st["frames"]:
            if funcs[frames[fr]["function"]]["name"] == "busy":
                want[frames[fr]["line"]] += st["count"]
    assert len([n for n in want.values() if n > stacks / 100]) >= 2, want
    for line in set(want) | set(shown):
        assert abs(shown[line] - want[line]) <= stacks / 500, (shown, want)
    m = re.search(r"matched: (\d+) samples", got["linesMatched"])
    assert m and int(m.group(1)) == busy, got["linesMatched"]
    assert any(re.match(r"busy:\d+ ", h) for h in got["linesHotspots"]), \
        got["linesHotspots"]
    # the theme: the system's preference, unless one is chosen
    theme = got["theme"]
    assert theme["light"] == theme["chosenLight"] == "rgb(250, 250, 250)", \
        theme
    assert theme["systemDark"] == theme["chosenDark"] == "rgb(27, 28, 31)", \
        theme
    # the view as SVG: a file chromium parses and draws, of the graph's
    # width, with every frame the page drew and its label
    svg = got["svg"]
    assert svg["download"] == "flamegraph.svg" and svg["parsed"], svg
    assert svg["frames"] == len(got["load"]), (svg["frames"], len(got["load"]))
    assert svg["labels"] == svg["drawn"] and "busy" in svg["labels"], svg
    assert svg["width"] == svg["graphWidth"] and svg["height"] > 100, svg


def share(data, func):
    """Points of all samples in stacks through func, from a json."""
    return 100 * totals(data, lambda n: func in n) / data["total"]


def test_flamegraph_diff_in_chromium(workdir):
    """A known regression: the baseline target's one() runs 1 ms of each
    4, the new one's 3 ms of each 6 (split.py --one-ms 3), so one() takes
    a larger share of all samples and three() a smaller one.  The
    differential page (report NEW --diff BASE) colours one() red and
    three() blue, each frame's change equal to the two captures' json; a
    run where one() is never called (--one-ms 0) lists its stacks of the
    baseline as vanished, with their baseline share."""
    python = labelled(PYTHONS, "3.15.2-debian")
    runs = {}
    for ms in ("1", "3", "0"):
        t = Target(python, "split.py", workdir, ("--one-ms", ms),
                   expect_threads=False)
        path = os.path.join(workdir, "one-%s.raw" % ms)

        # (longer runs until 1,800 samples: the regression, one() from
        # 1/8 of all stacks to 1/4 and three() from 3/8 to 1/4, is 12.5
        # points, held to more than 5.  Each share is half a share of the
        # main thread's samples (the sleeper has the other half of the
        # stacks), so the difference of two of them, over 1,800
        # independent samples each, has a standard deviation of 0.83
        # points at most, 1.7 with a loaded machine's samples
        # (conftest.DESIGN): 7.5 points are 4.5 of those, a chance under
        # 1e-5 each (conftest.samples_for))
        def attempt(k):
            sample(t.pid, "-d", longer("2", k), "--format", "raw", "-o",
                   path)
            data = json.loads(report(path, "--format", "json").stdout)
            return data["samples"] >= 1800 and data
        try:
            runs[ms] = (path, until_shown(attempt))
        finally:
            t.close()
    base, new, gone = runs["1"], runs["3"], runs["0"]
    page = os.path.join(workdir, "diff.html")
    report(new[0], "--diff", base[0], "--format", "flamegraph", "-o", page)
    got = diff_page(page, "flamegraph-diff")
    assert got["errors"] == [], got["errors"]
    frames = {f["fn"]: f for f in got["frames"] if f["depth"] == 2 and
              f["fn"] in ("one", "three")}
    for fn, sign in (("one", 1), ("three", -1)):
        want = share(new[1], fn) - share(base[1], fn)
        f = frames[fn]
        assert abs(f["delta"] - want) < 0.01, (fn, f, want)
        assert sign * want > 5, (fn, want)  # the regression is there
        r, _, b = f["rgb"]
        assert (r > b + 50) if sign > 0 else (b > r + 50), (fn, f)
    # the sleeper's share did not move: neither red nor blue
    sleeper = [f for f in got["frames"] if f["fn"] == "sleeper"][0]
    assert abs(sleeper["delta"]) < 2, sleeper
    assert got["elided"] == [], got["elided"]
    page = os.path.join(workdir, "gone.html")
    report(gone[0], "--diff", base[0], "--format", "flamegraph", "-o", page)
    got = diff_page(page, "flamegraph-elided")
    assert got["errors"] == [], got["errors"]
    assert [e["path"] for e in got["elided"]] == ["<module> › main › one"]
    assert abs(got["elided"][0]["share"] - share(base[1], "one")) < 0.01


def diff_page(page, name):
    return web_harness("flamegraph_diff.mjs", page, name)


# ------------------------------------------------------------------ heatmap

def line_counts(data, path):
    """{line: (self, total)} of one file from a profile's json: self where
    the innermost frame ran the line, total once per stack."""
    funcs, frames = data["functions"], data["frames"]
    out = collections.defaultdict(lambda: [0, 0])
    for st in data["stacks"]:
        seen = set()
        fr = [frames[f] for f in st["frames"]]
        for k, f in enumerate(fr):
            if funcs[f["function"]]["file"] != path or f["line"] <= 0:
                continue
            if f["line"] not in seen:
                seen.add(f["line"])
                out[f["line"]][1] += st["count"]
            if k == len(fr) - 1:
                out[f["line"]][0] += st["count"]
    return {str(k): v for k, v in out.items()}


def test_heatmap_in_chromium(workdir):
    """The heat map page of a capture in headless chromium: no console
    error; the index lists split.py first (the hottest), and its tree of
    directories adds up; every line's self
    and total samples equal the same capture's json; three()'s call line
    links to busy()'s first line, and each click on the link restarts its
    highlight."""
    python = labelled(PYTHONS, "3.15.2-debian")
    path, stacks, truth = capture(python, workdir)
    data = json.loads(report(path, "--format", "json").stdout)
    page = os.path.join(workdir, "heat.html")
    report(path, "--format", "heatmap", "-o", page)
    src = truth["file"]
    got = web_harness("heatmap.mjs", page, "heatmap", src, "busy")
    assert got["errors"] == [], got["errors"]
    assert got["index"][0][1] == src, got["index"]
    assert sum(n for n, _ in got["index"]) == stacks
    # the tree of directories: every file once, with its index count; a
    # directory's count is its files'; split.py's directory first (the
    # hottest), split.py under it
    tree = got["tree"]
    files = {r["path"]: r["self"] for r in tree if r["kind"] == "file"}
    assert files == {p: n for n, p in got["index"]}, tree
    for k, r in enumerate(tree):
        if r["kind"] == "dir":
            assert r["self"] == sum(n for p, n in files.items()
                                    if p.startswith(r["path"] + "/")), r
            # its rows: the deeper ones that follow it
            below = []
            for x in tree[k + 1:]:
                if x["depth"] <= r["depth"]:
                    break
                below.append(x)
            assert {x["path"] for x in below if x["kind"] == "file"} == \
                {p for p in files if p.startswith(r["path"] + "/")}, r
    assert tree[0] == {"kind": "dir", "depth": 0, "self": stacks,
                       "path": os.path.dirname(src)}, tree[:2]
    assert tree[1]["path"] == src, tree[:2]
    assert got["lines"] == line_counts(data, src), got["lines"]
    # each file's hottest line: its number, linked, and its total samples
    for row in got["hot"]:
        if row["path"] != src:
            continue
        counts = line_counts(data, src)
        line = max(counts, key=lambda k: (counts[k][1], -int(k)))
        assert row["text"] == "line %s (%d)" % (line, counts[line][1]), row
        assert row["href"].endswith("&line=" + line), row
        assert got["hotOpened"] == int(line), (got["hotOpened"], row)
    assert any(row["path"] == src for row in got["hot"]), got["hot"]
    with open(src, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[got["link"]["line"] - 1].startswith("def busy(")
    assert got["flashes"] == 2 and got["visible"], got


def test_heatmap_of_a_target_in_a_container(workdir):
    """A target in mount and pid namespaces of its own (a container seen
    from the host): its script lies on a file system only the namespace
    has (a tmpfs mounted there), at a path the host does not have.  The
    heat map, written while it runs, shows the script's source all the
    same (read below /proc/PID/root), as Debian's chromium renders it;
    the dump shows its lines too."""
    python = labelled(PYTHONS, "3.15.2-debian")
    where = os.path.join(workdir, "ns")
    os.mkdir(where)
    src = os.path.join(where, "busy.py")
    script = ("mount -t tmpfs none %s && cat > %s <<'PY'\n"
              "import time\n\n\ndef spin():\n    while True:\n"
              "        sum(range(1000))\n\n\nprint('ready', flush=True)\n"
              "spin()\nPY\nexec %s %s\n" % (where, src, python, src))
    p = subprocess.Popen(["unshare", "--mount", "--pid", "--fork",
                          "--kill-child", "--mount-proc", "sh", "-c",
                          script], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready", p.stderr.read()
        assert not os.path.exists(src)  # (the host has no such file)
        host = int(subprocess.run(["pgrep", "-f", "-P", str(p.pid), src],
                                  capture_output=True, text=True)
                   .stdout.split()[0])
        page = os.path.join(workdir, "heat.html")
        r = pyunwind("sample", "-d", "1", "-o", page, "--format",
                     "heatmap", str(host))
        assert r.returncode == 0, r.stderr
        r = pyunwind("dump", str(host))
        assert "    sum(range(1000))" in r.stdout.splitlines(), r.stdout
    finally:
        p.kill()
        p.wait()
    got = web_harness("heatmap.mjs", page, "heatmap-container", src, "spin")
    assert got["errors"] == [] and not got["nosource"], got
    assert any(line.startswith("        sum(range(1000))")
               for line in got["source"]), got["source"]


# --------------------------------------------------------------------- live

def live_on_pty(pid, out):
    """pyunwind sample --live of pid on a new pty (conftest.OnPty),
    writing json to out.  (Asked for an hour: it ends on a key.)"""
    return OnPty([PYUNWIND, "sample", str(pid), "--live", "-d", "3600",
                  "--format", "json", "-o", out])


def drawn_samples(view):
    """The samples a live view's table says the run has taken."""
    m = re.search(r" mode, (\d+) samples in", view)
    return int(m.group(1)) if m else 0


def test_live_view_on_a_terminal(workdir):
    """sample --live on a terminal (a pty): a top table redrawn several
    times a second; t sorts by total, T shows one thread, q ends the run
    with exit 0, and the profile goes to -o; without a terminal --live is
    refused in one line."""
    python = labelled(PYTHONS, "3.15.2-debian")
    t = split_target(python, workdir)
    out = os.path.join(workdir, "live.json")
    try:
        tty = live_on_pty(t.pid, out)
        try:
            # each key once the view before it is drawn, and q once 8
            # views and 1,000 samples are (a loaded machine takes longer)
            tty.wait_for(len, "the first view")
            tty.key(b"t")
            tty.wait_for(lambda views: any(
                "sorted by total; all threads" in v for v in views),
                "the view sorted by total")
            tty.key(b"T")
            tty.wait_for(lambda views: any(
                "sorted by total; thread " in v for v in views),
                "one thread's view")
            tty.wait_for(lambda views: len(views) >= 8 and
                         drawn_samples(views[-1]) > 1000, "1,000 samples")
            tty.key(b"q")
            status = tty.end()
        finally:
            tty.close()
    finally:
        t.close()
    seen = tty.seen
    assert os.waitstatus_to_exitcode(status) == 0, seen[-2000:]
    views = tty.views()
    assert len(views) >= 8, len(views)  # redrawn 4 times a second
    assert "sorted by self; all threads" in views[0], views[0]
    assert any("sorted by total; all threads" in v for v in views)
    threads = [v for v in views if "sorted by total; thread " in v]
    assert threads and "from 1 thread\r" in threads[-1], views[-1][:500]
    assert "; interrupted" in views[-1]
    with open(out) as f:
        data = json.load(f)
    # every sample holds both threads' stacks, bar failed ones
    assert data["samples"] > 1000
    assert data["total"] >= 2 * (data["samples"] - data["failed"]) - 2
    r = pyunwind("sample", "--live", "1")
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1, r.stderr
    assert "--live draws on a terminal" in r.stderr


def test_live_view_ends_on_ctrl_c(workdir):
    """Ctrl-C typed on the live view's terminal (the pty turns it into
    SIGINT) ends the run as q does: exit 0, the profile in -o, and the
    terminal's line editing and echo given back."""
    import termios
    python = labelled(PYTHONS, "3.15.2-debian")
    t = split_target(python, workdir)
    out = os.path.join(workdir, "live.json")
    try:
        tty = live_on_pty(t.pid, out)
        fd, seen, done = tty.fd, b"", None
        try:
            # (Ctrl-C once the view is drawn, with the 500 samples the
            # profile is judged on, however long a loaded machine takes)
            tty.wait_for(lambda views: views and
                         drawn_samples(views[-1]) > 500, "500 samples")
            raw = termios.tcgetattr(fd)
            os.write(fd, b"\x03")
            end = time.monotonic() + DEADLINE
            while time.monotonic() < end and done is None:
                tty.read()
                p, status = os.waitpid(tty.pid, os.WNOHANG)
                if p:
                    done = status
                    cooked = termios.tcgetattr(fd)
            seen = tty.seen
        finally:
            if done is None:
                os.kill(tty.pid, 9)
                os.waitpid(tty.pid, 0)
            os.close(fd)
    finally:
        t.close()
    assert done is not None, "still running after Ctrl-C: %r" % seen[-500:]
    assert os.waitstatus_to_exitcode(done) == 0, seen[-2000:]
    assert not raw[3] & termios.ICANON  # the view had the terminal raw
    assert cooked[3] & termios.ICANON and cooked[3] & termios.ECHO
    with open(out) as f:
        assert json.load(f)["samples"] > 500


def _varint(v):
    out = bytearray()
    while True:
        b = v & 0x7f
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _string(s):
    return _varint(len(s.encode())) + s.encode()


def test_heatmap_reads_only_python_sources(workdir):
    """A capture from elsewhere names the files: one naming /etc/passwd as
    a function's file does not bring /etc/passwd into the heat map."""
    rec = (b"PYUNWRAW" + _varint(1) +
           b"P" + _varint(1) + _string("3.15.2") + _varint(0) * 2 +
           _varint(1000000) + _varint(0) +
           b"T" + _varint(1) + _varint(1) + _varint(0) + _varint(1) +
           b"F" + _string("f") + _string("/etc/passwd") + _varint(2) +
           _varint(0) +
           b"L" + _varint(0) + _varint(2) +
           b"N" + _varint(0) + _varint(0) +
           b"S" + _varint(0) + _varint(0) + _varint(0) + _varint(1) +
           _varint(0) + _varint(1) + _varint(0) + _varint(5) +
           b"E" + _varint(1000000) + _varint(1) + _varint(0) + _varint(0))
    path = os.path.join(workdir, "foreign.raw")
    with open(path, "wb") as f:
        f.write(rec)
    top = report(path).stdout
    assert "f (/etc/passwd:1)" in top, top
    page = os.path.join(workdir, "foreign.html")
    report(path, "--format", "heatmap", "-o", page)
    with open(page, encoding="utf-8") as f:
        html = f.read()
    assert '"/etc/passwd", "source": null' in html
    assert "root:" not in html


def test_collapsed_read_by_speedscope(workdir):
    """The collapsed format, opened by speedscope's app (which imports
    Brendan Gregg's format): one profile, no error, and the Sandwich view
    gives three()'s and one()'s call frames the samples the file has."""
    python = labelled(PYTHONS, "3.15.2-debian")
    t = split_target(python, workdir)
    out = os.path.join(workdir, "profile.collapsed.txt")

    # (longer runs until the main thread has the samples the split tests
    # judge theirs on, so that the frames a sample rarely catches (the
    # def line, below) weigh as little in it as they do)
    def attempt(k):
        sample(t.pid, "-d", longer("1.5", k), "--format", "collapsed", "-o",
               out)
        with open(out) as f:
            main = collapsed(f.read())[t.truth["roles"]["main"]]
        return enough(main, 0.1) and main
    try:
        main = until_shown(attempt)
    finally:
        t.close()
    _, errors, views, _ = speedscope_app(out, "collapsed")
    assert errors == [], errors
    assert len(views) == 1
    for fn in ("three", "one"):
        # its call line (busy(...)); a sample can catch the frame just
        # made, at its first instruction (the def line)
        lines = collections.Counter()
        for fr, n in main:
            for f in set(fr):
                if f.split(":")[1:2] == [fn]:
                    lines[f] += n
        name, most = lines.most_common(1)[0]
        assert most >= 0.95 * sum(lines.values()), lines
        want = count(main, lambda fr: name in fr)
        shown = views[0][name][0]  # speedscope: a sample is 1 unit
        assert shown == want, (name, shown, want)


@pytest.mark.debugger
def test_one_table_of_formats(workdir):
    """The formats are one table in the core: the CLI's message for an
    unknown format and its help, gdb's pyunwind_gdb.formats() and lldb's
    pyunwind_lldb.formats() (`py-profile formats`) name the same formats
    in the same order, binary ones alike; gdb's Profile.write() refuses a
    binary one without a path by the table's flag and writes the others;
    `report` writes every one of them from a capture."""
    from debuggers import LLDB, LLDB_PLUGIN, PLUGINS, Gdb, Lldb
    r = pyunwind("report", "--format", "bogus", "nothing")
    m = re.search(r"'bogus' is not a format \((.*)\)", r.stderr)
    assert r.returncode == 2 and m, r.stderr
    names = re.split(r", | or ", m.group(1))
    assert names[0] == "top" and len(names) >= 9, names
    helped = pyunwind("sample", "--help").stdout
    block = helped.split("--format FORMAT", 1)[1].split("\n  --", 1)[0]
    listed = re.findall(r"(?:^|,)\s+([a-z]+) \(", block)
    assert listed == names, (listed, names)
    tr = Gdb().run(["python import pyunwind_gdb",
                    "python f = pyunwind_gdb.formats(); "
                    "print('GDB', ' '.join(f), '|', "
                    "' '.join(n for n in f if f[n]['binary']))",
                    "python p = pyunwind_gdb.Profile()\n"
                    "for n in f:\n"
                    "    try:\n"
                    "        print('W', n, type(p.write(format=n)).__name__)\n"
                    "    except pyunwind_gdb.Error as e:\n"
                    "        print('W', n, 'refused', e.code)"])
    m = re.search(r"^GDB (.*) \| (.*)$", tr.text, re.M)
    assert m, tr.text[-2000:]
    assert m.group(1).split() == names, (m.group(1), names)
    binary = m.group(2).split()
    assert set(binary) == {"pprof", "raw"}, binary
    wrote = dict(re.findall(r"^W (\w+) (\w+ ?\d*)$", tr.text, re.M))
    assert wrote == {n: "refused 2" if n in binary else "str"
                     for n in names}, wrote
    assert LLDB and os.path.exists(LLDB_PLUGIN), "lldb plugin not built"
    tr = Lldb().run(["script import pyunwind_lldb",
                     "script f = pyunwind_lldb.formats(lldb.debugger); "
                     "print('LLDB', ' '.join(f), '|', "
                     "' '.join(n for n in f if f[n]['binary']))"],
                    setup=["command script import "
                           + os.path.join(PLUGINS, "pyunwind_lldb.py")])
    m = re.search(r"^LLDB (.*) \| (.*)$", tr.text, re.M)
    assert m, tr.text[-2000:]
    assert m.group(1).split() == names and m.group(2).split() == binary
    # every format from a capture, through report
    t = split_target(labelled(PYTHONS, "3.15.2-debian"), workdir)
    try:
        cap = os.path.join(workdir, "cap.raw")
        sample(t.pid, "-d", "0.5", "--format", "raw", "-o", cap)
    finally:
        t.close()
    for n in names:
        out = os.path.join(workdir, "out." + n)
        r = pyunwind("report", "--format", n, "-o", out, cap)
        assert r.returncode == 0 and os.path.getsize(out) > 0, (n, r.stderr)
