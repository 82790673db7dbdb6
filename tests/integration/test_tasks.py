"""pyunwind tasks against the real peer: the rows CPython's own `asyncio
ps` builds (asyncio.tools.build_task_table over _remote_debugging, run by
the same interpreter on the same process) equal pyunwind's table rows, live
and from gcore and kernel cores of the process taken right after the peer
read it.  Every interpreter of scripts/get-pythons from 3.14 on; 3.11 and
3.13 get a one-line error, as do 3.9, 3.10 and 3.12."""

import collections
import json
import os
import re
import subprocess
import tempfile

import pytest

from conftest import (TIMEOUT, Target, interpreters, sleeping,
                      kernel_cores_land_here, pyunwind)

PYTHONS = interpreters()
OLD = [p for p in PYTHONS if re.match(r"3\.(9|1[0-3])\.", p[0])]
ASYNC = [p for p in PYTHONS if p not in OLD]

# The peer, inside the target's own interpreter.  3.14's
# RemoteUnwinder.get_all_awaited_by starts its thread walk at the main
# thread and so sees only the main thread's tasks and the interpreter's;
# 3.15 walks every thread.
PEER = """
import json, sys, asyncio.tools as tools, _remote_debugging as rd
rows = tools.build_task_table(
    rd.RemoteUnwinder(int(sys.argv[1]), all_threads=True).get_all_awaited_by())
print(json.dumps(rows))
"""


def peer_rows(python, pid):
    r = subprocess.run([python, "-c", PEER, str(pid)], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def line(row):
    """A row as `python -m asyncio ps` prints it."""
    return ("%-10s %-20s %-20s %-50s %-50s %-15s %-15s" % tuple(
        str(c) for c in row))


def our_lines(*args):
    r = pyunwind("tasks", *args)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("tid        task id") and lines[1] == "-" * 180
    return lines[2:]


def assert_rows(ours, peer, truth, main_tid, version):
    """Our table equals the peer's rows; where the 3.14 peer cannot look
    (threads other than the main one), the task names equal what the
    target recorded for that thread's loop."""
    compared = ours
    if version in ("3.14.7",):
        # this peer stops at an async generator (later 3.14 releases and
        # 3.15 follow it, as pyunwind does): leave that task out here; its
        # chain is checked in test_live_json
        compared = [l for l in ours if l[32:52].rstrip() != "async-gen"]
        peer = [r for r in peer if r[2] != "async-gen"]
    ours_c = collections.Counter(compared)
    peer_c = collections.Counter(line(r) for r in peer)
    if version.startswith("3.14"):
        seen = {str(main_tid), "0"}
        mine = collections.Counter(
            l for l in compared if l.split(" ", 1)[0] in seen)
        assert mine == peer_c, (sorted(mine - peer_c), sorted(peer_c - mine))
    else:
        assert ours_c == peer_c, (sorted(ours_c - peer_c),
                                  sorted(peer_c - ours_c))
    names = collections.defaultdict(set)
    for l in ours:
        names[l.split(" ", 1)[0]].add(l[32:52].rstrip())
    for tid, want in truth["tasks_by_thread"].items():
        assert names[tid] == set(want), (tid, names[tid], want)


@pytest.fixture(scope="module", params=ASYNC, ids=[p[0] for p in ASYNC])
def target(request):
    label, python = request.param
    with tempfile.TemporaryDirectory(prefix="pyu-tasks-") as d:
        t = Target(python, "tasks.py", d, expect_threads=False)
        t.label, t.python = label, python
        t.version = label.split("-")[0].rstrip("t")
        yield t
        t.close()


def test_live_table(target):
    peer = peer_rows(target.python, target.pid)
    assert len(peer) >= 13
    assert_rows(our_lines(str(target.pid)), peer, target.truth, target.pid,
                target.version)


def test_live_json(target):
    r = pyunwind("tasks", "--json", str(target.pid))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    tasks = {t["id"]: t for t in doc["tasks"]}
    assert doc["python"]["version"].startswith(target.version)
    # the JSON says what the table says
    for l in our_lines(str(target.pid)):
        tid, tid_hex, name = l[:10].rstrip(), l[11:31].rstrip(), l[32:52].rstrip()
        t = tasks[int(tid_hex, 16)]
        assert t["name"] == name and str(t["native_thread_id"]) == tid
    for t in doc["tasks"]:
        assert t["error"] is None and not t["running"]  # all are waiting
        assert t["stack"], t
        for a in t["awaited_by"]:
            assert a["stack"] == tasks[a["id"]]["stack"]
    by_name = {t["name"]: t for t in doc["tasks"]}
    assert [f["function"] for f in by_name["async-gen"]["stack"]] == \
        ["leaf", "numbers", "consuming"]
    assert [f["function"] for f in by_name["tg-first"]["stack"]] == \
        ["leaf", "child"]
    assert by_name["tg-first"]["stack"][0]["file"].endswith("tasks.py")
    assert [a["id"] for a in by_name["tg-first"]["awaited_by"]] == \
        [by_name["task-group"]["id"]]
    assert by_name["orphan"]["thread_id"] == 0  # its thread ended


def tree_paths(text):
    """The root-to-node label paths of a pstree-like tree."""
    paths, stack = collections.Counter(), []
    for l in text.splitlines():
        m = re.match(r"^((?:    |│   )*)(?:└── |├── )(.*)$", l)
        assert m, l
        depth = len(m.group(1)) // 4
        stack[depth:] = [m.group(2)]
        paths["/".join(stack)] += 1
    return paths


def test_live_tree(target):
    r = pyunwind("tasks", "--tree", str(target.pid))
    assert r.returncode == 0, r.stderr
    ours = tree_paths(r.stdout)
    peer = subprocess.run([target.python, "-m", "asyncio", "pstree",
                           str(target.pid)], capture_output=True, text=True,
                          timeout=TIMEOUT)
    assert peer.returncode == 0, peer.stderr
    theirs = tree_paths(peer.stdout)
    # 3.14's pstree reads the main thread only: every path it prints is
    # ours, and ours adds the other threads' trees; 3.15's reads them all
    if target.version.startswith("3.14"):
        assert not theirs - ours, sorted(theirs - ours)
    else:
        assert theirs == ours, (sorted(theirs - ours), sorted(ours - theirs))
    assert any(p.endswith("(T) eager-child") for p in ours)


def check_core(target, core):
    peer = target.peer_before_core
    assert_rows(our_lines("--core", core), peer, target.truth, target.pid,
                target.version)


def test_gcore(target):
    target.peer_before_core = peer_rows(target.python, target.pid)
    core = target.gcore()
    try:
        check_core(target, core)
    finally:
        os.unlink(core)


def test_kernel_core(target):
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    target.peer_before_core = peer_rows(target.python, target.pid)
    core = target.abort()
    assert core, "the kernel wrote no core file"
    check_core(target, core)


@pytest.mark.parametrize("label,python", ASYNC[-1:], ids=[ASYNC[-1][0]]
                         if ASYNC else [])
def test_many_tasks(label, python, tmp_path):
    t = Target(python, "tasks.py", str(tmp_path), ["--many", "10000"],
               expect_threads=False)
    try:
        peer = peer_rows(python, t.pid)
        ours = our_lines(str(t.pid))
        assert len(ours) > 10000
        assert_rows(ours, peer, t.truth, t.pid, label.split("-")[0])
        # the tree holds every one of them, as pstree's does
        r = pyunwind("tasks", "--tree", str(t.pid))
        assert r.returncode == 0, r.stderr
        tree = tree_paths(r.stdout)
        assert sum(bool(re.fullmatch(r"\(T\) many-\d+", p.rsplit("/", 1)[-1]))
                   for p in tree) == 10000
        peer_tree = subprocess.run([python, "-m", "asyncio", "pstree",
                                    str(t.pid)], capture_output=True,
                                   text=True, timeout=TIMEOUT)
        theirs = tree_paths(peer_tree.stdout)
        if label.startswith("3.14"):
            assert not theirs - tree
        else:
            assert theirs == tree
    finally:
        t.close()


@pytest.mark.parametrize("label,python", ASYNC, ids=[p[0] for p in ASYNC])
def test_cycle(label, python, tmp_path):
    t = Target(python, "tasks.py", str(tmp_path), ["--cycle"],
               expect_threads=False)
    try:
        r = pyunwind("tasks", "--tree", str(t.pid))
        assert r.returncode == 6, r.stderr
        assert "cycle" in r.stderr and r.stderr.count("\n") == 1
        assert re.search(r"cycle-(a|b) \(0x[0-9a-f]+\) → cycle-(b|a) "
                         r"\(0x[0-9a-f]+\) → cycle-\1", r.stdout), r.stdout
        peer = subprocess.run([python, "-m", "asyncio", "pstree", str(t.pid)],
                              capture_output=True, text=True, timeout=TIMEOUT)
        assert peer.returncode == 1 and "cycle" in peer.stderr
        # the table has no trouble with it
        assert_rows(our_lines(str(t.pid)), peer_rows(python, t.pid), t.truth,
                    t.pid, label.split("-")[0])
    finally:
        t.close()


@pytest.mark.parametrize("label,python", ASYNC, ids=[p[0] for p in ASYNC])
def test_no_tasks(label, python):
    """A process that never ran asyncio: the table and the tree say there
    are none (`python -m asyncio ps` and `pstree` print a bare header and
    nothing), the JSON's list is empty; exit 0."""
    with sleeping(python) as p:
        r = pyunwind("tasks", str(p.pid))
        assert r.returncode == 0 and r.stderr == "", r.stderr
        lines = r.stdout.splitlines()
        assert lines[0].startswith("tid ") and set(lines[1]) == {"-"}
        assert lines[2:] == ["(no asyncio tasks)"], r.stdout
        r = pyunwind("tasks", "--tree", str(p.pid))
        assert (r.returncode, r.stdout, r.stderr) == \
            (0, "(no asyncio tasks)\n", "")
        r = pyunwind("tasks", "--json", str(p.pid))
        assert r.returncode == 0 and json.loads(r.stdout)["tasks"] == []


@pytest.mark.parametrize("label,python", OLD, ids=[p[0] for p in OLD])
def test_before_314(label, python):
    with sleeping(python) as p:
        r = pyunwind("tasks", str(p.pid))
        assert r.returncode == 4
        assert r.stderr.strip() == ("pyunwind: error: asyncio tasks need "
                                    "CPython 3.14 or newer: %s has no "
                                    ".AsyncioDebug section"
                                    % label.split("-")[0].rstrip("t"))
        r = pyunwind("dump", "--async", str(p.pid))
        assert r.returncode == 4 and "need CPython 3.14" in r.stderr
        assert r.stdout == ""


ASYNC_PEER = """
import json, sys, _remote_debugging as rd
out = []
for a in rd.RemoteUnwinder(int(sys.argv[1])).get_async_stack_trace():
    out.append({"tid": a.thread_id, "tasks": [
        {"id": t.task_id, "name": t.task_name,
         "frames": [f.funcname for c in t.coroutine_stack for f in c.call_stack],
         "awaited_by": [c.task_name for c in t.awaited_by]}
        for t in a.awaited_by]})
print(json.dumps(out))
"""


@pytest.mark.parametrize("label,python", ASYNC, ids=[p[0] for p in ASYNC])
def test_async_stack(label, python, tmp_path):
    """dump --async: the thread's stack down to the running task's
    coroutine, then the tasks awaiting it; the chain is the one CPython's
    RemoteUnwinder.get_async_stack_trace reports."""
    t = Target(python, "tasks.py", str(tmp_path), ["--running"],
               expect_threads=False)
    try:
        r = subprocess.run([python, "-c", ASYNC_PEER, str(t.pid)],
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        peer = [p for p in json.loads(r.stdout) if p["tasks"]]
        assert len(peer) == 1 and peer[0]["tid"] == t.pid
        # the peer lists the running task, then its awaiters, each awaiting
        # the one before
        chain = [peer[0]["tasks"][0]]
        by_id = {x["id"]: x for x in peer[0]["tasks"]}
        while chain[-1]["awaited_by"]:
            chain.append(by_id[chain[-1]["awaited_by"][0]])
        r = pyunwind("dump", "--json", "--async", "--thread", str(t.pid),
                     str(t.pid))
        assert r.returncode == 0, r.stderr
        th = json.loads(r.stdout)["threads"][0]
        assert [(x["id"], x["name"]) for x in th["tasks"]] == \
            [(x["id"], x["name"]) for x in chain]
        assert [x["name"] for x in chain] == ["runner", "waiter", chain[-1]["name"]]
        # each task's frames are the peer's coroutine stack for it (the
        # running one: the thread's frames down to its coroutine)
        bounds = [x["first_frame"] for x in th["tasks"]] + [len(th["frames"])]
        for i, x in enumerate(chain):
            names = [f["function"] for f in th["frames"][bounds[i]:bounds[i + 1]]]
            assert names[-len(x["frames"]):] == x["frames"], (names, x)
        assert th["frames"][0]["function"] == "blocking_leaf"
        # the text marks where each task begins
        r = pyunwind("dump", "--async", "--no-source", "--thread", str(t.pid),
                     str(t.pid))
        assert r.returncode == 0, r.stderr
        assert re.search(r"\[task 'waiter' \(0x[0-9a-f]+\) awaits:\]\n"
                         r"  File .*, in waiter\n"
                         r"  \[task 'runner' \(0x[0-9a-f]+\) runs:\]\n"
                         r"  File .*, in blocking_child\n"
                         r"  File .*, in blocking_leaf\n$", r.stdout), r.stdout
        # without --async the thread shows its real stack, loop included
        r = pyunwind("dump", "--no-source", "--thread", str(t.pid), str(t.pid))
        assert "run_forever" in r.stdout and "[task" not in r.stdout
    finally:
        t.close()


def async_peer(python, pid):
    """CPython's get_async_stack_trace for the process: the thread running
    a task, and its tasks (running one first) by id."""
    r = subprocess.run([python, "-c", ASYNC_PEER, str(pid)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    peer = [p for p in json.loads(r.stdout) if p["tasks"]]
    assert len(peer) == 1 and peer[0]["tid"] == pid
    return peer[0]["tasks"]


def async_thread(pid):
    r = pyunwind("dump", "--json", "--async", "--thread", str(pid), str(pid))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["threads"][0]


@pytest.mark.parametrize("label,python", ASYNC, ids=[p[0] for p in ASYNC])
def test_async_recursive_coroutine(label, python, tmp_path):
    """dump --async when the running task's coroutine awaits itself (rec(3)
    -> rec(2) -> rec(1) -> rec(0) -> blocking_leaf): the task's own frame is
    found by its address, so all four rec frames are the task's, as the
    target built them and as CPython 3.15's reader reports (3.14's reader
    stops at the innermost rec, as pyunwind did before)."""
    t = Target(python, "tasks.py", str(tmp_path),
               ["--running", "--recursive", "3"], expect_threads=False)
    try:
        peer = async_peer(python, t.pid)
        th = async_thread(t.pid)
        assert [x["name"] for x in th["tasks"]][:2] == ["runner", "waiter"]
        runner = [f["function"] for f in
                  th["frames"][:th["tasks"][1]["first_frame"]]]
        assert runner == ["blocking_leaf", "rec", "rec", "rec", "rec"]
        if label.startswith("3.15"):
            assert peer[0]["name"] == "runner"
            assert runner == peer[0]["frames"]
    finally:
        t.close()


@pytest.mark.parametrize("label,python", ASYNC, ids=[p[0] for p in ASYNC])
def test_limits_are_shown(label, python, tmp_path):
    """What a limit cuts says so: a coroutine chain deeper than 1024 frames
    (tasks, text and JSON), and an --async chain of more than 1024 awaiting
    tasks (dump, text and JSON), whose first 1024 are CPython's."""
    t = Target(python, "tasks.py", str(tmp_path),
               ["--deep", "1100", "--chain", "1100"], expect_threads=False)
    try:
        r = pyunwind("tasks", "--json", str(t.pid))
        assert r.returncode == 0, r.stderr
        tasks = {x["name"]: x for x in json.loads(r.stdout)["tasks"]}
        deep = tasks["deep"]
        assert deep["stack_truncated"] and deep["error"] is None
        assert len(deep["stack"]) == 1024
        assert {f["function"] for f in deep["stack"]} == {"deep"}
        assert not any(x["stack_truncated"] or x["awaiters_truncated"]
                       for n, x in tasks.items() if n != "deep")
        r = pyunwind("tasks", str(t.pid))
        assert r.returncode == 0, r.stderr
        assert "[task 'deep' (0x%x): its coroutine stack is deeper than " \
            "1024 frames; the innermost are not shown]" % deep["id"] \
            in r.stdout
        r = pyunwind("tasks", "--tree", str(t.pid))
        assert r.returncode == 0, r.stderr
        assert "[task 'deep' (0x%x): its coroutine stack" % deep["id"] \
            in r.stdout

        peer = async_peer(python, t.pid)
        th = async_thread(t.pid)
        assert th["truncated"] == "tasks" and th["error"] is None
        ours = [x["name"] for x in th["tasks"]]
        assert len(ours) == 1024
        assert ours == ["chain-runner"] + ["link-%d" % i for i in range(1023)]
        # the peer's chain, from the running task through the first awaiter
        by_id = {x["id"]: x for x in peer}
        chain = [peer[0]]
        while chain[-1]["awaited_by"] and len(chain) < 1024:
            chain.append(by_id[chain[-1]["awaited_by"][0]])
        assert ours == [x["name"] for x in chain]
        r = pyunwind("dump", "--async", "--no-source", "--thread",
                     str(t.pid), str(t.pid))
        assert r.returncode == 0, r.stderr
        assert "[frames not shown: the chain of awaiting tasks is cut " \
            "(more than 1024 tasks" in r.stdout
    finally:
        t.close()


def test_bad_input(tmp_path):
    """No process, not Python, a running target whose tasks never stop
    changing (read without stopping it), cut-off cores: one-line errors or
    complete output, never a crash."""
    r = pyunwind("tasks", "999999999")
    assert r.returncode == 3 and "no process with id" in r.stderr
    assert r.stderr.count("\n") == 1
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        import time
        time.sleep(0.1)
        r = pyunwind("tasks", str(sleeper.pid))
        assert r.returncode == 4 and "no CPython runtime" in r.stderr
        assert r.stderr.count("\n") == 1
    finally:
        sleeper.kill()
        sleeper.wait()
    if not ASYNC:
        pytest.skip("no interpreter with asyncio debug offsets among the "
                    "selected ones (PYU_ONLY)")
    label, python = ASYNC[-1]
    t = Target(python, "tasks.py", str(tmp_path), ["--churn"],
               expect_threads=False)
    try:
        for _ in range(20):
            r = pyunwind("tasks", "--nonblocking", str(t.pid))
            assert r.returncode in (0, 3, 5), r.stderr
            assert not any(m in r.stderr for m in ("Sanitizer", "runtime error"))
            if r.returncode == 0:
                assert r.stdout.startswith("tid ")
            else:
                assert r.stderr.count("\n") <= 1
        if not kernel_cores_land_here():
            return
        core = t.abort()
    finally:
        t.close()
    size = os.path.getsize(core)
    for keep in (size // 2, size // 10, 4096):
        cut = str(tmp_path / ("cut-%d" % keep))
        subprocess.run(["cp", "--sparse=always", core, cut], check=True)
        os.truncate(cut, keep)
        r = pyunwind("tasks", "--core", cut)
        assert r.returncode in (0, 3, 4, 5), r.stderr
        assert not any(m in r.stderr for m in ("Sanitizer", "runtime error"))
        if r.returncode in (3, 4):
            assert r.stderr.count("\n") == 1, r.stderr
        os.unlink(cut)
    os.unlink(core)
