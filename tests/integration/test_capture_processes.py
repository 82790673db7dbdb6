"""Captures of several processes (docs/formats.md#raw): a --subprocesses
run over tests/targets/tree.py written as a capture (`--format raw`),
then read back by `pyunwind report`: every process of the tree under its
pid, parked where its truth file says; `--pid` keeps one; a process killed
during the run has its end in the report; the live view's P key; and a
capture of the format's previous version (tests/fixtures) still reads."""

import json
import os
import re
import select
import signal
import subprocess
import time

from conftest import (PYUNWIND, ROOT, TIMEOUT, interpreters, labelled,
                      pyunwind)
from test_subprocesses import tree

PYTHONS = interpreters()
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "capture-v3.raw")

# where each role of tree.py parks (its main thread's innermost function
# of the program's own)
PARKS = {"parent": "parent_park", "pool": "pool_park",
         "spawned": "spawned_park", "forkserved": "forkserved_park",
         "shelled": "shelled_park"}


def python314():
    return labelled(PYTHONS, "3.14.7", "3.14.7t")


def report(*args):
    r = pyunwind("report", *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def by_pid(text):
    """collapsed lines "pid:N;tid:M;frame;...;frame COUNT" as {pid: {tid:
    [(function names, count)]}} (pid None: lines without a pid level)."""
    out = {}
    for line in text.splitlines():
        stack, n = line.rsplit(" ", 1)
        parts = stack.split(";")
        pid = None
        if parts[0].startswith("pid:"):
            pid = int(parts.pop(0)[4:])
        assert parts[0].startswith("tid:"), line
        tid = int(parts[0][4:])
        funcs = [f.split(":")[1] for f in parts[1:]]
        out.setdefault(pid, {}).setdefault(tid, []).append((funcs, int(n)))
    return out


def roles_of(truth):
    """{pid: role} of every Python process of the tree."""
    roles = {truth["parent"]: "parent"}
    for role in ("pool", "spawned", "forkserved", "shelled"):
        for pid in truth[role]:
            roles[pid] = role
    return roles


def processes_of(path):
    """The report's processes of a capture, from the json format
    (docs/json.md#profiles): [{pid, command, python, start_ns, end_ns (None
    while it lived), ...}]."""
    return json.loads(report(path, "--format", "json"))["processes"]


def test_a_capture_of_a_tree(workdir):
    """sample --subprocesses --format raw of tree.py, then report: each
    role's pid with its own threads, its main thread parked where the role
    parks; the shell between two Pythons is not there; --pid keeps one
    process (its stacks alone, its header); a pid the capture lacks is a
    one-line error."""
    raw = os.path.join(workdir, "run.raw")
    with tree(python314(), workdir) as (pid, truth):
        r = pyunwind("sample", "--subprocesses", "-d", "2", "--format",
                     "raw", "-o", raw, str(pid))
        assert r.returncode == 0, r.stderr
    roles = roles_of(truth)
    got = by_pid(report(raw, "--format", "collapsed"))
    assert truth["shell"] not in got
    for child, role in roles.items():
        assert child in got, (role, child, sorted(got))
        # its main thread (native id = pid) parks where the role does
        main = got[child].get(child)
        assert main, (role, child, got[child].keys())
        parked = sum(n for funcs, n in main if PARKS[role] in funcs)
        assert parked >= 0.9 * sum(n for _, n in main), (role, main)
        # and no other process's park is in it
        others = set(PARKS.values()) - {PARKS[role]}
        assert not any(set(funcs) & others for funcs, _ in main), main
    # one process: a pool worker
    worker = truth["pool"][0]
    one = by_pid(report(raw, "--format", "collapsed", "--pid", str(worker)))
    assert list(one) == [None], one.keys()  # (one process: no pid level)
    assert list(one[None]) == [worker]
    assert all("pool_park" in funcs for funcs, _ in one[None][worker])
    assert sum(n for _, n in one[None][worker]) == \
        sum(n for _, n in got[worker][worker])
    top = report(raw, "--pid", str(worker))
    assert top.startswith("Process %d: CPython 3.14.7, wall mode, " % worker), \
        top[:200]
    assert top.splitlines()[1].endswith(" stacks from 1 thread"), top[:300]
    # a pid that is not in it
    r = pyunwind("report", raw, "--pid", "1")
    assert r.returncode == 2 and r.stdout == ""
    assert re.fullmatch(r"pyunwind: error: .*run\.raw: the capture has no "
                        r"process 1 \(its processes: %d, .*\)\n" % pid,
                        r.stderr), r.stderr


def test_a_process_that_exits_during_the_run(workdir):
    """A pool worker killed 1.5 s into a 4 s run: the report has its end,
    within the run and after its start, and the processes that lived on
    did not end; the worker the pool starts in its place is a process of
    its own, found during the run."""
    raw = os.path.join(workdir, "run.raw")
    with tree(python314(), workdir) as (pid, truth):
        worker = truth["pool"][0]
        run = subprocess.Popen([PYUNWIND, "sample", "--subprocesses", "-d",
                                "4", "--format", "raw", "-o", raw, str(pid)],
                               stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(1.5)
            killed_at = time.time()
            os.kill(worker, signal.SIGKILL)
            _, err = run.communicate(timeout=TIMEOUT)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        assert run.returncode == 0, err
    procs = processes_of(raw)
    mine = [p for p in procs if p["pid"] == worker]
    assert len(mine) == 1, procs
    ended = mine[0]
    assert ended["end_ns"] is not None, ended
    # (killed about 1.5 s in; the sampler sees it go at its next sample)
    assert 0.5e9 < ended["end_ns"] < 3.9e9, ended
    assert ended["end_ns"] > ended["start_ns"]
    lived = [p for p in procs if p["pid"] in roles_of(truth) and
             p["pid"] != worker]
    assert len(lived) == len(roles_of(truth)) - 1, procs
    assert all(p["end_ns"] is None for p in lived), lived
    # the pool's new worker: found during the run, sampled from then
    new = [p for p in procs if p["pid"] not in roles_of(truth) and
           p["start_ns"] > ended["end_ns"] - 0.1e9]
    assert new, (procs, killed_at)
    # the killed worker's samples end with it: --pid keeps fewer samples
    # than the run's
    head = report(raw, "--pid", str(worker)).splitlines()[0]
    samples = int(re.search(r"(\d+) samples", head).group(1))
    other = report(raw, "--pid", str(pid)).splitlines()[0]
    assert samples < 0.8 * int(re.search(r"(\d+) samples", other).group(1))


def test_a_version_3_capture_still_reads(workdir):
    """The committed capture of the format's version 3 (before processes
    were recorded; tests/fixtures/README.md says how it was made): report
    reads it as before, its one process the header's; --pid of that
    process keeps it all, of another is refused in one line."""
    want = {None: {16991: [(["Thread._bootstrap", "Thread._bootstrap_inner",
                             "Thread.run", "sleeper"], 20)],
                   16989: [(["<module>", "main", "three", "busy"], 15),
                           (["<module>", "main", "one", "busy"], 4),
                           (["<module>", "main", "three", "busy"], 1)]}}
    assert by_pid(report(FIXTURE, "--format", "collapsed")) == want
    assert by_pid(report(FIXTURE, "--format", "collapsed", "--pid",
                         "16989")) == want
    top = report(FIXTURE, "--pid", "16989")
    assert top.startswith("Process 16989: CPython 3.14.7, wall mode, 20 "
                          "samples in 0.10 s"), top
    r = pyunwind("report", FIXTURE, "--pid", "16990")
    assert r.returncode == 2
    assert r.stderr.endswith("the capture has no process 16990 (its "
                             "process: 16989)\n"), r.stderr
    # rewritten as a capture of today's version, the same
    again = os.path.join(workdir, "again.raw")
    report(FIXTURE, "--format", "raw", "-o", again)
    with open(again, "rb") as f:
        assert f.read(9) == b"PYUNWRAW\x04"
    assert by_pid(report(again, "--format", "collapsed")) == want


def test_live_view_steps_through_processes(workdir):
    """sample --live --subprocesses on a pty: the header offers [P]rocess
    and says "all N processes"; P shows the first process (the one named),
    P again the next, T then a thread of that process; q ends the run."""
    import pty
    out = os.path.join(workdir, "live.json")
    with tree(python314(), workdir) as (pid, truth):
        child, fd = pty.fork()
        if child == 0:
            os.execv(PYUNWIND, [PYUNWIND, "sample", "--subprocesses",
                                str(pid), "--live", "-d", "60", "--format",
                                "json", "-o", out])
        seen = b""

        def pump(seconds):
            nonlocal seen
            end = time.time() + seconds
            while time.time() < end:
                if select.select([fd], [], [], 0.05)[0]:
                    try:
                        seen += os.read(fd, 65536)
                    except OSError:
                        return
        try:
            pump(1.5)
            for key in (b"P", b"P", b"T", b"q"):
                os.write(fd, key)
                pump(0.8)
            pump(2)
            _, status = os.waitpid(child, 0)
        finally:
            os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0, seen[-2000:]
    views = seen.decode("utf-8", "replace").split("\x1b[H\x1b[2J")[1:]
    heads = [v.split("\n", 1)[0] for v in views]
    assert any(re.search(r"; all \d+ processes; all threads .*\[P\]rocess "
                         r"\[T\]hread", h) for h in heads), heads[:3]
    first = [h for h in heads if "; process %d; all threads" % pid in h]
    assert first, heads
    later = [re.search(r"; process (\d+); thread (\d+)", h) for h in heads]
    later = [m for m in later if m]
    assert later, heads
    shown, thread = int(later[-1].group(1)), int(later[-1].group(2))
    assert shown != pid, heads
    # the thread T chose is one of that process's: its main thread first
    assert thread == shown, (shown, thread)
    # the table under it: that process's stacks alone
    view = [v for v in views if "; process %d; thread %d" % (shown, thread)
            in v][-1]
    assert "from 1 thread\r" in view, view[:600]
