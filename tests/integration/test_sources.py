"""Where memory and binaries come from: /proc/PID/mem when process_vm_readv
is refused, a second libpython mapped by ctypes, cores whose binaries moved
(--sysroot, --exe), and the per-thread status a live dump reports."""

import os
import shutil
import subprocess
import time

import pytest

from conftest import (DEADLINE, PYUNWIND, Target, assert_matches_truth,
                      dump_json, interpreters, kernel_cores_land_here,
                      pyunwind, wait_until)

PYTHONS = dict(interpreters())
DENY = os.path.join(os.path.dirname(PYUNWIND), "deny_vm_readv")


def first(*labels_prefixes):
    for prefix in labels_prefixes:
        for label, path in PYTHONS.items():
            if label.startswith(prefix):
                return label, path
    pytest.skip("no interpreter %s installed" % (labels_prefixes,))


def test_proc_mem_fallback(tmp_path):
    label, python = first("3.15", "3.14", "3.13")
    t = Target(python, "stacks.py", str(tmp_path), ["--threads", "5",
                                                     "--depth", "30"])
    try:
        # the filter really refuses the system call...
        r = subprocess.run([DENY, "python3", "-c",
                            "import ctypes, os; l = ctypes.CDLL(None, use_errno=True);"
                            "print(l.syscall(310, os.getpid(), 0, 0, 0, 0, 0), ctypes.get_errno())"],
                           capture_output=True, text=True, check=True)
        assert r.stdout.split() == ["-1", "1"], r.stdout  # EPERM
        # ...and pyunwind reads through /proc/PID/mem instead
        r = subprocess.run([DENY, PYUNWIND, "dump", "--json", str(t.pid)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        import json
        assert_matches_truth(json.loads(r.stdout), t.truth)
    finally:
        t.close()


def shared_lib(label):
    prefix = os.path.dirname(os.path.dirname(PYTHONS[label]))
    libdir = os.path.join(prefix, "lib")
    for name in os.listdir(libdir):
        if name.startswith("libpython") and ".so" in name:
            return os.path.join(libdir, name)
    pytest.skip("%s has no libpython" % label)


@pytest.mark.parametrize("host", ["static", "shared"])
def test_second_libpython(tmp_path, host):
    """ctypes maps a copy of libpython: its _PyRuntime carries the cookie
    too, but was never initialised; the live runtime must win."""
    shared = [l for l in PYTHONS if l.endswith("-shared")]
    if not shared:
        pytest.skip("no --enable-shared interpreter")
    lib = shared_lib(shared[0])
    copy = str(tmp_path / ("libpython-copy-" + os.path.basename(lib)))
    shutil.copy(lib, copy)
    if host == "shared":
        python = PYTHONS[shared[0]]
    else:
        version = shared[0][:-len("-shared")]
        if version not in PYTHONS:
            pytest.skip("no static build of " + version)
        python = PYTHONS[version]
    work = tmp_path / "w"
    work.mkdir()
    t = Target(python, "stacks.py", str(work), ["--threads", "3", "--depth",
                                                 "10", "--load-libpython", copy])
    try:
        with open("/proc/%d/maps" % t.pid) as f:
            assert copy in f.read()
        assert_matches_truth(dump_json(str(t.pid)), t.truth)
        if kernel_cores_land_here():
            core = t.abort()
            assert_matches_truth(dump_json("--core", core), t.truth)
            os.unlink(core)
    finally:
        t.close()


def test_moved_binaries(tmp_path):
    """A core read where its binaries are no longer at the paths it names:
    --sysroot for all of them, --exe for the executable."""
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    label, python = first("3.14", "3.13")  # a self-contained prefix
    prefix = os.path.dirname(os.path.dirname(python))
    if label.endswith("-shared") or "debian" in label:
        pytest.skip("needs a relocatable static build")
    moved = str(tmp_path / "opt" / "py")
    shutil.copytree(prefix, moved, symlinks=True)
    exe = os.path.join(moved, "bin", os.path.basename(python))
    work = tmp_path / "w"
    work.mkdir()
    t = Target(exe, "stacks.py", str(work), ["--threads", "4", "--depth", "25"])
    core = t.abort()
    sysroot = str(tmp_path / "sysroot")
    os.makedirs(sysroot + os.path.dirname(moved))
    shutil.move(moved, sysroot + moved)
    assert not os.path.exists(exe)
    assert_matches_truth(dump_json("--core", core, "--sysroot", sysroot),
                         t.truth)
    assert_matches_truth(dump_json("--core", core, "--exe",
                                   sysroot + exe), t.truth)
    # binaries gone altogether: the runtime is found by scanning the core's
    # writable memory for the cookie, code objects by their contents
    empty = str(tmp_path / "empty")
    os.mkdir(empty)
    assert_matches_truth(dump_json("--core", core, "--sysroot", empty),
                         t.truth, names=False)
    shutil.rmtree(sysroot)  # a copy of an interpreter and a core: keep no
    os.unlink(core)         # gigabytes behind


def test_live_status(tmp_path):
    """The busy thread runs (on CPU, holding the GIL in GIL builds); the
    thread in an except block is handling an exception; the rest sleep."""
    for label, python in PYTHONS.items():
        work = tmp_path / label
        work.mkdir()
        t = Target(python, "stacks.py", str(work), ["--threads", "2",
                                                     "--depth", "10"])
        try:
            roles = {k: str(v) for k, v in t.truth["roles"].items()}
            # (dumps until one finds it on a CPU: the scheduler may have
            # it runnable, for longer on a loaded machine)
            deadline = time.monotonic() + DEADLINE
            while True:
                dump = dump_json(str(t.pid))
                by_id = {str(x["thread_id"]): x for x in dump["threads"]
                         if x["interpreter_id"] == 0}
                busy = by_id[roles["busy"]]["status"]
                ok = "on_cpu" in busy and (dump["python"]["free_threaded"]
                                           or "has_gil" in busy)
                if ok or time.monotonic() > deadline:
                    break
            assert ok, (label, busy)
            assert "exception" in by_id[roles["except"]]["status"], label
            for role in ("closure", "recursion", "main"):
                st = by_id[roles[role]]["status"]
                assert "on_cpu" not in st and "has_gil" not in st, (label, role, st)
                assert "exception" not in st, (label, role, st)
        finally:
            t.close()


@pytest.mark.parametrize("label", sorted(PYTHONS))
def test_gc_status(label):
    """A thread parked in a finalizer inside gc.collect() is running the
    collector.  CPython 3.15 records the frame that started a collection,
    so there it must be named; before 3.15 the only hint is the GIL, which
    a sleeping finalizer does not hold, so nothing may be named wrongly."""
    from conftest import TARGETS
    p = subprocess.Popen([PYTHONS[label], os.path.join(TARGETS, "gc_park.py")],
                         stdout=subprocess.PIPE, text=True)
    try:
        collector = int(p.stdout.readline())
        assert p.stdout.readline().strip() == "ready"
        # (both threads asleep, so neither holds the GIL: the main thread
        # prints "ready" before its sleep, and a loaded machine may keep
        # it between the two for as long as a dump takes to start)
        def asleep():
            task = "/proc/%d/task" % p.pid
            try:
                return all(open(os.path.join(task, t, "stat")).read()
                           .rsplit(")", 1)[1].split()[0] == "S"
                           for t in os.listdir(task))
            except OSError:
                return False
        wait_until(asleep, "the target's threads to sleep")
        dump = dump_json(str(p.pid))
        gc_threads = [t["thread_id"] for t in dump["threads"]
                      if "gc" in t["status"]]
        if dump["python"]["version"].startswith("3.15"):
            assert gc_threads == [collector], dump["threads"]
        else:
            assert gc_threads in ([], [collector])
    finally:
        p.kill()
        p.wait()
