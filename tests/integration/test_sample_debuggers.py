"""py-sample and the sampling API inside the real gdb and lldb: a window on
a live process (the split its clock-sliced loops make, as `pyunwind sample`
finds it), a core refused in one line, a window a breakpoint ends early,
and a profile fed from a gdb.Breakpoint's stop() whose total equals the
hits the script counted itself."""

import json
import os
import re
import signal
import subprocess

import pytest

import conftest

from conftest import (PYUNWIND, RUNNING, TARGETS, TIMEOUT, Target,
                      interpreters, matrix, pyunwind, until_shown, wait_until)
from debuggers import (DEBUGGERS, GDB_SCRIPT, LLDB, LLDB_PLUGIN,
                       ForeignServer, Gdb, Lldb, Server, process_state)
from test_opcodes import check_instrs
from test_sample import assert_split, calls, collapsed, enough

pytestmark = pytest.mark.debugger
PYTHONS = interpreters()
SOME = [p for p in PYTHONS if p[0] in ("3.11.2-debian", matrix("3.13"),
                                       matrix("3.14t"), "3.15.2-debian")]
gdb = Gdb()


def py315():
    """The stripped 3.15 interpreter (these tests need one 3.15)."""
    return conftest.py315(PYTHONS)


@pytest.fixture(autouse=True)
def plugin():
    if not os.path.exists(GDB_SCRIPT):
        pytest.fail("the gdb plugin is not built (scripts/setup builds it)")


@pytest.fixture(params=DEBUGGERS, ids=[d.name for d in DEBUGGERS])
def dbg(request):
    if request.param.name == "lldb" and not (LLDB and
                                             os.path.exists(LLDB_PLUGIN)):
        pytest.fail("the lldb plugin is not built (scripts/setup builds it)")
    return request.param


def clean(tr, dumped=False):
    """No Python exception, internal error or failure in the transcript
    (dumped: a py-dump in it prints Python's own "Traceback" lines, so
    only gdb's and lldb's marks of a Python exception are looked for)."""
    for mark in ("Python Exception", "Error occurred in Python",
                 "Traceback (most recent call last)", "internal error",
                 "A fatal error internal to GDB"):
        if dumped and mark.startswith("Traceback"):
            continue
        assert mark not in tr.text, tr.text[-3000:]
    assert tr.proc.returncode == 0, tr.text[-3000:]


@pytest.mark.parametrize("label,python", SOME, ids=[p[0] for p in SOME])
def test_window_on_a_live_process(dbg, label, python, tmp_path):
    t = Target(python, "split.py", str(tmp_path), expect_threads=False)
    try:
        out = tmp_path / "dbg.txt"
        setup, args, teardown = dbg.attach(t.pid)
        select = "thread 2" if dbg.name == "gdb" else "thread select 2"
        roles = t.truth["roles"]
        main = []

        def window(_):  # (windows until the split can be judged)
            tr = dbg.run([select, dbg.selection(),
                          "py-sample -d 1.5 --format collapsed -o %s" % out,
                          dbg.selection(), *teardown], args, setup=setup)
            clean(tr)
            # the selected thread and frame are as they were
            sel = [o for c, o in zip(tr.commands, tr.outputs)
                   if c == dbg.selection()]
            assert None not in sel, tr.text[-2000:]
            # (lldb may print its own notice of the stop first)
            where = [re.findall(r"^\s*(selected .*|frame #0: .*?)\s*$", o,
                                re.M)[-1:] for o in sel]
            assert where[0] and where[0] == where[1], sel
            assert "samples in" in tr["py-sample"]
            got = collapsed(out.read_text())
            assert roles["sleeper"] in got
            main.extend(got[roles["main"]])
            return enough(main, 0.1) and got
        got = until_shown(window)
        assert_split(main, tolerance=0.1)
        # the CLI on the same process: the same stacks, the same format
        cli = collapsed(pyunwind("sample", "-d", "1", "--format",
                                 "collapsed", str(t.pid)).stdout)
        names = lambda g, tid: {";".join(f) for f, _ in g[tid]}
        assert names(got, roles["sleeper"]) == names(cli, roles["sleeper"])
        assert process_state(t.pid) in RUNNING  # running again after detach
    finally:
        t.close()


def test_scripted_window(tmp_path):
    python = py315()
    t = Target(python, "split.py", str(tmp_path), expect_threads=False)
    try:
        path = tmp_path / "stacks.json"
        main = []

        def window(_):  # (windows until the split can be judged)
            tr = gdb.run([
                "python p = pyunwind_gdb.sample(duration=1)",
                "python import json; json.dump(p.stacks(), open(%r, 'w'))"
                % str(path),
                "python print('ended', p.ended)",
                "detach"], ["-p", str(t.pid)])
            clean(tr)
            assert "ended None" in tr.text
            stacks = json.loads(path.read_text())
            main.extend((["x:%s:%d" % (f, l) for f, _, l in fr], n)
                        for tid, fr, n in stacks
                        if tid == t.truth["roles"]["main"])
            return enough(main, 0.1)
        until_shown(window)
        assert_split(main, tolerance=0.1)
    finally:
        t.close()


def test_breakpoint_driven_profile(tmp_path):
    """A breakpoint on getppid() whose stop() adds a sample of the thread
    that hit it: the profile's total equals the hits counted, and the two
    callers appear in the proportion the program calls them."""
    python = py315()
    out = tmp_path / "profile.json"
    script = tmp_path / "count.py"
    script.write_text("""
import gdb, pyunwind_gdb
profile = pyunwind_gdb.Profile()
hits = 0
class Count(gdb.Breakpoint):
    def stop(self):
        global hits
        hits += 1
        profile.add_sample()
        return False
Count("getppid")
gdb.execute("run")
profile.close()
profile.write(%r, "json")
print("HITS", hits)
""" % str(out))
    tr = gdb.run(["source %s" % script],
                 ["--args", python, os.path.join(TARGETS, "calls.py"),
                  "30", "10"], setup=["set breakpoint pending on"])
    clean(tr)
    hits = int(re.search(r"HITS (\d+)", tr.text).group(1))
    p = json.loads(out.read_text())
    assert hits >= 40 and p["total"] == hits
    def total(fn):
        k = [i for i, f in enumerate(p["functions"]) if f["name"] == fn]
        return sum(s["count"] for s in p["stacks"]
                   if any(p["frames"][x]["function"] in k
                          for x in s["frames"]))
    assert (total("often"), total("seldom")) == (30, 10)


def test_window_ended_by_a_breakpoint(tmp_path):
    python = py315()
    tr = gdb.run(["py-sample -d 30 --format collapsed",
                  "python print('frame', gdb.selected_frame().name())"],
                 ["--args", python, "-c",
                  "import os, time\n"
                  "os.getppid()\n"
                  "end = time.monotonic() + 0.5\n"
                  "while time.monotonic() < end: pass\n"
                  "os.getppid()\ntime.sleep(30)"],
                 setup=["set breakpoint pending on", "break getppid",
                        "run"])
    clean(tr)
    text = tr["py-sample"]
    assert "the window ended early: stopped at breakpoint 1" in text, text
    assert "samples in" in text
    assert "frame getppid" in tr.text  # stopped where the breakpoint is


def test_core_is_refused_in_one_line(dbg, tmp_path):
    python = py315()
    t = Target(python, "split.py", str(tmp_path), expect_threads=False)
    try:
        core = t.gcore()
    finally:
        t.close()
    setup, args, _ = dbg.core(python, core)
    alive = "print 40 + 2" if dbg.name == "gdb" else "version"
    tr = dbg.run(["py-sample -d 1", alive], args, setup=setup)
    text = tr["py-sample"]
    assert "py-sample: a core file holds one moment" in text, text
    assert len([l for l in text.splitlines() if l.strip()]) == 1, text
    assert ("= 42" if dbg.name == "gdb" else "lldb version") in tr[alive]


def test_output_that_cannot_be_written_is_refused_first(dbg, tmp_path):
    """py-sample -o into a directory that does not exist: the one-line
    error before the first sample (no window of 30 s lost), the debugger
    still attached."""
    t = Target(py315(), "split.py", str(tmp_path), expect_threads=False)
    try:
        setup, args, teardown = dbg.attach(t.pid)
        bad = str(tmp_path / "no" / "such" / "profile.txt")
        alive = "print 40 + 2" if dbg.name == "gdb" else "version"
        tr = dbg.run(["py-sample -d 30 -o %s" % bad, alive, *teardown],
                     args, setup=setup)
        text = tr["py-sample"]
        assert "cannot write %s: No such file or directory" % bad in text, \
            text
        assert "samples in" not in text, text
        assert len([l for l in text.splitlines() if l.strip()]) == 1, text
        assert ("= 42" if dbg.name == "gdb" else "lldb version") in tr[alive]
    finally:
        t.close()


def check_ticks(text, truth, debugger):
    """The profile a remote window wrote (collapsed), stopped by the
    debugger at each tick: one stack of the main thread per tick served,
    each a call from main(), nearly all in the busy functions; the ticks
    asked for are all accounted for.  Returns (samples, missed)."""
    m = re.search(r"pyunwind: (\d+) samples in ([\d.]+) s .* (\d+) "
                  r"missed of (\d+) ticks.*stopped by %s at each tick"
                  % debugger, text)
    assert m, text
    samples, missed, ticks = int(m.group(1)), int(m.group(3)), \
        int(m.group(4))
    # the schedule asked for about 100 ticks: those not served are
    # counted as missed, not dropped (how many are served is the
    # debugger's round trips', which a loaded machine slows: the callers
    # take windows until one has served 3)
    assert samples + missed == ticks, text
    assert 50 <= ticks <= 200, text
    got = collapsed("\n".join(l for l in text.splitlines()
                              if l.startswith("tid:")))
    main = got[truth["roles"]["main"]]
    assert sum(n for _, n in main) == samples
    # stopped anywhere: in three() or one() nearly always, in main()
    # between two calls now and then
    assert all(calls(f, "main") for f, _ in main), main
    busy = sum(n for f, n in main if calls(f, "three") or calls(f, "one"))
    assert busy >= samples * 0.8, main
    # the sleeper sleeps at every stop
    assert sum(n for _, n in got[truth["roles"]["sleeper"]]) == samples
    return samples, missed


def test_lldb_remote_process_is_sampled_tick_by_tick(tmp_path):
    """Over gdb-remote pyunwind cannot read the process itself: lldb stops
    it at each tick, a sample is read through lldb's memory, and it runs
    on; the rate those round trips allow is reported."""
    if not (LLDB and os.path.exists(LLDB_PLUGIN)):
        pytest.fail("the lldb plugin is not built (scripts/setup builds it)")
    lldb = Lldb()
    t = Target(py315(), "split.py", str(tmp_path), expect_threads=False)

    def window(_):  # (until a window has served 3 ticks)
        server = Server(lldb, t.pid)
        try:
            setup, args, teardown = lldb.remote(server.port)
            tr = lldb.run(["py-sample -d 1 -r 100 --format collapsed",
                           *teardown], args, setup=setup)
            clean(tr)
            samples, missed = check_ticks(tr["py-sample"], t.truth, "lldb")
            assert missed > 0  # (lldb's round trips are slower than 100 Hz)
        finally:
            server.close()
        assert process_state(t.pid) in RUNNING
        return samples >= 3
    try:
        until_shown(window)
    finally:
        t.close()


def test_gdb_remote_process_is_sampled_tick_by_tick(tmp_path):
    """gdbserver in a pid namespace of its own, attached to a program
    that leads its process group: from gdb the process is on another
    machine.  gdb stops it at each tick by the remote protocol's
    interrupt on its own connection, one sample is read through gdb's
    memory, and it runs on; gdb's lines about the stops are not shown,
    and py-dump, the selected frame and the process are as before."""
    def window(k):  # (until a window has served 3 ticks)
        work = tmp_path / str(k)  # (a fresh truth file each time)
        work.mkdir()
        server = ForeignServer(py315(), "split.py", str(work), leader=True)
        try:
            setup, args, teardown = gdb.remote(server.port)
            where = ("python print('selected', gdb.selected_thread().num, "
                     "gdb.selected_frame().level())")
            tr = gdb.run(["thread 2", "frame 1",
                          "py-sample -d 1 -r 100 --format collapsed", where,
                          "py-dump --no-source", *teardown], args,
                         setup=setup)
            clean(tr, dumped=True)
            samples, _ = check_ticks(
                tr["py-sample -d 1 -r 100 --format collapsed"],
                server.truth, "gdb")
            assert "received signal" not in tr.text, tr.text[-2000:]
            assert "selected 2 1" in tr[where], tr.text[-2000:]
            assert "in main" in tr["py-dump --no-source"]
            assert server.proc.poll() is None or \
                server.proc.returncode == 0
        finally:
            server.close()
        return samples >= 3
    until_shown(window)


def test_gdb_remote_process_of_this_machine_is_sampled(tmp_path):
    """gdbserver --attach to a program that does not lead its process
    group: gdbserver's interrupt signals the group and cannot stop it
    (sourceware bug 18945).  The process is this machine's own (the same
    pid, group and start time here), so a SIGINT from here stops it at
    each tick, and gdb sees the stop through gdbserver."""
    t = Target(py315(), "split.py", str(tmp_path), expect_threads=False)
    assert os.getpgid(t.pid) != t.pid

    def window(_):  # (until a window has served 3 ticks)
        server = Server(gdb, t.pid)
        try:
            setup, args, teardown = gdb.remote(server.port)
            tr = gdb.run(["py-sample -d 1 -r 100 --format collapsed",
                          *teardown], args, setup=setup)
            clean(tr)
            samples, _ = check_ticks(
                tr["py-sample -d 1 -r 100 --format collapsed"], t.truth,
                "gdb")
            assert "received signal" not in tr.text, tr.text[-2000:]
        finally:
            server.close()
        assert process_state(t.pid) in RUNNING
        return samples >= 3
    try:
        until_shown(window)
    finally:
        t.close()


def test_lldb_blocking_stops_at_each_tick(tmp_path):
    """--blocking in lldb: lldb stops the process for every sample."""
    if not (LLDB and os.path.exists(LLDB_PLUGIN)):
        pytest.fail("the lldb plugin is not built (scripts/setup builds it)")
    lldb = Lldb()
    t = Target(py315(), "split.py", str(tmp_path), expect_threads=False)
    try:
        setup, args, teardown = lldb.attach(t.pid)
        tr = lldb.run(["py-sample --blocking -d 1 -r 50 --format collapsed",
                       *teardown], args, setup=setup)
        clean(tr)
        text = tr["py-sample"]
        assert "stopped by lldb at each tick" in text, text
        got = collapsed("\n".join(l for l in text.splitlines()
                                  if l.startswith("tid:")))
        assert got[t.truth["roles"]["main"]]
        assert process_state(t.pid) in RUNNING
    finally:
        t.close()


def test_gdb_blocking_stops_at_each_tick(tmp_path):
    """--blocking in gdb: gdb stops the process for every sample (a thread
    of the extension sends SIGINT at each tick), one sample of the stopped
    process is read, and it runs on; gdb's own lines about those stops are
    not shown, and the inferior runs again after detach."""
    t = Target(py315(), "split.py", str(tmp_path), expect_threads=False)

    # (until a window has served 10 ticks: how many it serves is gdb's
    # round trips', which a loaded machine slows)
    def window(_):
        tr = gdb.run(["py-sample --blocking -d 1 -r 50 --format collapsed",
                      "print 40 + 2", "detach"], ["-p", str(t.pid)])
        clean(tr)
        text = tr["py-sample"]
        m = re.search(r"pyunwind: (\d+) samples in ([\d.]+) s .* (\d+) "
                      r"missed of (\d+) ticks.*stopped by gdb at each tick",
                      text)
        assert m, text
        samples, ticks = int(m.group(1)), int(m.group(4))
        assert 25 <= ticks <= 100, text
        assert "received signal" not in tr.text, tr.text[-2000:]
        got = collapsed("\n".join(l for l in text.splitlines()
                                   if l.startswith("tid:")))
        main = got[t.truth["roles"]["main"]]
        # one stack per stop of the main thread, each a call from main()
        assert sum(n for _, n in main) == samples
        assert all(calls(f, "main") for f, _ in main), main
        # the sleeper sleeps at every stop
        assert sum(n for _, n in got[t.truth["roles"]["sleeper"]]) == samples
        assert "= 42" in tr["print 40 + 2"]
        assert process_state(t.pid) in RUNNING
        return samples >= 10
    try:
        until_shown(window)
    finally:
        t.close()


def test_gdb_window_end_is_quiet(tmp_path):
    """The SIGINT that ends a window is the sampler's: gdb's "received
    signal SIGINT" line and frame for it are not shown; a scripted window
    ends the same way."""
    t = Target(py315(), "split.py", str(tmp_path), expect_threads=False)
    try:
        tr = gdb.run(["py-sample -d 0.3 --format top --limit 3",
                      "python p = pyunwind_gdb.sample(duration=0.3, "
                      "blocking=True, rate=100)",
                      "python print('samples', p.data()['samples'], "
                      "p.ended)",
                      "detach"], ["-p", str(t.pid)])
        clean(tr)
        assert "received signal" not in tr.text, tr.text[-2000:]
        assert "samples in" in tr["py-sample -d 0.3 --format top --limit 3"]
        m = re.search(r"samples (\d+) None", tr.text)
        assert m and int(m.group(1)) > 0, tr.text[-2000:]
    finally:
        t.close()


def test_gdb_remote_process_that_cannot_be_stopped_is_refused(tmp_path):
    """On "another machine" (a pid namespace) and not leading its process
    group, nothing gdb has can stop the process at a tick: py-sample says
    why in one line, before running it, and the connection is as it was
    (py-dump still works through it)."""
    server = ForeignServer(py315(), "split.py", str(tmp_path),
                           leader=False)
    try:
        setup, args, teardown = gdb.remote(server.port)
        tr = gdb.run(["py-sample -d 1", "py-dump --no-source", *teardown],
                     args, setup=setup)
        clean(tr, dumped=True)
        out = tr["py-sample -d 1"]
        assert re.search(r"^py-sample: gdbserver cannot interrupt process "
                         r"\d+: it does not lead its process group .*"
                         r"18945", out, re.M), out
        assert len(out.strip().splitlines()) == 1, out
        assert "in main" in tr["py-dump --no-source"]
    finally:
        server.close()


def test_lldb_breakpoint_driven_profile(tmp_path):
    """The same in lldb's embedded Python: a breakpoint callback on
    getppid() that counts its hits and runs `py-profile add`; the profile
    written at the end holds exactly those hits, 30 and 10."""
    if not (LLDB and os.path.exists(LLDB_PLUGIN)):
        pytest.fail("the lldb plugin is not built (scripts/setup builds it)")
    lldb = Lldb()
    module = tmp_path / "count_writes.py"
    module.write_text("""
import lldb
hits = 0
def on_hit(frame, bp_loc, extra_args, internal_dict):
    global hits
    hits += 1
    ret = lldb.SBCommandReturnObject()
    frame.GetThread().GetProcess().GetTarget().GetDebugger() \\
        .GetCommandInterpreter().HandleCommand("py-profile add", ret)
    if not ret.Succeeded():
        print("ADD FAILED", ret.GetError())
    return False
""")
    out = tmp_path / "profile.json"
    tr = lldb.run(["script print('HITS', count_writes.hits)",
                   "py-profile write --format json -o %s" % out],
                  setup=["command script import %s" % module,
                         "target create " + py315(),
                         "breakpoint set -n getppid",
                         "breakpoint command add -F count_writes.on_hit 1",
                         "process launch -i /dev/null -- %s 30 10"
                         % os.path.join(TARGETS, "calls.py")])
    clean(tr)
    assert "ADD FAILED" not in tr.text, tr.text[-2000:]
    hits = int(re.search(r"HITS (\d+)", tr.text).group(1))
    p = json.loads(out.read_text())
    assert hits >= 40 and p["total"] == hits
    def total(fn):
        k = [i for i, f in enumerate(p["functions"]) if f["name"] == fn]
        return sum(st["count"] for st in p["stacks"]
                   if any(p["frames"][x]["function"] in k
                          for x in st["frames"]))
    assert (total("often"), total("seldom")) == (30, 10)


ANCHORS = """python
t = gdb.parse_and_eval("_PyRuntime.interpreters.head.threads.head")
while int(t) != 0:
    print("anchor", int(t["native_thread_id"]), int(t["last_profiled_frame"]))
    t = t["next"]
end"""


def anchors(pid, tmp_path):
    """last_profiled_frame of every thread, as gdb reads it from a debug
    build's own symbols (truth from outside pyunwind)."""
    script = tmp_path / "anchors.gdb"
    script.write_text(ANCHORS + "\n")
    tr = gdb.run(["source %s" % script, "detach"], ["-p", str(pid)])
    got = [int(v) for v in re.findall(r"^anchor \d+ (\d+)$", tr.text, re.M)]
    assert got, tr.text[-2000:]
    return got


def test_anchors_written_while_sampling_and_cleared_after(tmp_path):
    """The one write: while `pyunwind sample` runs, threads carry an anchor
    (last_profiled_frame); when it ends, every one is 0 again.  With
    --read-only none is ever written."""
    dbg_python = [p for l, p in PYTHONS
                  if l.startswith("3.15") and l.endswith("-dbg")]
    if not dbg_python:
        pytest.skip("no 3.15 debug build among the selected interpreters")
    t = Target(dbg_python[0], "split.py", str(tmp_path),
               expect_threads=False)
    try:
        assert set(anchors(t.pid, tmp_path)) == {0}
        r = pyunwind("sample", "-d", "1", "--read-only", "--format",
                     "collapsed", "-o", os.devnull, str(t.pid))
        assert r.returncode == 0, r.stderr
        assert set(anchors(t.pid, tmp_path)) == {0}
        # (a run that goes on until the anchors are seen, however long a
        # loaded machine takes to start it, then is interrupted)
        p = subprocess.Popen([PYUNWIND, "sample", "--verbose",
                              "--format", "collapsed", "-o", os.devnull,
                              str(t.pid)], stderr=subprocess.PIPE, text=True)
        try:
            during = []

            def written():
                during[:] = anchors(t.pid, tmp_path)
                return any(during)
            wait_until(written, "an anchor while sampling")
            p.send_signal(signal.SIGINT)
            err = p.communicate(timeout=TIMEOUT)[1]
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0, err
        assert any(during), during
        assert re.search(r"anchors on, [1-9]\d* written", err), err
        assert set(anchors(t.pid, tmp_path)) == {0}
    finally:
        t.close()


def test_opcodes_in_the_window(dbg, tmp_path):
    """py-sample --opcodes in gdb and lldb: the json names, for busy()'s
    loop, several instructions, each the target's own (its dis)."""
    python = py315()
    t = Target(python, "split.py", str(tmp_path), expect_threads=False)
    try:
        out = tmp_path / "ops.json"
        setup, args, teardown = dbg.attach(t.pid)
        tr = dbg.run(["py-sample -d 1 --opcodes --format json -o %s" % out,
                      *teardown], args, setup=setup)
        clean(tr)
        data = json.loads(out.read_text())
    finally:
        t.close()
    counts = check_instrs(data, t.truth["file"], python)
    assert len([k for k in counts if k[0] == "busy"]) >= 3, counts


def test_scripted_stacks_with_opcodes(dbg, tmp_path):
    """A scripted window with opcodes: Profile.stacks() gives each thread's
    stack once (its instructions and statuses summed), as the same
    profile's collapsed output has it, in gdb's module and lldb's."""
    t = Target(py315(), "split.py", str(tmp_path), expect_threads=False)
    out = tmp_path / "stacks.json"
    main = []

    def window(_):  # (windows until the split can be judged)
        setup, args, teardown = dbg.attach(t.pid)
        if dbg.name == "gdb":
            cmds = ["python import json, pyunwind_gdb",
                    "python p = pyunwind_gdb.sample(duration=1, opcodes=True)",
                    "python json.dump([p.stacks(), p.write(format="
                    "'collapsed'), p.data()], open(%r, 'w'))" % str(out)]
        else:
            module = os.path.join(os.path.dirname(LLDB_PLUGIN),
                                  "pyunwind_lldb.py")
            setup = setup + ["command script import " + module]
            cmds = ["script import json",
                    "script p = pyunwind_lldb.sample(lldb.debugger, "
                    "duration=1, opcodes=True)",
                    "script json.dump([p.stacks(), p.write(format="
                    "'collapsed'), p.data()], open(%r, 'w'))" % str(out)]
        tr = dbg.run([*cmds, *teardown], args, setup=setup)
        clean(tr)
        stacks, text, data = json.loads(out.read_text())
        # the profile does tell instructions apart
        assert any(fr.get("instr", -1) >= 0 for fr in data["frames"])
        keys = [(tid, tuple(map(tuple, frames))) for tid, frames, _ in stacks]
        assert len(keys) == len(set(keys)), "a stack listed twice"
        want = collapsed(text)
        got = {}
        for tid, frames, n in stacks:
            got.setdefault(tid, []).append((
                ["%s:%s:%d" % (os.path.basename(f), fn, line)
                 for fn, f, line in frames], n))
        key = lambda st: (st[0], st[1])
        assert {tid: sorted(v, key=key) for tid, v in got.items()} == \
            {tid: sorted(v, key=key) for tid, v in want.items()}
        main.extend(got[t.truth["roles"]["main"]])
        return enough(main, 0.1)
    try:
        until_shown(window)
    finally:
        t.close()
    assert_split(main, tolerance=0.1)


def test_raw_capture_streamed_from_the_window(dbg, tmp_path):
    """py-sample --format raw -o FILE streams the capture while the window
    samples, as the CLI does: a window that ends leaves a whole capture;
    with the debugger killed in the middle of a window, the file keeps the
    samples taken, which pyunwind report reads (noting the cut) and which
    show the target's split."""
    python = py315()
    t = Target(python, "split.py", str(tmp_path), expect_threads=False)
    try:
        whole = tmp_path / "whole.raw"
        setup, args, teardown = dbg.attach(t.pid)
        main = []

        def window(_):  # (windows until the split can be judged)
            tr = dbg.run(["py-sample -d 1 --format raw -o %s" % whole,
                          *teardown], args, setup=setup)
            clean(tr)
            r = pyunwind("report", str(whole), "--format", "collapsed")
            assert r.returncode == 0 and "ends early" not in r.stderr, \
                r.stderr
            main.extend(collapsed(r.stdout)[t.truth["roles"]["main"]])
            return enough(main, 0.1)
        until_shown(window)
        assert_split(main, tolerance=0.1)
        # the debugger killed in the middle of an hour's window, once the
        # capture holds 500 samples and the main thread's that judge the
        # split (the command among its arguments, so that pkill finds it
        # by the file's name)
        cut = tmp_path / ("cut-%s.raw" % dbg.name)
        command = "py-sample -d 3600 --format raw -o %s" % cut
        if dbg.name == "gdb":
            argv = ["gdb", "-nx", "-batch", "-ex", "source " + GDB_SCRIPT,
                    "-ex", command, "-p", str(t.pid)]
        else:
            argv = [LLDB, "-x", "--no-use-colors", "-o",
                    "plugin load " + LLDB_PLUGIN, "-o",
                    "process attach --pid %d" % t.pid, "-o", command]
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        def enough_so_far():
            if not cut.exists():
                return False
            r = pyunwind("report", str(cut), "--format", "json")
            if r.returncode != 0:  # (not even the header flushed yet)
                return False
            main = collapsed(pyunwind("report", str(cut), "--format",
                                      "collapsed").stdout)
            return json.loads(r.stdout)["samples"] > 500 and \
                enough(main.get(t.truth["roles"]["main"], []), 0.1)
        try:
            wait_until(enough_so_far, "500 samples in the capture")
        finally:
            p.kill()
            p.wait()
        r = pyunwind("report", str(cut), "--format", "json")
        assert r.returncode == 0, r.stderr
        assert "the capture ends early" in r.stderr, r.stderr
        data = json.loads(r.stdout)
        assert data["samples"] > 500, data["samples"]
        r = pyunwind("report", str(cut), "--format", "collapsed")
        assert_split(collapsed(r.stdout)[t.truth["roles"]["main"]],
                     tolerance=0.1)
    finally:
        t.close()
