"""dump --locals against the target's own record of its variables
(tests/targets/locals.py: f_locals of each live frame, with what
docs/dump.md says is shown for each value, made with Python's own repr),
on every interpreter scripts/get-pythons lists: live, from a gcore core and
from the kernel's core, in gdb and lldb, and from gdb's scripting API; and
against a target that keeps replacing its values while they are read."""

import json
import os
import subprocess
import tempfile
import time

import pytest

from conftest import (DEADLINE, Target, allow_core, has_guard_regions,
                      interpreters, kernel_cores_land_here, matrix, py315,
                      pyunwind)

# (`builds`: the variables read hold on every build, 3.9 and 3.10
# among them, conftest.OTHER_BUILDS)
pytestmark = pytest.mark.builds
PYTHONS = interpreters()
TEXT = 508  # bytes of a value's text before it is cut (then "...")


def locals_target(param, prefix):
    """The locals target with two threads, as a module fixture."""
    label, python = param
    with tempfile.TemporaryDirectory(prefix=prefix) as d:
        t = Target(python, "locals.py", d, ["--threads"],
                   expect_threads=False)
        with open(t.truth_path + ".thread", encoding="utf-8") as f:
            t.thread_truth = json.load(f)
        t.label, t.python = label, python
        yield t
        t.close()


@pytest.fixture(scope="module", params=PYTHONS, ids=[p[0] for p in PYTHONS])
def target(request):
    yield from locals_target(request.param, "pyu-locals-")


def dump_locals(*args):
    r = pyunwind("dump", "--locals", "--json", *args)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def kind_of(frame_truth, name):
    if name in frame_truth["args"]:
        return "argument"
    if name in frame_truth["free"]:
        return "free"
    if name in frame_truth["cells"]:
        return "cell"
    return "local"


def assert_value(got, want, where):
    """got is what pyunwind shows, want what the target says it should
    (before the whole text is cut at TEXT bytes)."""
    if len(want.encode()) <= TEXT + 3:
        assert got == want, where
    else:  # cut: a prefix of it, then "..."
        assert got.endswith("...") and want.startswith(got[:-3]), where
        assert len(got[:-3].encode()) > TEXT - 4, where


def assert_frames_match(frames, truth, label):
    """The innermost frames of a thread equal the target's record: the
    same functions, the same bound variables with the same kinds, types,
    values and addresses."""
    assert len(frames) >= len(truth), label
    for k, ft in enumerate(truth):
        f = frames[k]
        where = "%s: frame %d (%s)" % (label, k, ft["function"])
        assert f["name"] == ft["function"], where
        assert f["locals_error"] is None, where
        got = {v["name"]: v for v in f["locals"]}
        assert sorted(got) == sorted(ft["locals"]), where
        for name, want in ft["locals"].items():
            v = got[name]
            w = "%s: %s" % (where, name)
            assert v["kind"] == kind_of(ft, name), w
            assert v["type"] == want["type"], w
            assert_value(v["value"], want["shown"], w)
            assert v["address"] in (want["id"], None), w
            if v["address"] is None:  # an int tagged in its slot
                assert want["type"] == "int", w
        # arguments come first, in the code's order
        args = [v["name"] for v in f["locals"] if v["kind"] == "argument"]
        assert args == [a for a in ft["args"] if a in got], where
        assert [v["name"] for v in f["locals"]][:len(args)] == args, where


def check_dump(dump, t):
    threads = {th["main"]: th for th in dump["threads"]}
    assert_frames_match(threads[True]["frames"], t.truth, t.label)
    assert_frames_match(threads[False]["frames"], t.thread_truth,
                        t.label + " (thread)")


def test_live(target):
    dump = dump_locals(str(target.pid))
    check_dump(dump, target)
    # the values the target holds, by kind, as the docs show them
    inner = {v["name"]: v for v in
             next(th for th in dump["threads"] if th["main"])
             ["frames"][0]["locals"]}
    assert inner["rest"]["value"] == "('extra', 84)"
    assert inner["options"]["value"] == "{'key': 'value'}"
    assert inner["cyclic"]["value"] == "[1, [...]]"
    assert inner["huge"]["value"] == "<int of 31700 bits>"
    assert inner["point"]["value"].startswith("<Point at 0x")


def test_text(target):
    """The text: each frame's arguments, then its other variables, under
    its lines; a recursion is not folded (its frames' values differ)."""
    r = pyunwind("dump", "--locals", str(target.pid))
    assert r.returncode == 0, r.stderr
    main = r.stdout.split("\n\n")[1:]
    main = next(block for block in main if "main thread" in block)
    assert "Previous line repeated" not in main
    assert main.count("in spread\n") == 21
    lines = main.splitlines()
    at = next(i for i, line in enumerate(lines) if line.endswith("in inner"))
    body = lines[at + 2:]  # (after the source line and its carets)
    while body and not body[0].strip(" ^~"):
        body = body[1:]
    assert body[0] == "      Arguments:"
    assert body[1] == "        out = '%s'" % target.truth_path
    assert "      Locals:" in body
    assert "        quote = \"it's\"" in body
    assert "        both = 'it\\'s \"quoted\"'" in body


def test_gcore(target):
    core = os.path.join(os.path.dirname(target.truth_path), "gcore")
    r = subprocess.run(["gcore", "-o", core, str(target.pid)],
                       capture_output=True, text=True, timeout=120)
    path = "%s.%d" % (core, target.pid)
    assert r.returncode == 0 and os.path.exists(path), r.stderr
    try:
        r = pyunwind("dump", "--locals", "--json", "--core", path)
        guarded = has_guard_regions(target.pid)
        assert r.returncode == 0 or (r.returncode == 5 and guarded), r.stderr
        dump = json.loads(r.stdout)
        threads = {th["main"]: th for th in dump["threads"]}
        assert threads[True]["error"] is None
        assert_frames_match(threads[True]["frames"], target.truth,
                            target.label)
        # gdb 13 writes zeros around guarded thread stacks: the other
        # thread is right as far as it goes
        frames = threads[False]["frames"]
        assert_frames_match(frames, target.thread_truth[:len(frames)],
                            target.label + " (thread)")
    finally:
        os.unlink(path)


@pytest.mark.skipif(not kernel_cores_land_here(),
                    reason="core_pattern sends cores elsewhere")
def test_kernel_core(tmp_path):
    """The kernel's core leaves file-backed pages out (type names, the
    code's constants): they come from the files, as for frames."""
    python = py315(PYTHONS)
    t = Target(python, "locals.py", str(tmp_path), expect_threads=False)
    t.label, t.thread_truth = "3.15 kernel core", None
    core = t.abort()
    assert core, "no core written"
    dump = dump_locals("--core", core)
    main = next(th for th in dump["threads"] if th["main"])
    assert_frames_match(main["frames"], t.truth, t.label)


def test_without_locals_no_key(target):
    """Without --locals the JSON is what it was: no "locals" keys."""
    r = pyunwind("dump", "--json", str(target.pid))
    assert r.returncode == 0, r.stderr
    assert '"locals"' not in r.stdout


CHURN = r"""
import sys, threading, time
def churn():
    box = [list(range(50))]
    while True:
        text = "v" * (len(box) % 300)
        data = {i: [i] * 3 for i in range(40)}
        box = [data, text, (text, box[:1])]
        box.append(set(range(len(text))))
        more = [str(i) * 30 for i in range(20)]
        del more[::2]
def idle():
    time.sleep(3600)
for _ in range(2):
    threading.Thread(target=churn, daemon=True).start()
print("ready", flush=True)
idle()
"""


def test_values_freed_while_read(tmp_path):
    """Values replaced and freed all the time, read without stopping the
    target (--nonblocking): every read ends with a dump (exit 0, or 5 with
    one line for a thread torn mid-read) and no crash; what cannot be read
    shows as <unreadable>."""
    python = py315(PYTHONS)
    script = tmp_path / "churn.py"
    script.write_text(CHURN)
    p = subprocess.Popen([python, str(script)], stdout=subprocess.PIPE,
                         text=True, preexec_fn=allow_core)
    try:
        assert p.stdout.readline().strip() == "ready"
        shown = 0
        # (40 reads, or as many as 20 s allow once one has shown the
        # local: a loaded machine reads fewer, and may need more of them
        # before one shows it)
        deadline = time.time() + 20
        runs = 0
        while runs < 40 and (time.time() < deadline or not shown):
            assert time.time() < deadline + DEADLINE, (runs, shown)
            runs += 1
            r = pyunwind("dump", "--locals", "--json", "--nonblocking",
                         str(p.pid))
            assert r.returncode in (0, 5), r.stderr
            assert len(r.stderr.strip().splitlines()) <= 1, r.stderr
            d = json.loads(r.stdout)
            for th in d["threads"]:
                for f in th["frames"]:
                    if f["name"] == "churn":
                        shown += sum(v["name"] == "box" for v in
                                     f["locals"] or [])
        assert p.poll() is None  # the target lives on
        assert shown > 0
    finally:
        p.kill()
        p.wait()


# ------------------------------------------------------------ debuggers

from debuggers import DEBUGGERS, Server, require_plugin  # noqa: E402

DEBUGGER_PYTHONS = [p for p in PYTHONS if p[0] in
                    ("3.11.2-debian", matrix("3.13t"), matrix("3.14"),
                     "3.15.2-debian")] or PYTHONS[:1]


@pytest.fixture(scope="module", params=DEBUGGER_PYTHONS,
                ids=[p[0] for p in DEBUGGER_PYTHONS])
def dtarget(request):
    yield from locals_target(request.param, "pyu-locals-dbg-")


@pytest.fixture(params=DEBUGGERS, ids=[d.name for d in DEBUGGERS])
def dbg(request):
    return require_plugin(request.param)


def debugger_locals(dbg, setup, tmp, cli_args):
    """py-dump --locals in the debugger (JSON and text to files) and the
    CLI's on the same target; gdb's pyunwind_gdb.dump(locals=True) too.
    Returns (JSON dump, transcript, CLI text, debugger text, API dump)."""
    pre, args, post = setup
    dj, dt = tmp / "dbg.json", tmp / "dbg.txt"
    ct, api = tmp / "cli.txt", tmp / "api.json"
    commands = ["py-dump --locals --json -o %s" % dj,
                "py-dump --locals -o %s" % dt,
                dbg.shell("%s dump --locals %s > %s"
                          % (pyunwind_path(), cli_args, ct))]
    if dbg.name == "gdb":
        commands.append(
            "python import json, pyunwind_gdb; json.dump(pyunwind_gdb.dump("
            "locals=True), open('%s', 'w'))" % api)
    tr = dbg.run(commands + list(post), args, setup=pre)
    assert "Traceback" not in tr.text and "Python Exception" not in tr.text, \
        tr.text[-3000:]
    assert dj.exists() and dt.exists(), tr.text[-3000:]
    return (json.loads(dj.read_text()), tr, ct.read_text(), dt.read_text(),
            json.loads(api.read_text()) if api.exists() else None)


def pyunwind_path():
    from conftest import PYUNWIND
    return PYUNWIND


@pytest.mark.debugger
def test_debugger_attach(dbg, dtarget, tmp_path):
    dump, tr, cli, text, api = debugger_locals(
        dbg, dbg.attach(dtarget.pid), tmp_path, str(dtarget.pid))
    check_dump(dump, dtarget)
    assert text == cli  # byte for byte the CLI's
    if dbg.name == "gdb":
        assert api == dump


@pytest.mark.debugger
def test_debugger_remote(dbg, dtarget, tmp_path):
    """Over gdbserver / lldb-server on loopback: every read goes through
    the debugger's memory."""
    server = Server(dbg, dtarget.pid)
    try:
        dump, tr, cli, text, api = debugger_locals(
            dbg, dbg.remote(server.port), tmp_path, str(dtarget.pid))
    finally:
        server.close()
    check_dump(dump, dtarget)
    # (source lines come from this machine's files too: the same text)
    assert text == cli
    if dbg.name == "gdb":
        assert api == dump


@pytest.mark.debugger
def test_debugger_core(dbg, tmp_path):
    python = py315(PYTHONS)
    t = Target(python, "locals.py", str(tmp_path), expect_threads=False)
    t.label = "3.15 kernel core in " + dbg.name
    try:
        core = t.abort()
        if not core:
            pytest.skip("no kernel core written here")
        dump, tr, cli, text, api = debugger_locals(
            dbg, dbg.core(python, core), tmp_path,
            "--core %s --exe %s" % (core, python))
    finally:
        t.close()
    main = next(th for th in dump["threads"] if th["main"])
    assert_frames_match(main["frames"], t.truth, t.label)
    assert text == cli
