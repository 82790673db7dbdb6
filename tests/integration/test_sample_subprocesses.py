"""pyunwind sample of several processes: PID PID... and --subprocesses, one
profile with the process in it (collapsed's pid: level), against real
process trees built from the standard library: tests/targets/tree.py
(fork Pool, spawn, forkserver, a Python child behind /bin/sh) and
tests/targets/workers.py (ProcessPoolExecutor workers with a known split
of their time, measured by each worker itself; a parent that exits before
its workers; 200 short-lived children a second).  Truth comes from the
targets: the pids they wrote, the time each worker measured."""
import collections
import contextlib
import json
import os
import re
import signal
import subprocess

import pytest

from conftest import (PYUNWIND, RUNNING, Sampling, TARGETS, TIMEOUT,
                      interpreters, matrix, pyunwind, samples_for, until_shown,
                      wait_until)
from debuggers import DEBUGGERS, Server, require_plugin
from test_sample import state_of
from test_subprocesses import tree

PYTHONS = interpreters()
BY_LABEL = dict(PYTHONS)
LINE = re.compile(r"^pid:(\d+);tid:(\d+)((?:;[^;]*)*) (\d+)$")
# the start methods, one an interpreter (each method on some version)
SPLITS = [(label, method) for label, method in (
    ("3.11.2-debian", "fork"), (matrix("3.13"), "spawn"),
    (matrix("3.13t"), "fork"),
    (matrix("3.14"), "forkserver"), (matrix("3.14t"), "spawn"),
    ("3.15.2-debian", "forkserver")) if label in BY_LABEL]


def by_process(text):
    """{pid: {native thread id: [(function names outermost first, count)]}}
    of a collapsed profile of several processes."""
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    for line in text.splitlines():
        m = LINE.match(line)
        assert m, "not a collapsed line of several processes: %r" % line
        names = [f.split(":")[1] for f in m.group(3).split(";")[1:]
                 if f.count(":") >= 2]
        out[int(m.group(1))][int(m.group(2))].append((names, int(m.group(4))))
    return out


def leaves(threads, tid):
    """{innermost function: samples} of one thread."""
    c = collections.Counter()
    for names, n in threads.get(tid, []):
        c[names[-1] if names else "?"] += n
    return c


@contextlib.contextmanager
def workers(python, workdir, *args):
    """tests/targets/workers.py running under python: (process, truth)."""
    truth_path = os.path.join(workdir, "truth.json")
    p = subprocess.Popen([python, os.path.join(TARGETS, "workers.py"),
                          truth_path, *args], stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        assert p.stdout.readline() == "ready\n"
        truth = None
        if os.path.exists(truth_path):
            with open(truth_path) as f:
                truth = json.load(f)
        yield p, truth
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()


def measured(workdir, pids):
    """{worker: (seconds in three(), in one())} as each worker measured."""
    out = {}
    for w in pids:
        with open(os.path.join(workdir, "workers", "worker.%d" % w)) as f:
            out[w] = tuple(float(x) for x in f.read().split())
    return out


def launched(workdir, rate, *args):
    """sample --subprocesses -r RATE -- workers.py TRUTH ARGS... (3.14):
    (the run, the truth, by_process() of its profile)."""
    python = BY_LABEL.get(matrix("3.14"), PYTHONS[-1][1])
    truth_path = os.path.join(workdir, "truth.json")
    out = os.path.join(workdir, "profile.txt")
    r = pyunwind("sample", "--subprocesses", "-r", rate, "--format",
                 "collapsed", "-o", out, "--", python,
                 os.path.join(TARGETS, "workers.py"), truth_path, *args)
    assert r.returncode == 0, r.stderr
    with open(truth_path) as f:
        truth = json.load(f)
    with open(out) as f:
        return r, truth, by_process(f.read())


def split_samples(got, pid):
    """The samples under pid in three() or one()."""
    return sum(n for stacks in got[pid].values() for names, n in stacks
               if "three" in names or "one" in names)


def assert_split(got, pid, t3, t1):
    """Under pid, three()'s share of the samples in three() or one() is
    its share of the time the process measured in them (t3, t1), within
    the split tests' bound (0.06); there are enough samples to tell
    (conftest.samples_for: a test gathers them by sampling again; the
    time the process measured waits on the CPU as the samples do, so no
    more than the independent samples' are asked for)."""
    stacks = [x for stacks in got[pid].values() for x in stacks]
    three = sum(n for names, n in stacks if "three" in names)
    one = sum(n for names, n in stacks if "one" in names)
    assert three + one >= samples_for(0.06, design=1), (pid, three, one)
    assert abs(three / (three + one) - t3 / (t3 + t1)) < 0.06, (
        pid, three, one, t3, t1)
    return stacks


def merged(profiles):
    """by_process() profiles as one (the samples of several runs)."""
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    for got in profiles:
        for pid, threads in got.items():
            for tid, stacks in threads.items():
                out[pid][tid].extend(stacks)
    return out


@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_sample_subprocesses_of_a_tree(label, python, workdir):
    """sample --subprocesses: every Python process of the tree under its
    pid, its main thread where it said it parked; the shell between two
    left out without a word; the summary counts the processes."""
    with tree(python, workdir) as (pid, truth):
        r = pyunwind("sample", "--subprocesses", "-d", "1", "-r", "200",
                     "--format", "collapsed", str(pid))
        assert r.returncode == 0, r.stderr
        got = by_process(r.stdout)
        assert truth["shell"] not in got
        want = {pid: "parent_park"}
        for role in ("pool", "spawned", "forkserved", "shelled"):
            want.update({child: ("park_here", role) for child in truth[role]})
        for child, park in want.items():
            assert child in got, (child, sorted(got))
            main = leaves(got[child], child)
            if park == "parent_park":
                assert main.most_common(1)[0][0] == "parent_park", main
            else:
                # (park_here, called by the role's own function)
                stacks = got[child][child]
                assert all(names[-2:] == ["%s_park" % park[1], "park_here"]
                           for names, _ in stacks), stacks
        # (multiprocessing's own: the resource tracker, the forkserver)
        assert len(got) >= len(want)
        m = re.search(r"pyunwind: (\d+) processes, (\d+) samples", r.stderr)
        assert m and int(m.group(1)) == len(got), r.stderr
        # every process's every thread was sampled at each tick (they all
        # lived through the run)
        counts = {sum(n for names, n in stacks)
                  for threads in got.values() for stacks in threads.values()}
        assert len(counts) == 1, counts


@pytest.mark.accuracy
@pytest.mark.parametrize("label,method", SPLITS,
                         ids=["%s-%s" % s for s in SPLITS])
def test_each_worker_keeps_its_split(label, method, workdir):
    """Two ProcessPoolExecutor workers (fork, spawn or forkserver) busy in
    three() and one() by turns: under each worker's pid, three()'s share
    of the two is the share of the time the worker measured in it, within
    the split tests' bound; the parent waits in its pool."""
    with workers(BY_LABEL[label], workdir, method) as (p, truth):
        # runs of 2 s until each worker has the samples its split is
        # judged on, the time each measured added up over the same runs
        runs, spent = [], {w: [0.0, 0.0] for w in truth["workers"]}

        def attempt(_):
            before = measured(workdir, truth["workers"])
            r = pyunwind("sample", "--subprocesses", "-d", "2", "--format",
                         "collapsed", str(truth["parent"]))
            after = measured(workdir, truth["workers"])
            assert r.returncode == 0, r.stderr
            got = by_process(r.stdout)
            for w in truth["workers"]:
                assert w in got, (w, sorted(got))
                for k in range(2):
                    spent[w][k] += after[w][k] - before[w][k]
            parent = [names for names, _ in
                      got[truth["parent"]][truth["parent"]]]
            assert all("wait" in names for names in parent), parent[:3]
            runs.append(got)
            return all(split_samples(merged(runs), w) >= samples_for(0.06, design=1)
                       for w in truth["workers"])
        until_shown(attempt)
        got = merged(runs)
        for w in truth["workers"]:
            assert_split(got, w, *spent[w])


def test_the_run_outlives_its_parent(workdir):
    """sample --subprocesses -- PROGRAM: the program exits a second after
    its workers started and they outlive it by a second (workers.py
    --parent-exits: however slowly a loaded machine started it); the run
    goes on until the last of them exits, and returns the program's
    status."""
    r, truth, got = launched(workdir, "200", "fork", "--parent-exits", "1")
    total = lambda pid: sum(n for stacks in got[pid].values()
                            for _, n in stacks)
    for w in truth["workers"]:
        # (each tick samples every process alive: a worker, alive a second
        # longer than the parent, has more samples than it)
        assert total(w) > total(truth["parent"]), \
            (w, total(w), total(truth["parent"]))
    assert "every target exited" in r.stderr, r.stderr


@pytest.mark.accuracy
def test_short_lived_children_are_each_sampled(workdir):
    """200 children at up to 100 a second, each in short_life() for
    250 ms: nearly every one is found and sampled, in short_life.  (The
    target forks a number of children, not as many as it can in a time:
    a loaded machine once started 199 in 2 s, each of them sampled.  A
    child's life is fifty of the sampler's 5 ms looks at /proc: children
    of 50 ms were half of them missed while two compilers held both
    CPUs.)"""
    r, truth, got = launched(workdir, "1000", "short", "--rate", "100",
                             "--life", "250", "--count", "200")
    children = truth["children"]
    seen = [c for c in children if c in got]
    assert len(children) == 200 and len(seen) > 0.9 * len(children), (
        len(seen), len(children), r.stderr)
    for c in seen:
        assert any("short_life" in names for stacks in got[c].values()
                   for names, _ in stacks), got[c]


def test_ctrl_c_lets_every_target_go(workdir):
    """--blocking stops each process for each sample: Ctrl-C in the middle
    of a run over a tree leaves none of them stopped, and the profile is
    written."""
    python = BY_LABEL.get(matrix("3.13"), PYTHONS[-1][1])
    with workers(python, workdir, "fork") as (p, truth):
        pids = [truth["parent"]] + truth["workers"]
        with Sampling("--subprocesses", "--blocking", "-r", "max",
                      "--format", "collapsed", str(truth["parent"])) as s:
            s.wait_for(100 * len(pids))  # (in the middle of the run)
            code, out, err = s.finish(signal.SIGINT)
        assert code == 0, err
        assert "interrupted" in err
        got = by_process(out)
        assert set(pids) <= set(got)
        for pid in pids:
            # (the run has let them go; one left stopped stays so)
            wait_until(lambda: state_of(pid) in RUNNING,
                       "process %d to run (%s)" % (pid, state_of(pid)))


def test_usage_of_several(workdir):
    for args in (["sample", "--thread", "5", "1", "2"],
                 ["sample", "--thread", "5", "--subprocesses", "1"],
                 ["sample", "--subprocesses", "--thread", "5", "--", "x"]):
        r = pyunwind(*args)
        assert r.returncode == 2 and r.stderr.count("\n") == 1, (args, r)


EXEC_CHILD = r"""
import os, sys, time
def before_exec():
    time.sleep(0.6)
def after_exec():
    time.sleep(0.6)
if sys.argv[1:] == ["again"]:
    after_exec()
    os.execv("/bin/sleep", ["sleep", "0.6"])
print(os.getpid(), flush=True)
pid = os.fork()
if pid == 0:
    before_exec()
    os.execv(sys.executable, [sys.executable, sys.argv[0], "again"])
os.waitpid(pid, 0)
"""


def test_a_child_that_runs_exec(workdir):
    """A child sampled in one Python program, then in the one it runs by
    exec (the same pid, a new process of the profile), and let go when it
    runs exec again into a program that is not Python (sleep)."""
    python = BY_LABEL.get("3.15.2-debian", PYTHONS[-1][1])
    script = os.path.join(workdir, "exec_child.py")
    with open(script, "w") as f:
        f.write(EXEC_CHILD)
    out = os.path.join(workdir, "profile.txt")

    # (about 120 samples each; none of sleep's 0.6 s.  A loaded machine
    # misses more ticks: the program is run again until a run has more
    # than 60 of each, each run held to the rest)
    def attempt(_):
        r = pyunwind("sample", "--subprocesses", "-r", "200", "--format",
                     "collapsed", "-o", out, "--", python, script)
        assert r.returncode == 0, r.stderr
        with open(out) as f:
            got = by_process(f.read())
        child = [pid for pid in got if pid != min(got)]
        assert len(child) == 1, sorted(got)
        funcs = collections.Counter()
        for names, n in got[child[0]][child[0]]:
            for fn in ("before_exec", "after_exec"):
                funcs[fn] += n if fn in names else 0
        assert funcs["before_exec"] < 180, funcs
        assert funcs["after_exec"] < 180, funcs
        assert "3 processes" in r.stderr, r.stderr
        return funcs["before_exec"] > 60 and funcs["after_exec"] > 60
    until_shown(attempt)


NOT_DUMPABLE = r"""
import ctypes, os, time
print(os.getpid(), flush=True)
pid = os.fork()
if pid == 0:
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    os.write(1, b"%d\n" % os.getpid())  # one write: the only line after fork
    while True:
        time.sleep(1)
while True:
    time.sleep(1)
"""


def test_a_child_that_cannot_be_read_is_left_out(workdir):
    """A user's process whose child made itself non-dumpable: pyunwind run
    by that user samples the parent, and leaves the child out with a line
    that names it and says why; the exit status says the profile is not
    whole (5)."""
    python = BY_LABEL.get(matrix("3.14"), PYTHONS[-1][1])
    as_nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup",
                 "--clear-groups"]
    p = subprocess.Popen(as_nobody + [python, "-c", NOT_DUMPABLE],
                         stdout=subprocess.PIPE, text=True,
                         start_new_session=True, cwd="/")
    try:
        parent = int(p.stdout.readline())
        child = int(p.stdout.readline())
        r = subprocess.run(as_nobody + [PYUNWIND, "sample", "--subprocesses",
                                        "-d", "0.5", "--format", "collapsed",
                                        str(parent)],
                           capture_output=True, text=True, timeout=TIMEOUT,
                           cwd="/")
        assert r.returncode == 5, r.stderr
        lines = [line for line in r.stderr.splitlines()
                 if line.startswith("pyunwind: warning: ")]
        assert len(lines) == 1 and lines[0].startswith(
            "pyunwind: warning: process %d left out: " % child), r.stderr
        got = by_process(r.stdout) if "pid:" in r.stdout else None
        assert got is None or child not in got
        assert "<module>" in r.stdout
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()


@pytest.mark.debugger
@pytest.mark.accuracy
@pytest.mark.parametrize("dbg", DEBUGGERS, ids=[d.name for d in DEBUGGERS])
def test_the_debuggers_read_the_inferiors_descendants(dbg, workdir):
    """py-dump and py-sample --subprocesses in gdb and lldb attached to a
    pool's parent: its workers read by pid, each under its pid, each
    worker's split as it measured it; on a remote target, a line that says
    why not."""
    require_plugin(dbg)
    python = BY_LABEL.get("3.15.2-debian" if dbg.name == "lldb" else
                          matrix("3.13"), PYTHONS[-1][1])
    with workers(python, workdir, "fork") as (p, truth):
        parent = truth["parent"]
        setup, args, teardown = dbg.attach(parent)
        before = measured(workdir, truth["workers"])
        # (gdb's scripting API too: its profile keeps the processes)
        script = ["python print('procs', sorted(x['pid'] for x in "
                  "pyunwind_gdb.sample(duration=0.3, subprocesses=True)"
                  ".data()['processes']))"] if dbg.name == "gdb" else []
        tr = dbg.run(["py-dump --subprocesses --no-source",
                      "py-sample --subprocesses -d 2 --format collapsed",
                      *script, *teardown], args=args, setup=setup)
        after = measured(workdir, truth["workers"])
        if script:
            assert "procs %s" % sorted([parent] + truth["workers"]) in \
                tr[script[0]], tr[script[0]]
        dump = tr["py-dump --subprocesses"]
        heads = [int(line.split()[1].rstrip(":")) for line in dump.splitlines()
                 if line.startswith("Process ") and "CPython" in line]
        assert heads[0] == parent and set(truth["workers"]) <= set(heads), dump

        def window(tr):
            text = tr["py-sample --subprocesses"]
            return by_process("\n".join(line for line in text.splitlines()
                                        if line.startswith("pid:")))
        runs = [window(tr)]
        spent = {w: [a - b for a, b in zip(after[w], before[w])]
                 for w in truth["workers"]}

        # (more windows, until each worker has the samples its split is
        # judged on; the time each measured added up over the same ones)
        def more(_):
            if all(split_samples(merged(runs), w) >= samples_for(0.06, design=1)
                   for w in truth["workers"]):
                return True
            before = measured(workdir, truth["workers"])
            tr = dbg.run(["py-sample --subprocesses -d 2 --format "
                          "collapsed", *teardown], args=args, setup=setup)
            after = measured(workdir, truth["workers"])
            runs.append(window(tr))
            for w in truth["workers"]:
                for k in range(2):
                    spent[w][k] += after[w][k] - before[w][k]
            return False
        until_shown(more)
        got = merged(runs)
        for w in truth["workers"]:
            assert_split(got, w, *spent[w])
        server = Server(dbg, parent)
        try:
            setup, args, teardown = dbg.remote(server.port)
            tr = dbg.run(["py-dump --subprocesses", *teardown], args=args,
                         setup=setup)
            out = tr["py-dump --subprocesses"]
            assert "--subprocesses reads the descendants of a process on " \
                   "this machine by pid" in out and "Process " not in out, out
        finally:
            server.close()


@pytest.mark.accuracy
def test_a_forking_server_and_its_workers(workdir):
    """socketserver.ForkingMixIn on loopback, two clients: the process
    forked for each connection is found and sampled under its pid, its
    split of time as it measured it; the server waits in serve_forever."""
    python = BY_LABEL.get(matrix("3.13"), PYTHONS[-1][1])
    server = subprocess.Popen([python, os.path.join(TARGETS, "prefork.py")],
                              stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    socks = []
    try:
        port = int(server.stdout.readline())
        assert server.stdout.readline() == "ready\n"
        with Sampling("--subprocesses", "--format", "collapsed",
                      str(server.pid)) as s:
            s.wait_for(1)  # (the workers come after the sampler: found)
            import socket
            workers = {}
            for _ in range(2):
                c = socket.create_connection(("127.0.0.1", port))
                f = c.makefile("rw")
                f.write("600\n")
                f.flush()
                socks.append((c, f))
                workers[int(f.readline())] = f
            # the workers work until the run has the samples their splits
            # are judged on (conftest.samples_for): each tick samples the
            # three processes, and a worker is in three() or one() half
            # the time, so six of the run's samples for each that counts,
            # eight for room; then they are told to stop and say what they
            # measured, and the run is interrupted
            s.wait_for(s.samples() + 8 * samples_for(0.06, design=1))
            for f in workers.values():
                f.write("stop\n")
                f.flush()
            spent = {pid: [float(x) for x in f.readline().split()]
                     for pid, f in workers.items()}
            code, out, err = s.finish(signal.SIGINT)
        assert code == 0, err
        got = by_process(out)
        for pid, f in workers.items():
            stacks = assert_split(got, pid, *spent[pid])
            # (the rest: the fork's way into the handler and out of it)
            handling = sum(n for names, n in stacks
                           if "Handler.handle" in names)
            assert handling > 0.9 * sum(n for _, n in stacks), stacks
        server_stacks = got[server.pid][server.pid]
        assert all("BaseServer.serve_forever" in names
                   for names, _ in server_stacks), server_stacks[:2]
    finally:
        for c, f in socks:
            f.close()
            c.close()
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
        server.stdout.close()


def test_a_child_in_another_pid_namespace(workdir):
    """A Python child started in a pid namespace of its own (unshare, as
    root) behind the unshare process: found and read as the parent is,
    under the pid this namespace gives it."""
    if os.geteuid() != 0:
        pytest.fail("this test runs as root (unshare --pid)")
    python = BY_LABEL.get(matrix("3.14"), PYTHONS[-1][1])
    code = ("import subprocess, sys\n"
            "c = subprocess.Popen(['unshare', '--pid', '--fork', sys.executable,"
            " '-c', 'import os, time\\n"
            "def in_its_namespace():\\n"
            "    print(os.getpid(), flush=True)\\n"
            "    time.sleep(3600)\\n"
            "in_its_namespace()\\n'], stdout=subprocess.PIPE, text=True)\n"
            "print(c.stdout.readline(), end='', flush=True)\n"
            "c.wait()\n")
    p = subprocess.Popen([python, "-c", code], stdout=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        assert p.stdout.readline() == "1\n"  # (its own pid there)
        r = pyunwind("sample", "--subprocesses", "-d", "0.5", "-r", "100",
                     "--format", "collapsed", str(p.pid))
        assert r.returncode == 0, r.stderr
        got = by_process(r.stdout)
        inner = [pid for pid, threads in got.items()
                 if any("in_its_namespace" in names
                        for stacks in threads.values()
                        for names, _ in stacks)]
        assert len(inner) == 1 and inner[0] != 1, sorted(got)
        assert p.pid in got
    finally:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        p.stdout.close()


EXEC_SELF = r"""
import os, sys, time
def lived():
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    return (time.clock_gettime(time.CLOCK_BOOTTIME) -
            ticks / os.sysconf("SC_CLK_TCK"))
def before_exec():
    end = time.time() + 0.6
    while time.time() < end:
        pass
if sys.argv[1:] == ["again"]:
    time.sleep(0.6)
    sys.exit()
with open(sys.argv[0] + ".started", "w") as f:  # (its start's seconds)
    f.write("%.3f" % lived())
before_exec()
os.execv(sys.executable, [sys.executable, sys.argv[0], "again"])
"""


# (Debian's 3.11, not position-independent, and the free-threaded 3.14
# built here, which is; Debian's 3.14 is not)
EXEC_SELF_ON = [lab for lab in ("3.11.2-debian", matrix("3.14t"))
                if lab in BY_LABEL]


@pytest.mark.parametrize("label", EXEC_SELF_ON)
def test_one_target_that_runs_itself_again(label, workdir):
    """sample -- PROGRAM, a Python that runs exec of the same interpreter
    (3.11 is not position-independent: its runtime is at the same address
    and the reads go on working): the run ends at the exec and says so,
    no sample of the new program taken with what was cached of the old."""
    script = os.path.join(workdir, "exec_self.py")
    with open(script, "w") as f:
        f.write(EXEC_SELF)
    out = os.path.join(workdir, "profile.txt")

    # (0.6 s of before_exec at 200/s: run again until a run has more than
    # 90 of them, which a loaded machine, missing ticks, may not give
    # every time; besides them the samples of the program's start, which
    # it measured (a loaded machine makes it slower), and 0.1 s at most
    # before the exec is seen)
    def attempt(_):
        r = pyunwind("sample", "-r", "200", "--format", "collapsed", "-o",
                     out, "--", BY_LABEL[label], script)
        assert r.returncode == 0, r.stderr
        assert "; the target ran exec (another program)" in r.stderr, \
            r.stderr
        with open(out) as f:
            lines = f.read().splitlines()
        with open(script + ".started") as f:
            started = float(f.read())
        busy = sum(int(line.rpartition(" ")[2]) for line in lines
                   if "before_exec" in line)
        total = sum(int(line.rpartition(" ")[2]) for line in lines)
        assert total - busy < 30 + (started + 0.01) * 200, (started, lines)
        return busy > 90
    until_shown(attempt)
