"""Captures of several processes (docs/formats.md#raw): a --subprocesses
run over tests/targets/tree.py written as a capture (`--format raw`),
then read back by `pyunwind report`: every process of the tree under its
pid, parked where its truth file says; `--pid` keeps one; a process killed
during the run has its end in the report; the live view's P key; and a
capture of the format's previous version (tests/fixtures) still reads."""

import json
import os
import re
import signal
import subprocess

from conftest import (OnPty, PYUNWIND, ROOT, Sampling, interpreters, labelled,
                      matrix, python_version, pyunwind, wait_until)
from test_subprocesses import tree

PYTHONS = interpreters()
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "capture-v3.raw")

# where each role of tree.py parks (its main thread's innermost function
# of the program's own)
PARKS = {"parent": "parent_park", "pool": "pool_park",
         "spawned": "spawned_park", "forkserved": "forkserved_park",
         "shelled": "shelled_park"}


def python314():
    return labelled(PYTHONS, matrix("3.14"), matrix("3.14t"))


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
    assert top.startswith("Process %d: CPython %s, wall mode, "
                          % (worker, python_version(python314()))), top[:200]
    assert top.splitlines()[1].endswith(" stacks from 1 thread"), top[:300]
    # a pid that is not in it
    r = pyunwind("report", raw, "--pid", "1")
    assert r.returncode == 2 and r.stdout == ""
    assert re.fullmatch(r"pyunwind: error: .*run\.raw: the capture has no "
                        r"process 1 \(its processes: %d, .*\)\n" % pid,
                        r.stderr), r.stderr


def test_a_process_that_exits_during_the_run(workdir):
    """A pool worker killed during a run: the report has its end, within
    the run and after its start, and the processes that lived on did not
    end; the worker the pool starts in its place is a process of its own,
    found during the run.  (The run's moments are its own, not the
    clock's: the worker is killed once the capture holds every process of
    the tree, and the run goes on until it holds the worker's end and its
    successor, and twice the worker's samples of the parent; then it is
    interrupted.)"""
    raw = os.path.join(workdir, "run.raw")

    def so_far():
        """The processes of the capture so far (a note says it is cut)."""
        r = pyunwind("report", raw, "--format", "json")
        return json.loads(r.stdout)["processes"] if r.returncode == 0 else []

    def samples_of(p):
        """Process p's samples in the capture so far."""
        r = pyunwind("report", raw, "--pid", str(p))
        m = re.search(r"(\d+) samples", r.stdout) if r.returncode == 0 \
            else None
        return int(m.group(1)) if m else 0
    with tree(python314(), workdir) as (pid, truth):
        worker = truth["pool"][0]
        with Sampling("--subprocesses", "--format", "raw", "-o", raw,
                      str(pid), stdout=subprocess.DEVNULL) as run:
            wait_until(lambda: set(roles_of(truth)) <=
                       {p["pid"] for p in so_far()}, "the tree's processes")
            before = {p["pid"] for p in so_far()}
            os.kill(worker, signal.SIGKILL)

            def after():
                procs = so_far()
                end = [p["end_ns"] for p in procs if p["pid"] == worker]
                return end and end[0] is not None and any(
                    p["pid"] not in before for p in procs)
            wait_until(after, "the worker's end and its successor")
            wait_until(lambda: samples_of(pid) >= 2 * samples_of(worker),
                       "the run to go on after the worker")
            code, _, err = run.finish(signal.SIGINT)
        assert code == 0, err
    procs = processes_of(raw)
    mine = [p for p in procs if p["pid"] == worker]
    assert len(mine) == 1, procs
    ended = mine[0]
    assert ended["end_ns"] is not None, ended
    # (the sampler sees it go at its next sample, within the run)
    assert ended["end_ns"] < json.loads(report(
        raw, "--format", "json"))["duration_ns"], ended
    assert ended["end_ns"] > ended["start_ns"]
    lived = [p for p in procs if p["pid"] in roles_of(truth) and
             p["pid"] != worker]
    assert len(lived) == len(roles_of(truth)) - 1, procs
    assert all(p["end_ns"] is None for p in lived), lived
    # the pool's new worker: found during the run, sampled from then
    new = [p for p in procs if p["pid"] not in before and
           p["start_ns"] > ended["end_ns"] - 0.1e9]
    assert new, (procs, before)
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
    out = os.path.join(workdir, "live.json")
    with tree(python314(), workdir) as (pid, truth):
        tty = OnPty([PYUNWIND, "sample", "--subprocesses", str(pid),
                     "--live", "-d", "3600", "--format", "json", "-o", out])
        # each key once the view before it is drawn, as a person presses
        # them (a loaded machine draws later)
        heads = lambda views: [v.split("\n", 1)[0] for v in views]
        try:
            tty.wait_for(lambda views: any("; all " in h and " processes; "
                                           in h for h in heads(views)),
                         "the view of all processes")
            tty.key(b"P")
            tty.wait_for(lambda views: any(
                "; process %d; all threads" % pid in h
                for h in heads(views)), "the first process's view")
            tty.key(b"P")
            tty.wait_for(lambda views: any(
                re.search(r"; process (?!%d;)\d+; all threads" % pid, h)
                for h in heads(views)), "the next process's view")
            tty.key(b"T")
            tty.wait_for(lambda views: any(
                re.search(r"; process \d+; thread \d+", h)
                for h in heads(views)), "a thread's view")
            tty.key(b"q")
            status = tty.end()
        finally:
            tty.close()
    seen = tty.seen
    assert os.waitstatus_to_exitcode(status) == 0, seen[-2000:]
    views = tty.views()
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
