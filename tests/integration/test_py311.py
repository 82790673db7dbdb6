"""CPython 3.11, which publishes no _Py_DebugOffsets: what the other tests
(run on every interpreter, 3.11 among them) do not reach.  The runtime in
libpython3.11.so (a program that embeds it), found by a scan of memory
when the binaries are gone, and the GIL as 3.11 keeps it (one for the
runtime), each against the target's own record."""

import json
import os
import shutil
import subprocess

import pytest

from conftest import (TARGETS, Target, assert_matches_truth, dump_json,
                      interpreters, kernel_cores_land_here, pyunwind)

PY311 = [p for p in interpreters() if p[0].startswith("3.11")]
pytestmark = pytest.mark.skipif(not PY311, reason="no CPython 3.11 installed")


def release_311():
    return next((p for label, p in PY311 if not label.endswith("-dbg")),
                PY311[0][1] if PY311 else None)


def build_embed(python, out):
    """tests/targets/ext/embed.c linked with `python`'s libpython."""
    config = python + "-config"
    if not os.path.exists(config):
        pytest.skip("no %s (the -dev package)" % config)
    flags = subprocess.run(
        [config, "--includes", "--ldflags", "--embed"], capture_output=True,
        text=True, check=True).stdout.split()
    exe = os.path.join(str(out), "embed")
    subprocess.run(["gcc", "-O1", "-o", exe,
                    os.path.join(TARGETS, "ext", "embed.c"), *flags],
                   check=True, capture_output=True, timeout=120)
    return exe


def test_runtime_in_libpython(tmp_path):
    """A program embedding libpython3.11.so: the runtime is found in the
    library (section and symbol at its load bias), every thread equals the
    target's record."""
    exe = build_embed(release_311(), tmp_path)
    t = Target(exe, "stacks.py", str(tmp_path),
               ["--threads", "3", "--depth", "20"])
    try:
        maps = open("/proc/%d/maps" % t.pid).read()
        assert "libpython3.11" in maps
        r = pyunwind("dump", "--verbose", str(t.pid))
        assert r.returncode == 0, r.stderr
        assert "in /usr/lib/x86_64-linux-gnu/libpython3.11.so" in r.stderr, \
            r.stderr
        assert_matches_truth(dump_json(str(t.pid)), t.truth)
    finally:
        t.close()


@pytest.mark.skipif(not kernel_cores_land_here(),
                    reason="core_pattern sends cores elsewhere")
def test_binaries_gone(tmp_path):
    """A kernel core whose python executable is gone: no section, symbol
    or Py_Version to go by, so the runtime is found by its shape in a scan
    of the core's writable memory (version "3.11"); the stacks are the
    target's own."""
    exe = tmp_path / "python3.11"
    shutil.copy(release_311(), exe)
    t = Target(str(exe), "stacks.py", str(tmp_path),
               ["--threads", "3", "--depth", "20", "--no-subinterpreter"])
    truth = t.truth
    core = t.abort()
    assert core, "the kernel wrote no core file"
    exe.unlink()
    r = pyunwind("dump", "--verbose", "--json", "--core", core)
    assert r.returncode in (0, 5), r.stderr
    assert "a scan of writable memory" in r.stderr, r.stderr
    dump = json.loads(r.stdout)
    assert dump["python"]["version"] == "3.11"
    truth = dict(truth, version="3.11")
    assert_matches_truth(dump, truth, names=False)  # (the binary's gone)


SPIN = r"""
import sys, threading, time
def spin():
    while True:
        pass
threading.Thread(target=spin, name="spinner").start()
time.sleep(0.3)
print(threading.main_thread().native_id, flush=True)
time.sleep(600)
"""


@pytest.mark.parametrize("label,python", PY311, ids=[p[0] for p in PY311])
def test_gil_holder(label, python):
    """3.11 keeps one GIL for the runtime: a thread spinning in Python
    holds it in nearly every dump, the main thread asleep never; and the
    sampler's gil mode records the spinner alone."""
    p = subprocess.Popen([python, "-c", SPIN], stdout=subprocess.PIPE,
                         text=True)
    try:
        main_tid = int(p.stdout.readline())
        held = []
        for _ in range(20):
            d = dump_json("--nonblocking", str(p.pid))
            holders = [t for t in d["threads"] if "has_gil" in t["status"]]
            assert len(holders) <= 1
            held += [t["native_thread_id"] for t in holders]
        assert main_tid not in held
        assert len(held) >= 15 and len(set(held)) == 1, held
        r = pyunwind("sample", "-d", "1", "--mode", "gil", "--format",
                     "collapsed", str(p.pid))
        assert r.returncode == 0, r.stderr
        lines = [ln for ln in r.stdout.splitlines() if ln]
        assert lines and all(":spin:" in ln for ln in lines), lines
    finally:
        p.kill()
        p.wait()


def test_scan_refuses_a_lookalike():
    """The scan looks for 3.11's shape and checks it: a process that is not
    Python is refused, its memory not read as a 3.11 runtime.  (bash:
    its heap once held a word that looked like interpreters.main, when the
    shape did not yet require interpreters.head)"""
    p = subprocess.Popen(["bash", "-c", "sleep 60; :"])
    try:
        r = pyunwind("dump", str(p.pid))
        assert r.returncode == 4
        assert "no CPython runtime found" in r.stderr, r.stderr
    finally:
        p.kill()
        p.wait()
