"""pyunwind dump against the target's own record of its stacks: live, from
a gcore core and from the core the kernel writes, on every interpreter that
scripts/get-pythons lists."""

import json
import os
import subprocess
import tempfile

import pytest

from conftest import (Target, assert_matches_truth, assert_prefix_of_truth,
                      dump_json, has_guard_regions, interpreters,
                      kernel_cores_land_here, pyunwind)

# (the dumps equal the targets' own records on every build of a
# version, conftest.OTHER_BUILDS)
pytestmark = pytest.mark.builds
PYTHONS = interpreters()


@pytest.fixture(scope="module", params=PYTHONS, ids=[p[0] for p in PYTHONS])
def target(request):
    label, python = request.param
    with tempfile.TemporaryDirectory(prefix="pyu-dump-") as d:
        t = Target(python, "stacks.py", d)
        t.label = label
        t.python = python
        yield t
        t.close()


def test_live(target):
    dump = dump_json(str(target.pid))
    assert dump["pid"] == target.pid
    assert dump["signal"] is None
    assert_matches_truth(dump, target.truth)
    by_id = {str(t["thread_id"]): t for t in dump["threads"]
             if t["interpreter_id"] == 0}
    roles = target.truth["roles"]
    assert "exception" in by_id[str(roles["except"])]["status"]
    assert "exception" in by_id[str(roles["generator_except"])]["status"]
    assert "exception" not in by_id[str(roles["closure"])]["status"]
    # every role: an exception status exactly where sys.exception() saw one
    # (a generator without a handler of its own, run inside an `except`
    # block, sees the caller's exception)
    for role, exc in target.truth["exceptions"].items():
        assert ("exception" in by_id[str(roles[role])]["status"]) == \
            (exc is not None), (role, exc)
    assert target.truth["exceptions"]["generator_in_except"] == "ValueError"
    if not dump["python"]["free_threaded"]:
        assert sum("has_gil" in t["status"] for t in dump["threads"]) <= 1


PEER_STATUS = """
import json, sys, _remote_debugging as rd
u = rd.RemoteUnwinder(int(sys.argv[1]), all_threads=True)
print(json.dumps({t.thread_id: t.status for i in u.get_stack_trace()
                  for t in i.threads}))
"""


def test_exception_status_against_cpython(target):
    """The exception status of every thread is the one CPython 3.15's own
    reader (RemoteUnwinder, THREAD_STATUS_HAS_EXCEPTION) gives."""
    if not target.label.startswith("3.15"):
        pytest.skip("RemoteUnwinder reports thread status from 3.15")
    r = subprocess.run([target.python, "-c", PEER_STATUS, str(target.pid)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    peer = {int(k): v for k, v in json.loads(r.stdout).items()}
    flag = 16  # THREAD_STATUS_HAS_EXCEPTION
    dump = dump_json(str(target.pid))
    ours = {t["native_thread_id"]: "exception" in t["status"]
            for t in dump["threads"] if t["interpreter_id"] == 0}
    assert set(ours) <= set(peer), "the peer names threads by native id"
    assert {k: bool(peer[k] & flag) for k in ours} == ours
    assert sum(ours.values()) >= 3  # except, generator_except, the new one


def test_live_nonblocking(target):
    """Read while the process runs (the busy thread keeps executing)."""
    dump = dump_json("--nonblocking", str(target.pid))
    assert_matches_truth(dump, target.truth)


def test_live_text(target):
    r = pyunwind("dump", str(target.pid))
    assert r.returncode == 0, r.stderr
    # the 1000-deep recursion is folded the way CPython's tracebacks fold it
    assert "[Previous line repeated 997 more times]" in r.stdout
    assert "    recurse(n - 1)\n" in r.stdout  # source lines are shown
    assert "main thread" in r.stdout


def test_live_output_file(target, tmp_path):
    out = tmp_path / "dump.json"
    r = pyunwind("dump", "--json", "-o", str(out), str(target.pid))
    assert r.returncode == 0 and r.stdout == "", r.stderr
    import json
    assert_matches_truth(json.loads(out.read_text()), target.truth)


def test_live_one_thread(target):
    """--thread picks one thread by native id or by Python ident."""
    roles = target.truth["roles"]
    ident = roles["closure"]
    native = target.truth["threads"]["0:%d" % ident]["native_id"]
    for key in (native, ident):
        dump = dump_json("--thread", str(key), str(target.pid))
        assert [t["thread_id"] for t in dump["threads"]] == [ident]
    r = pyunwind("dump", "--thread", "1", str(target.pid))
    assert r.returncode == 2 and "no Python thread has native id" in r.stderr


def test_live_verbose(target):
    r = pyunwind("dump", "--verbose", "--no-source", str(target.pid))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert lines[0] == "pyunwind: reading live process %d" % target.pid
    assert lines[1].startswith("pyunwind: CPython %s" % target.truth["version"])
    assert "_PyRuntime at 0x" in lines[1]


@pytest.mark.kinds
def test_gcore(target):
    guarded = has_guard_regions(target.pid)
    core = target.gcore()
    try:
        dump = dump_json("--core", core) if not guarded else None
        if guarded:
            r = pyunwind("dump", "--json", "--core", core)
            assert r.returncode in (0, 5), r.stderr
            import json
            dump = json.loads(r.stdout)
        assert dump["pid"] == target.pid
        assert dump["signal"] is None  # gcore: the process lived on
        if not guarded:
            assert_matches_truth(dump, target.truth)
            return
        assert_prefix_of_truth(dump, target.truth)
    finally:
        os.unlink(core)


def test_kernel_core(target):
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    core = target.abort()
    assert core, "the kernel wrote no core file"
    dump = dump_json("--core", core)
    assert_matches_truth(dump, target.truth)
    # NT_PRSTATUS: the signal, and the thread the kernel delivered it to
    natives = {t["native_id"] for t in target.truth["threads"].values()}
    assert dump["signal"]["number"] == 6
    assert dump["signal"]["native_thread_id"] in natives
    assert dump["threads"][0]["interpreter_id"] == 0
    # the executable given explicitly works as well
    dump = dump_json("--core", core, "--exe", target.python)
    assert_matches_truth(dump, target.truth)

