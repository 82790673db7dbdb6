"""pyunwind_lldb, the module for lldb's embedded Python, in the real lldb:
sample() on a live process (the split its clock-sliced loops make, and
write() equal to what `py-profile write` gives for the same profile), a
profile fed from a Python breakpoint callback whose total equals the hits
the script counted itself, Profile objects independent of one another,
errors as one-line Error exceptions, and the plugin found from the module
alone."""

import json
import os
import re
import shutil
import subprocess

import pytest

import conftest

from conftest import (RUNNING, TARGETS, TIMEOUT, Target, interpreters,
                      until_shown)
from debuggers import LLDB, LLDB_PLUGIN, PLUGINS, Lldb, process_state
from test_sample import assert_split, collapsed, enough

pytestmark = pytest.mark.debugger
PYTHONS = interpreters()
MODULE = os.path.join(PLUGINS, "pyunwind_lldb.py")
lldb = Lldb()


def py315():
    """The stripped 3.15 interpreter (these tests need one 3.15)."""
    return conftest.py315(PYTHONS)


@pytest.fixture(autouse=True)
def plugin():
    if not (LLDB and os.path.exists(LLDB_PLUGIN) and os.path.exists(MODULE)):
        pytest.fail("the lldb plugin is not built (scripts/setup builds it)")


def clean(tr):
    for mark in ("Traceback (most recent call last)", "internal error",
                 "FAILED"):
        assert mark not in tr.text, tr.text[-3000:]
    assert tr.proc.returncode == 0, tr.text[-3000:]


def script(tmp_path, name, text):
    path = tmp_path / (name + ".py")
    path.write_text(text)
    return "command script import %s" % path


def test_window_on_a_live_process(tmp_path):
    """sample() on a live process: the main thread's split, the sleeper,
    the selected thread and frame kept; write() in each format is what
    `py-profile write --name` writes for the same profile, data() and
    stacks() are that JSON and those collapsed stacks; another Profile fed
    meanwhile leaves it alone."""
    t = Target(py315(), "split.py", str(tmp_path), expect_threads=False)
    roles = t.truth["roles"]
    main = []

    def window(k):  # (windows until the split can be judged)
        out = tmp_path / ("out%d" % k)
        out.mkdir()
        load = script(tmp_path, "window%d" % k, """
import json, os, lldb, pyunwind_lldb
OUT = %r
def run(debugger):
    p = pyunwind_lldb.sample(debugger, duration=1.5)
    for fmt in ("collapsed", "top", "json"):
        p.write(os.path.join(OUT, "file." + fmt), format=fmt, limit=0)
        with open(os.path.join(OUT, "str." + fmt), "w") as f:
            f.write(p.write(format=fmt, limit=0))
        debugger.HandleCommand("py-profile write --name %%s --format %%s "
                               "--limit 0 -o %%s"
                               %% (p.name, fmt, os.path.join(OUT, "cmd." + fmt)))
    total = p.data()["total"]
    q = pyunwind_lldb.Profile(debugger)
    q.add_sample(0)
    with open(os.path.join(OUT, "meta.json"), "w") as f:
        json.dump({"ended": p.ended, "diagnostics": p.diagnostics,
                   "data": p.data(), "stacks": p.stacks(),
                   "total_before": total, "q": q.data()["total"]}, f)
""" % str(out))
        tr = lldb.run(["thread select 2", "frame info",
                       "script window%d.run(lldb.debugger)" % k,
                       "frame info", "process detach"],
                      setup=["process attach --pid %d" % t.pid,
                             "command script import " + MODULE, load])
        clean(tr)
        # the selected thread and frame are as they were
        sel = [o for c, o in zip(tr.commands, tr.outputs)
               if c == "frame info"]
        assert None not in sel, tr.text[-2000:]
        where = [re.findall(r"^\s*(frame #0: .*?)\s*$", o, re.M)[-1:]
                 for o in sel]
        assert where[0] and where[0] == where[1], sel
        meta = json.loads((out / "meta.json").read_text())
        assert meta["ended"] is None
        assert re.match(r"pyunwind: \d+ samples in [\d.]+ s",
                        meta["diagnostics"]), meta["diagnostics"]
        got = collapsed((out / "file.collapsed").read_text())
        assert roles["sleeper"] in got
        main.extend(got[roles["main"]])
        for fmt in ("collapsed", "top", "json"):
            cmd = (out / ("cmd." + fmt)).read_text()
            assert cmd and (out / ("file." + fmt)).read_text() == cmd, fmt
            assert (out / ("str." + fmt)).read_text() == cmd, fmt
        data = json.loads((out / "cmd.json").read_text())
        assert meta["data"] == data
        assert data["total"] == meta["total_before"] > 0
        assert meta["q"] >= 2  # both threads, in a profile of its own
        # stacks() is the collapsed profile
        from_stacks = {}
        for tid, frames, n in meta["stacks"]:
            from_stacks.setdefault(tid, []).append((
                ["%s:%s:%d" % (os.path.basename(f), fn, line)
                 for fn, f, line in frames], n))
        key = lambda st: (st[0], st[1])
        assert {tid: sorted(v, key=key) for tid, v in got.items()} == \
            {tid: sorted(v, key=key) for tid, v in from_stacks.items()}
        assert process_state(t.pid) in RUNNING  # running again after detach
        return enough(main, 0.1)
    try:
        until_shown(window)
        assert_split(main, tolerance=0.1)
    finally:
        t.close()


CALLS = os.path.join(TARGETS, "calls.py")


def test_window_ended_by_a_breakpoint(tmp_path):
    """A window a breakpoint ends early: .ended says so, .diagnostics has
    the summary, and lldb is stopped at the breakpoint."""
    load = script(tmp_path, "ended", """
import lldb, pyunwind_lldb
def run(debugger):
    p = pyunwind_lldb.sample(debugger, duration=30)
    print("ENDED", p.ended)
    print("DIAG", p.diagnostics.strip())
""")
    tr = lldb.run(["script ended.run(lldb.debugger)", "frame info",
                   "process kill"],
                  setup=["command script import " + MODULE, load,
                         "target create " + py315(),
                         "breakpoint set -n getppid",
                         "process launch -i /dev/null -- %s 1 1" % CALLS])
    clean(tr)
    out = tr["script ended.run"]
    assert "ENDED stopped at breakpoint 1" in out, out
    assert re.search(r"^DIAG pyunwind: \d+ samples in", out, re.M), out
    assert "getppid" in tr["frame info"]


def counted(p, fn):
    """The samples of a profile's JSON whose stack passes through fn."""
    k = [i for i, f in enumerate(p["functions"]) if f["name"] == fn]
    return sum(st["count"] for st in p["stacks"]
               if any(p["frames"][x]["function"] in k for x in st["frames"]))


def test_breakpoint_callback_profile(tmp_path):
    """A breakpoint on getppid() whose Python callback (`breakpoint command
    add -F`) counts its hits and adds a sample: the profile holds exactly
    those hits, 30 from often() and 10 from seldom()."""
    out = tmp_path / "profile.json"
    load = script(tmp_path, "count_writes", """
import json, lldb, pyunwind_lldb
profile = pyunwind_lldb.Profile()
hits = 0
def on_hit(frame, bp_loc, extra_args, internal_dict):
    global hits
    hits += 1
    try:
        profile.add_sample()
    except pyunwind_lldb.Error as e:
        print("ADD FAILED", e)
    return False
def report(path):
    profile.close()
    with open(path, "w") as f:
        json.dump({"hits": hits, "profile": profile.data()}, f)
""")
    tr = lldb.run(["script count_writes.report(%r)" % str(out)],
                  setup=["command script import " + MODULE, load,
                         "target create " + py315(),
                         "breakpoint set -n getppid",
                         "breakpoint command add -F count_writes.on_hit 1",
                         "process launch -i /dev/null -- %s 30 10" % CALLS])
    clean(tr)
    got = json.loads(out.read_text())
    hits, p = got["hits"], got["profile"]
    assert hits >= 40 and p["total"] == hits
    assert (counted(p, "often"), counted(p, "seldom")) == (30, 10)


def test_profiles_are_independent(tmp_path):
    """Two Profile objects fed from one callback (set with
    SBBreakpoint.SetScriptCallbackFunction), one at every hit, one at every
    fourth: each holds its own samples, clearing one leaves the other,
    and the profile of the plain py-profile commands stays empty."""
    out = tmp_path / "profiles.json"
    load = script(tmp_path, "two", """
import json, lldb, pyunwind_lldb
every, fourth = pyunwind_lldb.Profile(), pyunwind_lldb.Profile()
hits = 0
def setup(debugger):
    bp = debugger.GetSelectedTarget().BreakpointCreateByName("getppid")
    bp.SetScriptCallbackFunction("two.on_hit")
def on_hit(frame, bp_loc, internal_dict):
    global hits
    hits += 1
    debugger = frame.GetThread().GetProcess().GetTarget().GetDebugger()
    try:
        every.add_sample(frame.GetThread().GetThreadID())
        if hits % 4 == 0:
            fourth.add_sample()
    except pyunwind_lldb.Error as e:
        print("ADD FAILED", e)
    return False
def report(path):
    got = {"hits": hits, "every": every.data(), "fourth": fourth.data(),
           "names": [every.name, fourth.name]}
    fourth.clear()
    got["fourth_cleared"] = fourth.data()["total"]
    got["every_after"] = every.data()
    with open(path, "w") as f:
        json.dump(got, f)
""")
    plain = tmp_path / "plain.json"
    tr = lldb.run(["script two.report(%r)" % str(out),
                   "py-profile write --format json -o %s" % plain],
                  setup=["command script import " + MODULE, load,
                         "target create " + py315(),
                         "script two.setup(lldb.debugger)",
                         "process launch -i /dev/null -- %s 30 10" % CALLS])
    clean(tr)
    got = json.loads(out.read_text())
    hits = got["hits"]
    assert hits >= 40 and got["every"]["total"] == hits
    assert got["fourth"]["total"] == hits // 4
    assert (counted(got["every"], "often"),
            counted(got["every"], "seldom")) == (30, 10)
    assert got["names"][0] != got["names"][1]
    assert got["fourth_cleared"] == 0
    assert got["every_after"] == got["every"]
    assert json.loads(plain.read_text())["total"] == 0


ERRORS = """
import lldb, pyunwind_lldb
def attempt(label, fn):
    try:
        fn()
        print("ERR %s none" % label)
    except pyunwind_lldb.Error as e:
        print("ERR %s %s" % (label, json.dumps(str(e))))
    except Exception as e:
        print("ERR %s wrong %s: %s" % (label, type(e).__name__, e))
import json
def run(debugger):
    attempt("sample", lambda: pyunwind_lldb.sample(debugger, duration=1))
    attempt("add", lambda: pyunwind_lldb.Profile(debugger).add_sample())
    attempt("mode", lambda: pyunwind_lldb.sample(debugger, mode="bogus"))
    attempt("format", lambda: pyunwind_lldb.Profile(debugger).write(
        format="bogus"))
    attempt("thread", lambda: pyunwind_lldb.Profile(debugger).add_sample(
        "x"))
    p = pyunwind_lldb.Profile(debugger)
    try:
        print("CORE-ADD", p.add_sample(), p.data()["total"])
    except pyunwind_lldb.Error as e:
        print("CORE-ADD", json.dumps(str(e)))
"""


def errors(tr):
    """{label: the Error's message, or None when it raised nothing}; any
    other exception fails."""
    got = dict(re.findall(r"^ERR (\w+) (.*)$", tr.text, re.M))
    assert len(got) == 5, tr.text[-2000:]
    for label, msg in got.items():
        assert not msg.startswith("wrong"), (label, msg)
        got[label] = None if msg == "none" else json.loads(msg)
        assert got[label] is None or (got[label] and "\n" not in
                                      got[label]), (label, msg)
    return got


def test_errors_without_a_process(tmp_path):
    load = script(tmp_path, "errs", ERRORS)
    tr = lldb.run(["script errs.run(lldb.debugger)"],
                  setup=["command script import " + MODULE, load])
    clean(tr)
    got = errors(tr)
    assert got["sample"].startswith("no process:"), got
    assert got["add"].startswith("no process:"), got
    assert "'bogus' is not a mode" in got["mode"], got
    assert "bogus" in got["format"], got
    assert "--thread" in got["thread"], got


def test_errors_on_a_core(tmp_path):
    python = py315()
    t = Target(python, "split.py", str(tmp_path), expect_threads=False)
    try:
        core = t.gcore()
    finally:
        t.close()
    load = script(tmp_path, "errs", ERRORS)
    tr = lldb.run(["script errs.run(lldb.debugger)"],
                  setup=["command script import " + MODULE, load,
                         "target create %s --core %s" % (python, core)])
    clean(tr)
    got = errors(tr)
    assert got["sample"] == ("a core file holds one moment of the process, "
                             "there is nothing to sample: py-dump reads it")
    assert "'bogus' is not a mode" in got["mode"], got
    assert "bogus" in got["format"], got
    assert "--thread" in got["thread"], got
    # a core has one moment to add: the selected thread's stack
    assert got["add"] is None
    assert re.search(r"^CORE-ADD 1 1$", tr.text, re.M), tr.text[-2000:]


def bare_lldb(commands):
    """lldb with no plugin loaded: only the commands given."""
    argv = [LLDB, "-x", "--no-use-colors", "-b"]
    for c in commands:
        argv += ["-o", c]
    return subprocess.run(argv, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                          text=True, errors="replace", timeout=TIMEOUT)


PROBE = ("script print('TOTAL', pyunwind_lldb.Profile().data()['total'], "
         "lldb.debugger.GetCommandInterpreter().UserCommandExists("
         "'py-profile'))")


def test_plugin_found_from_the_module(tmp_path):
    """`command script import pyunwind_lldb.py` alone loads the plugin:
    next to the module (the build tree; `cmake --install` puts both in
    PREFIX/lib/pyunwind), or in ../lib/pyunwind.  Without it, one line."""
    r = bare_lldb(["command script import " + MODULE, "help py-profile",
                   PROBE])
    assert r.returncode == 0 and "TOTAL 0 True" in r.stdout, r.stdout
    assert "py-profile sample" in r.stdout
    # installed: both in PREFIX/lib/pyunwind
    if os.path.exists(os.path.join(PLUGINS, "cmake_install.cmake")):
        prefix = tmp_path / "prefix"
        r = subprocess.run(["cmake", "--install", PLUGINS, "--prefix",
                            str(prefix)], capture_output=True, text=True,
                           timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        r = bare_lldb(["command script import %s/lib/pyunwind/"
                       "pyunwind_lldb.py" % prefix, PROBE])
        assert r.returncode == 0 and "TOTAL 0 True" in r.stdout, r.stdout
    # PREFIX/share/x/pyunwind_lldb.py and PREFIX/share/lib/pyunwind
    layout = tmp_path / "share"
    (layout / "x").mkdir(parents=True)
    (layout / "lib" / "pyunwind").mkdir(parents=True)
    shutil.copy(MODULE, layout / "x" / "pyunwind_lldb.py")
    os.symlink(LLDB_PLUGIN, layout / "lib" / "pyunwind" /
               "libpyunwind-lldb.so")
    r = bare_lldb(["command script import %s" % (layout / "x" /
                                                 "pyunwind_lldb.py"), PROBE])
    assert r.returncode == 0 and "TOTAL 0 True" in r.stdout, r.stdout
    # no plugin anywhere: one line on import, then Error
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(MODULE, alone / "pyunwind_lldb.py")
    r = bare_lldb(["command script import %s" % (alone / "pyunwind_lldb.py"),
                   "script exec('try:\\n pyunwind_lldb.Profile().data()"
                   "\\nexcept pyunwind_lldb.Error as e:\\n "
                   "print(\"ERROR\", e)')"])
    assert "Traceback" not in r.stdout, r.stdout
    lines = [l for l in r.stdout.splitlines() if "cannot find" in l]
    assert lines and lines[0].startswith(
        "error: pyunwind_lldb: cannot find libpyunwind-lldb.so"), r.stdout
    assert re.search(r"^ERROR cannot find libpyunwind-lldb.so", r.stdout,
                     re.M), r.stdout
