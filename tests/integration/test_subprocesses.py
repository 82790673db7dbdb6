"""Several processes in one run: `dump PID PID...`, `tasks PID PID...` and
--subprocesses (a process and its descendants that run CPython), against a
tree of real processes built from the standard library (tests/targets/
tree.py: a fork Pool, spawn, forkserver, and a Python child behind
/bin/sh), each process against what it recorded itself."""
import contextlib
import json
import os
import signal
import subprocess

import pytest

from conftest import (TARGETS, Target, allow_core, assert_matches_truth,
                      interpreters, py315, pyunwind)

PYTHONS = interpreters()


@contextlib.contextmanager
def tree(python, workdir):
    """tests/targets/tree.py running under python: (pid, truth)."""
    truth_path = os.path.join(workdir, "truth.json")
    p = subprocess.Popen([python, os.path.join(TARGETS, "tree.py"),
                          truth_path], stdout=subprocess.PIPE, text=True,
                         start_new_session=True, preexec_fn=allow_core)
    try:
        assert p.stdout.readline() == "ready\n"
        with open(truth_path) as f:
            yield p.pid, json.load(f)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()


def main_functions(process):
    """The function names of the main thread's stack, innermost first."""
    main = [t for t in process["threads"] if t["main"]]
    assert len(main) == 1, process
    return [f["function"] for f in main[0]["frames"]]


@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_dump_subprocesses(label, python, workdir):
    """Every Python process of the tree, each under its pid, parked where
    it said it parked; the shell between two left out without a word;
    parents before their children."""
    with tree(python, workdir) as (pid, truth):
        r = pyunwind("dump", "--subprocesses", "--json", str(pid))
        assert r.returncode == 0 and r.stderr == "", r.stderr
        procs = json.loads(r.stdout)
        assert isinstance(procs, list)
        by_pid = {p["pid"]: p for p in procs}
        assert len(by_pid) == len(procs)
        assert procs[0]["pid"] == pid
        assert "parent_park" in main_functions(procs[0])
        for role in ("pool", "spawned", "forkserved", "shelled"):
            for child in truth[role]:
                assert child in by_pid, (role, child, sorted(by_pid))
                assert "%s_park" % role in main_functions(by_pid[child])
        assert truth["shell"] not in by_pid
        # (the others are multiprocessing's own: the forkserver, the
        # resource tracker; every one a descendant, each after its parent)
        order = [p["pid"] for p in procs]
        for p in procs[1:]:
            with open("/proc/%d/stat" % p["pid"]) as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            assert ppid == truth["shell"] or ppid in order[:order.index(
                p["pid"])], (p["pid"], ppid, order)
        # the text: each process's dump after the other
        r = pyunwind("dump", "--subprocesses", "--no-source", str(pid))
        assert r.returncode == 0, r.stderr
        heads = [line for line in r.stdout.splitlines()
                 if line.startswith("Process ")]
        assert [int(h.split()[1].rstrip(":")) for h in heads] == order


def test_several_pids_and_the_worst_exit(workdir):
    """dump PID PID: each process in the order given, the JSON an array of
    one object a process, each equal to what its target recorded itself; a PID that cannot be read is a line with its
    pid, the others are still dumped, and the exit status is the worst."""
    pys = [PYTHONS[0][1], py315(PYTHONS)]  # (3.11 and 3.15: a mix)
    targets = []
    try:
        for i, python in enumerate(pys):
            d = os.path.join(workdir, str(i))
            os.mkdir(d)
            targets.append(Target(python, "stacks.py", d))
        pids = [str(t.pid) for t in targets]
        r = pyunwind("dump", "--json", *pids)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        both = json.loads(r.stdout)
        assert [p["pid"] for p in both] == [t.pid for t in targets]
        for t, p in zip(targets, both):
            assert_matches_truth(p, t.truth)
        # a PID named again is read once, where it was first named
        r = pyunwind("dump", "--json", pids[1], pids[0], "0" + pids[1])
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert [p["pid"] for p in json.loads(r.stdout)] == \
            [targets[1].pid, targets[0].pid]
        r = pyunwind("dump", "--json", pids[0], pids[0])
        assert r.returncode == 0 and r.stderr == "", r.stderr
        assert_matches_truth(json.loads(r.stdout), targets[0].truth)
        r = pyunwind("sample", "-d", "0.5", "-r", "100", "--format",
                     "collapsed", pids[1], pids[1])
        assert r.returncode == 0, r.stderr
        assert "process" not in r.stderr.split("\n")[0], r.stderr
        # tasks of a 3.11 process (no tasks there: an error line) and a
        # 3.15 one: only the second's table, no blank line before it
        r = pyunwind("tasks", *pids)
        assert r.returncode == 4, r.stderr
        assert r.stderr.startswith("pyunwind: error: process %s: " % pids[0])
        assert r.stdout and not r.stdout.startswith("\n"), r.stdout
        sleeper = subprocess.Popen(["sleep", "300"])

        try:
            r = pyunwind("dump", pids[0], str(sleeper.pid), pids[1])
            assert r.returncode == 4, r.stderr
            lines = r.stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith(
                "pyunwind: error: process %d: " % sleeper.pid), r.stderr
            assert r.stdout.count("\nProcess ") + \
                r.stdout.startswith("Process ") == 2
            r = pyunwind("dump", "--json", pids[0], "1073741823")
            assert r.returncode == 3, r.stderr
            assert [p["pid"] for p in json.loads(r.stdout)] == [targets[0].pid]
            assert r.stderr.startswith("pyunwind: error: process 1073741823: ")
        finally:
            sleeper.kill()
            sleeper.wait()
    finally:
        for t in targets:
            t.close()


def test_tasks_of_subprocesses(workdir):
    """tasks --subprocesses: the asyncio tasks of a child, under its pid,
    each event loop's pending tasks as the child recorded them."""
    python = py315(PYTHONS)
    truth_path = os.path.join(workdir, "truth.json")
    code = ("import subprocess, sys\n"
            "c = subprocess.Popen([sys.executable, %r, %r],"
            " stdout=subprocess.PIPE, text=True)\n"
            "print(c.stdout.readline(), end='', flush=True)\n"
            "c.wait()\n" % (os.path.join(TARGETS, "tasks.py"), truth_path))
    p = subprocess.Popen([python, "-c", code], stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        assert p.stdout.readline() == "ready\n"
        r = pyunwind("tasks", "--subprocesses", "--json", str(p.pid))
        assert r.returncode == 0 and r.stderr == "", r.stderr
        procs = json.loads(r.stdout)
        assert [x["pid"] for x in procs][0] == p.pid and len(procs) == 2
        assert procs[0]["tasks"] == []
        with open(truth_path) as f:
            truth = json.load(f)["tasks_by_thread"]
        names = {}
        for t in procs[1]["tasks"]:
            names.setdefault(str(t["native_thread_id"]), set()).add(t["name"])
        assert truth and names == {tid: set(want)
                                   for tid, want in truth.items()}
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()


def test_usage(workdir):
    for args in (["dump", "--subprocesses", "--core", "x"],
                 ["dump", "--thread", "5", "1", "2"],
                 ["tasks", "--subprocesses", "--core", "x"],
                 ["dump", "1", "x"]):
        r = pyunwind(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (args, r)
