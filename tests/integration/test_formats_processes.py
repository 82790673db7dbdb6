"""The formats of a profile of several processes, each read by its real
consumer: `pyunwind sample --subprocesses` over tests/targets/tree.py (a
parent, a fork Pool's two workers, a spawn and a forkserver child, a child
behind /bin/sh), one run per format, and `go tool pprof`, speedscope's
own app in headless chromium and the Firefox Profiler's profiler-cli must
each show every Python process of the tree under its pid, parked where it
said it parked (the tree's truth), and not the shell; and gecko of a
process that runs another program during the run."""
import json
import os
import signal
import subprocess

import pytest

from conftest import (Sampling, interpreters, labelled, matrix, python_version,
                      pyunwind)
from test_formats import FirefoxProfiler, go_pprof, speedscope_app
from test_subprocesses import tree

PYTHONS = interpreters()
ROLES = ("pool", "spawned", "forkserved", "shelled")


def python314():
    """The plain CPython 3.14 (3.14t when PYU_ONLY left that)."""
    return labelled(PYTHONS, matrix("3.14"), matrix("3.14t"))


@pytest.fixture(scope="module")
def parked(tmp_path_factory):
    """The tree under python314(), for the tests that leave it as it is:
    (pid, truth, {pid: its park function}, {pid: its command line})."""
    python = python314()
    with tree(python, str(tmp_path_factory.mktemp("tree"))) as (pid, truth):
        yield (pid, truth) + parks_and_commands(pid, truth)


def parks_and_commands(pid, truth):
    parks = {pid: "parent_park"}
    for role in ROLES:
        for child in truth[role]:
            parks[child] = "%s_park" % role
    commands = {}
    for p in parks:
        with open("/proc/%d/cmdline" % p, "rb") as f:
            args = f.read().rstrip(b"\0").split(b"\0")
        commands[p] = b" ".join(args).decode()
    return parks, commands


def sample_tree(pid, fmt, out, seconds="1"):
    r = pyunwind("sample", "--subprocesses", "-d", seconds, "--format", fmt,
                 "-o", out, str(pid))
    assert r.returncode == 0, r.stderr
    return r


def traces(path):
    """go tool pprof -traces: [({label: value}, [functions, innermost
    first])], one per sample."""
    out = []
    for block in go_pprof("-traces", path).split("-----------+-")[1:]:
        labels, funcs = {}, []
        for line in block.splitlines()[1:]:
            key, sep, value = line.partition(":  ")
            if sep and not funcs and " " not in key.strip():
                labels[key.strip()] = value
            elif line.strip():
                # the first frame's line starts with the sample's value
                funcs.append(line.split()[-1])
        if funcs:  # (the last separator closes the last sample)
            out.append((labels, funcs))
    return out


def test_pprof_labels_each_process(parked, workdir):
    """go tool pprof: every sample carries its process's pid and command
    line; each process of the tree is there with its park function under
    its pid, the shell is not; -tagfocus pid=N keeps that process alone."""
    pid, truth, parks, commands = parked
    path = os.path.join(workdir, "tree.pb.gz")
    sample_tree(pid, "pprof", path)
    got = traces(path)
    assert got and all("pid" in labels and "process" in labels
                       for labels, _ in got), got[:3]
    by_pid = {}
    for labels, funcs in got:
        by_pid.setdefault(int(labels["pid"]), []).append((labels, funcs))
    assert truth["shell"] not in by_pid
    for p, park in parks.items():
        assert p in by_pid, (p, park, sorted(by_pid))
        assert any(park in funcs for _, funcs in by_pid[p]), (p, park)
        assert {labels["process"] for labels, _ in by_pid[p]} == \
            {commands[p]}, p
        # (a Python process's main thread is the process)
        assert "tid:%d" % p in {labels["thread"] for labels, _ in by_pid[p]}
    for p, stacks in by_pid.items():
        for other in set(parks.values()) - {parks.get(p)}:
            assert not any(other in f for _, f in stacks), (p, other)
    worker = truth["pool"][0]
    top = go_pprof("-top", "-tagfocus", "pid=%d" % worker, path)
    assert "pool_park" in top and "parent_park" not in top, top
    assert "pyunwind: %d processes, CPython %s, wall mode" % \
        (len(by_pid), python_version(python314())) in top, top


def test_speedscope_names_each_process(parked, workdir):
    """speedscope's app: a profile per thread of each process, named after
    its process (pid and command line) and thread, the processes one after
    the other, the parent's main thread first; each process of the tree's
    main thread shows its park function."""
    pid, truth, parks, commands = parked
    path = os.path.join(workdir, "tree.speedscope.json")
    sample_tree(pid, "speedscope", path)
    title, errors, views, names = speedscope_app(path, "speedscope-processes")
    assert errors == [], errors
    assert title.startswith("pyunwind: "), title
    assert names[0] == "pid %d (%s): Thread %d (main thread)" % (
        pid, commands[pid], pid), names[0]
    # (speedscope cuts nothing: the whole name is in its toolbar)
    pids = [int(n.split()[1].rstrip(":")) for n in names]
    assert all(n.startswith("pid ") for n in names), names
    runs = [p for i, p in enumerate(pids) if i == 0 or pids[i - 1] != p]
    assert len(runs) == len(set(runs)), pids  # one run of profiles each
    assert truth["shell"] not in pids
    for p, park in parks.items():
        name = "pid %d (%s): Thread %d (main thread)" % (p, commands[p], p)
        assert name in names, (name, names)
        view = views[names.index(name)]
        assert park in view and view[park][0] > 0, (p, park, view)
        for other in set(parks.values()) - {park}:
            assert other not in view, (p, other)


def test_json_processes(parked, workdir):
    """json: the processes, each with its pid, command line, CPython
    version, first sampled near the start (the tree was there: found by
    the first look at it, sampled at nearly every tick since), not ended;
    each thread's process, and the park function on its main thread."""
    pid, truth, parks, commands = parked
    path = os.path.join(workdir, "tree.json")
    sample_tree(pid, "json", path)
    with open(path) as f:
        data = json.load(f)
    procs = data["processes"]
    assert procs[0]["pid"] == pid == data["pid"]
    by_pid = {p["pid"]: i for i, p in enumerate(procs)}
    assert len(by_pid) == len(procs) and truth["shell"] not in by_pid
    for p in procs:
        assert p["python"] == python_version(python314()), p
        assert p["free_threaded"] is (matrix("3.14") not in dict(PYTHONS)), p
        assert p["end_ns"] is None and p["start_ns"] < data["duration_ns"], p
    # (near the start by the run's ticks, not the clock's: the first look
    # at the tree may take a while on a loaded machine or in the ASan
    # build, and no tick is sampled before it; each tick samples every
    # process found, so each main thread has nearly the root's samples)
    mains = {data["processes"][t["process"]]["pid"]: t["samples"]
             for t in data["threads"] if t["main"]}
    assert all(n >= 0.9 * mains[pid] for n in mains.values()), mains
    funcs, frames = data["functions"], data["frames"]
    for p, park in parks.items():
        assert procs[by_pid[p]]["command"] == commands[p]
        main = [i for i, t in enumerate(data["threads"])
                if t["process"] == by_pid[p] and t["main"]]
        assert len(main) == 1 and \
            data["threads"][main[0]]["native_thread_id"] == p, p
        names = {funcs[frames[fr]["function"]]["name"]
                 for st in data["stacks"] if st["thread"] == main[0]
                 for fr in st["frames"]}
        assert park in names, (p, park, names)
    assert {t["process"] for t in data["threads"]} == set(range(len(procs)))


def test_gecko_a_track_per_process(parked, workdir):
    """The Firefox Profiler (profiler-cli): a process per pid, named after
    its pid and command line, with its threads; each process of the tree
    with its park function on its main thread, sampled from near the start
    (the tree was there) to the end."""
    pid, truth, parks, commands = parked
    path = os.path.join(workdir, "tree.gecko.json")
    sample_tree(pid, "gecko", path)
    fx = FirefoxProfiler(path, workdir)
    try:
        info = fx("profile", "info", "--all")
        assert info["name"] == "pyunwind: %d processes, CPython %s, " \
            "wall mode" % (len(info["processes"]),
                           python_version(python314())), info["name"]
        procs = {int(p["pid"]): p for p in info["processes"]}
        assert len(procs) == len(info["processes"])
        assert truth["shell"] not in procs
        parked_in = {}
        for p, park in parks.items():
            assert p in procs, (p, park, sorted(procs))
            got = procs[p]
            assert got["name"] == "pid %d (%s)" % (p, commands[p]), got
            main = [t for t in got["threads"] if t["tid"] == p]
            assert len(main) == 1 and main[0]["name"] == \
                "Thread %d (main thread)" % p, got
            funcs = fx.functions(main[0]["threadHandle"])
            assert funcs[park][0] > 0, (p, park, dict(funcs))
            parked_in[p] = funcs[park][0]
            assert got["endTime"] is None, got
        # from near the start by the run's ticks, not the clock's (the
        # first look at the tree may take a while on a loaded machine or
        # in the ASan build, and no tick is sampled before it): each main
        # thread parked in nearly as many samples as the root's
        assert all(n >= 0.9 * parked_in[pid] for n in parked_in.values()), \
            parked_in
    finally:
        fx.close()


def test_gecko_a_process_that_runs_another_program(workdir):
    """A process that runs another program (exec) during the run is two
    processes of one pid: the Profiler shows the first ending when the
    second begins (its end and start times), the second as "PID.1" (a
    track of its own), each with its own stack."""
    first = python314()
    then = labelled(PYTHONS, "3.11.2-debian")
    # (the exec when the test says, a line on its standard input, once the
    # run has sampled the first program; the run ends once it has sampled
    # the second, which says when it is in after_exec(): the moments are
    # the run's, not the clock's, which a loaded machine does not keep)
    code = ("import os, sys\n"
            "def before_exec():\n"
            "    print('ready', flush=True)\n"
            "    sys.stdin.readline()\n"
            "    os.execv(%r, [%r, '-c', 'import time\\n"
            "def after_exec():\\n    print(\"again\", flush=True)\\n"
            "    time.sleep(600)\\nafter_exec()'])\n"
            "before_exec()\n" % (then, then))
    target = subprocess.Popen([first, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    path = os.path.join(workdir, "exec.gecko.json")
    try:
        assert target.stdout.readline() == "ready\n"
        with Sampling("--subprocesses", "--format", "gecko", "-o", path,
                      str(target.pid)) as run:
            run.wait_for(300)
            target.stdin.write("\n")
            target.stdin.flush()
            assert target.stdout.readline() == "again\n"
            # (the samples count only while a program is sampled: these
            # are the second's)
            run.wait_for(run.samples() + 300)
            code, _, err = run.finish(signal.SIGINT)
        assert code == 0, err
    finally:
        target.kill()
        target.wait()
        target.stdout.close()
        target.stdin.close()
    fx = FirefoxProfiler(path, workdir)
    try:
        procs = {p["pid"]: p for p in fx("profile", "info", "--all")
                 ["processes"]}
        before, after = str(target.pid), "%d.1" % target.pid
        assert sorted(procs) == sorted([before, after]), procs
        assert procs[before]["name"].startswith("pid %d (%s -c " % (
            target.pid, first)), procs[before]
        assert procs[after]["name"].startswith("pid %d (%s -c " % (
            target.pid, then)), procs[after]
        end = procs[before]["endTime"]
        assert end is not None and end > 0, procs[before]
        # (the second begins once the first has ended: how soon is the
        # new program's start, which a loaded machine makes slower)
        start = procs[after]["startTime"]
        assert end <= start and procs[after]["endTime"] is None, \
            procs[after]
        for p, func, other in ((before, "before_exec", "after_exec"),
                               (after, "after_exec", "before_exec")):
            thread, = procs[p]["threads"]
            funcs = fx.functions(thread["threadHandle"])
            assert funcs[func][0] > 0 and other not in funcs, (p, funcs)
    finally:
        fx.close()
