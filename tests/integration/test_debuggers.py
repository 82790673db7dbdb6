"""py-dump inside the real gdb and lldb, on every interpreter that
scripts/get-pythons lists: attached to a live process, over a remote
connection on loopback, on a gcore core, on the kernel's core, and in a
process run under the debugger to a breakpoint (the remote target, the
kernel's core and the breakpoint on one interpreter of each kind,
conftest.KINDS: on the others they read as attaching and gcore do).
Each time the dump equals the target's own record of its stacks, and the text is byte for byte what
`pyunwind dump` prints for the same process at the same moment."""

import json
import os
import signal
import subprocess
import tempfile
import time

import pytest

from conftest import (RUNNING, ROOT, TARGETS, TIMEOUT, Target,
                      allow_core,
                      assert_matches_truth, python_claiming, sleeping,
                      assert_prefix_of_truth, has_guard_regions, interpreters,
                      kernel_cores_land_here)
from debuggers import (DEBUGGERS, GDB_SCRIPT, LLDB, LLDB_PLUGIN, LLDB_SERVER,
                       PLUGINS, Server, cli_command, process_state)

# (`builds`: attached and on cores, the dumps equal the targets' own
# records on every build of a version, conftest.OTHER_BUILDS)
pytestmark = [pytest.mark.debugger, pytest.mark.builds]
PYTHONS = interpreters()


def available(dbg):
    if dbg.name == "gdb":
        return os.path.exists(GDB_SCRIPT)
    return bool(LLDB and LLDB_SERVER and os.path.exists(LLDB_PLUGIN))


@pytest.fixture(params=DEBUGGERS, ids=[d.name for d in DEBUGGERS])
def dbg(request):
    if not available(request.param):
        pytest.fail("the %s plugin is not built (scripts/setup builds it)"
                    % request.param.name)
    return request.param


@pytest.fixture(scope="module", params=PYTHONS, ids=[p[0] for p in PYTHONS])
def target(request):
    label, python = request.param
    with tempfile.TemporaryDirectory(prefix="pyu-dbg-") as d:
        t = Target(python, "stacks.py", d)
        t.label, t.python = label, python
        t.cores = {}
        yield t
        t.close()


def assert_no_python_error(tr):
    """No Python traceback from the plugin and no crash of the debugger."""
    for mark in ("Python Exception", "Error occurred in Python",
                 "Traceback (most recent call last):\n  File \"/work"
                 "/main/gdb-plugin", "PLEASE submit a bug report"):
        assert mark not in tr.text, tr.text[-3000:]
    assert tr.proc.returncode == 0, tr.text[-3000:]


def session(dbg, setup, cli_args, tmp, extra=()):
    """Runs py-dump in the debugger (text to a file, JSON to a file, text
    without source to the debugger's output) and the CLI on the same target
    from the debugger's shell; checks what every mode shares and returns
    (JSON dump, transcript)."""
    pre, args, post = setup
    dbg_txt, dbg_json = tmp / "dbg.txt", tmp / "dbg.json"
    cli_txt, cli_nosrc = tmp / "cli.txt", tmp / "cli-nosrc.txt"
    commands = [dbg.selection(),
                "py-dump --verbose -o %s" % dbg_txt,
                "py-dump --json -o %s" % dbg_json,
                dbg.shell(cli_command(cli_args, cli_txt)),
                dbg.shell(cli_command("--no-source " + cli_args, cli_nosrc)),
                "py-dump --no-source",
                *extra, dbg.selection(), *post]
    tr = dbg.run(commands, args, setup=pre)
    assert_no_python_error(tr)
    assert dbg_json.exists(), tr.text[-3000:]
    # one renderer: byte-identical to the CLI
    assert dbg_txt.read_bytes() == cli_txt.read_bytes(), tr.text[-2000:]
    printed = tr["py-dump --no-source"]
    assert printed is not None
    # (a dump with incomplete stacks: the CLI's warning line, which it
    # writes on stderr, is printed by the debugger with the dump)
    warnings = [line for line in printed.splitlines()
                if line.startswith("pyunwind: warning: ")]
    assert len(warnings) <= 1, warnings
    printed = "\n".join(line for line in printed.splitlines()
                         if not line.startswith("pyunwind: warning: "))
    assert printed.strip() == cli_nosrc.read_text(errors="replace").strip()
    # the selected thread and frame are what they were
    before, after = tr.outputs[0], tr.outputs[len(commands) - len(post) - 1]
    assert before == after and before and "py-dump" not in before, \
        (before, after)
    return json.loads(dbg_json.read_text()), tr


def api_dump(path, args=""):
    """A gdb command saving pyunwind_gdb.dump(args) as JSON to path."""
    return ("python import json, pyunwind_gdb; json.dump(pyunwind_gdb.dump("
            "%s), open('%s', 'w'))" % (args, path))


LLDB_MODULE = os.path.join(PLUGINS, "pyunwind_lldb.py")


def lldb_api(path, call):
    """An lldb command saving pyunwind_lldb's call (dump(...), tasks())
    as JSON to path."""
    return ("script import json, pyunwind_lldb; json.dump(pyunwind_lldb.%s, "
            "open('%s', 'w'))" % (call, path))


def test_attach(dbg, target, tmp_path):
    api, via_gdb = tmp_path / "api.json", tmp_path / "via-gdb.json"
    extra = []
    if dbg.name == "gdb":  # the scripting API returns the same data
        extra = [api_dump(api), api_dump(via_gdb, "through_gdb=True")]
    else:  # lldb's too
        extra = ["command script import " + LLDB_MODULE,
                 lldb_api(api, "dump(lldb.debugger)")]
    main_native = target.truth["threads"]["0:%d" % target.truth["main_ident"]]
    extra.append("py-dump --thread %d" % main_native["native_id"])
    dump, tr = session(dbg, dbg.attach(target.pid), str(target.pid),
                       tmp_path, extra)
    assert_matches_truth(dump, target.truth)
    assert "pyunwind: reading live process %d directly" % target.pid in tr.text
    one = tr["py-dump --thread"]
    assert "CPython %s" % target.truth["version"] in one and " 1 thread\n" in one
    assert "(native %d, main thread)" % main_native["native_id"] in one
    assert json.loads(api.read_text()) == dump
    if dbg.name == "gdb":
        assert_matches_truth(json.loads(via_gdb.read_text()), target.truth)
    # detached, running again: not left stopped
    assert process_state(target.pid) in RUNNING, process_state(target.pid)


@pytest.mark.kinds
def test_remote(dbg, target, tmp_path):
    server = Server(dbg, target.pid)
    try:
        dump, tr = session(dbg, dbg.remote(server.port), str(target.pid),
                           tmp_path)
    finally:
        server.close()
    assert_matches_truth(dump, target.truth)
    assert "through %s's memory" % dbg.name in tr.text, tr.text[-2000:]
    assert process_state(target.pid) in RUNNING


def gcore_of(target):
    if "gcore" not in target.cores:
        target.cores["guarded"] = has_guard_regions(target.pid)
        target.cores["gcore"] = target.gcore()
    return target.cores["gcore"]


def test_gcore(dbg, target, tmp_path):
    core = gcore_of(target)
    try:
        dump, tr = session(dbg, dbg.core(target.python, core),
                           "--core " + core, tmp_path)
        assert "pyunwind: reading core file %s" % core in tr.text
        assert dump["pid"] == target.pid and dump["signal"] is None
        if target.cores["guarded"]:  # gdb 13 left holes in this core
            assert_prefix_of_truth(dump, target.truth)
        else:
            assert_matches_truth(dump, target.truth)
    finally:
        if dbg is DEBUGGERS[-1]:  # the last debugger removes it (1-2 GB)
            os.unlink(core)


@pytest.mark.kinds
def test_kernel_core(dbg, target, tmp_path):
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    if "kernel" not in target.cores:
        target.cores["kernel"] = target.abort()
    core = target.cores["kernel"]
    assert core, "the kernel wrote no core file"
    via_gdb = tmp_path / "via-gdb.json"
    extra = [api_dump(via_gdb, "through_gdb=True")] if dbg.name == "gdb" else []
    dump, tr = session(dbg, dbg.core(target.python, core), "--core " + core,
                       tmp_path, extra)
    assert "pyunwind: reading core file %s" % core in tr.text
    assert_matches_truth(dump, target.truth)
    assert dump["signal"]["number"] == 6
    if dbg.name == "gdb":  # the core through gdb's memory: the same
        other = json.loads(via_gdb.read_text())
        assert_matches_truth(other, target.truth)
        assert other["signal"] == dump["signal"]
    # and through the debugger's memory, as for a remote target
    env = dict(os.environ, PYUNWIND_MEMORY="debugger")
    pre, args, post = dbg.core(target.python, core)
    tr = dbg.run(["py-dump --verbose --json -o %s" % via_gdb], args,
                 setup=pre, env=env)
    assert_no_python_error(tr)
    assert "through %s's memory" % dbg.name in tr.text, tr.text[-2000:]
    other = json.loads(via_gdb.read_text())
    # (lldb's reader of a kernel core gives none of the pages the core
    # leaves to the interpreter's file: no threading names there)
    assert_matches_truth(other, target.truth, names=dbg.name == "gdb")
    assert other["signal"] == dump["signal"]


@pytest.mark.kinds
def test_breakpoint(dbg, target, tmp_path):
    """Run the program under the debugger; it stops in the recorder thread
    (a breakpoint on getppid, called from checkpoint())."""
    truth_path = tmp_path / "truth.json"
    script = os.path.join(TARGETS, "stacks.py")
    pid_expr = "$(cat %s.pid)" % truth_path
    dump, tr = session(dbg, dbg.launch(target.python, [script, str(truth_path)]),
                       pid_expr, tmp_path)
    with open(truth_path, encoding="utf-8") as f:
        truth = json.load(f)
    rec = truth["recorder"]
    stopped = [t for t in dump["threads"]
               if t["interpreter_id"] == 0 and t["thread_id"] == rec["ident"]]
    assert stopped and stopped[0]["native_thread_id"] == rec["native_id"]
    assert [f["name"] for f in stopped[0]["frames"][:2]] == \
        ["checkpoint", "record"]
    dump["threads"] = [t for t in dump["threads"] if t is not stopped[0]]
    assert_matches_truth(dump, truth)
    assert "pyunwind: reading live process %d directly" % truth["pid"] in tr.text
    assert not os.path.exists("/proc/%d" % truth["pid"]) or \
        process_state(truth["pid"]) in "Zx"


# --------------------------------------------------------------- bad input

ALIVE = {"gdb": ("print 40 + 2", "= 42"), "lldb": ("version", "lldb version")}


def assert_debugger_error(dbg, tr, command, *words):
    """command failed with one debugger error line naming what was wrong,
    and the session went on: the next command worked."""
    assert_no_python_error(tr)
    out = tr[command]
    assert out is not None, tr.text[-2000:]
    lines = [line for line in out.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith(dbg.error_prefix)]
    assert len(errors) == 1, out
    for w in words:
        assert w in errors[0], errors[0]
    probe, expect = ALIVE[dbg.name]
    assert expect in tr[probe], tr.text[-2000:]


def bad_session(dbg, setup, *words, command="py-dump"):
    pre, args, post = setup
    probe = ALIVE[dbg.name][0]
    tr = dbg.run([command, probe, *post], args, setup=pre)
    assert_debugger_error(dbg, tr, command, *words)


def test_no_process(dbg):
    bad_session(dbg, ([], [], []), "no process")


def test_scripting_api_error(dbg):
    if dbg.name != "gdb":
        pytest.skip("the scripting API is gdb's")
    command = ("python import pyunwind_gdb\ntry:\n    pyunwind_gdb.dump()\n"
               "except pyunwind_gdb.Error as e:\n"
               "    print('caught', e.code, isinstance(e, gdb.GdbError), e)")
    tr = dbg.run([command])
    assert_no_python_error(tr)
    assert tr[command].startswith("caught 3 True no process"), tr.text


def test_usage_error(dbg):
    bad_session(dbg, ([], [], []), "unknown option '--frob'",
                command="py-dump --frob")
    bad_session(dbg, ([], [], []), "needs a value", command="py-dump -o")


@pytest.fixture
def sleeper():
    p = subprocess.Popen(["sleep", "300"], preexec_fn=allow_core)
    time.sleep(0.1)
    yield p
    p.kill()
    p.wait()


def test_not_python(dbg, sleeper):
    bad_session(dbg, dbg.attach(sleeper.pid), "no CPython runtime found")
    assert process_state(sleeper.pid) in RUNNING


def test_version_not_read(dbg, tmp_path):
    """A runtime claiming 3.8.18 (conftest.python_claiming): one line."""
    with sleeping(python_claiming(0x030812f0, tmp_path)) as p:
        bad_session(dbg, dbg.attach(p.pid),
                    "CPython 3.8.18 is not a version pyunwind reads",
                    "3.9-3.15")


def test_core_not_python(dbg, tmp_path):
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    p = subprocess.Popen(["sleep", "300"], cwd=tmp_path, preexec_fn=allow_core)
    time.sleep(0.2)
    p.send_signal(signal.SIGABRT)
    p.wait()
    cores = [n for n in os.listdir(tmp_path) if n.startswith("core")]
    assert cores, "no core from sleep"
    bad_session(dbg, dbg.core("/usr/bin/sleep", str(tmp_path / cores[0])),
                "no CPython runtime found")


# ------------------------------------------------------------ installation

@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`cmake --install` into a fresh prefix, and a home directory whose
    ~/.gdbinit and ~/.lldbinit hold the one line docs/gdb.md and
    docs/lldb.md give."""
    root = tmp_path_factory.mktemp("install")
    prefix, home = root / "prefix", root / "home"
    home.mkdir()
    r = subprocess.run(["cmake", "--install", os.path.join(ROOT, "build"),
                        "--prefix", str(prefix)], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    (home / ".gdbinit").write_text(
        "source %s/share/pyunwind/pyunwind-gdb.py\n" % prefix)
    (home / ".lldbinit").write_text(
        "plugin load %s/lib/pyunwind/libpyunwind-lldb.so\n" % prefix)
    return prefix, home


def test_installed(dbg, installed, tmp_path):
    prefix, home = installed
    label, python = PYTHONS[0]
    t = Target(python, "stacks.py", str(tmp_path),
               ["--threads", "3", "--depth", "4", "--no-subinterpreter"])
    out = tmp_path / "dump.json"
    try:
        env = dict(os.environ, HOME=str(home))
        if dbg.name == "gdb":  # no -nx: gdb reads ~/.gdbinit
            argv = ["gdb", "-batch", "-p", str(t.pid), "-ex",
                    "py-dump --json -o %s" % out]
            r = subprocess.run(argv, capture_output=True, text=True, env=env,
                               stdin=subprocess.DEVNULL, timeout=TIMEOUT)
        else:  # no -x: lldb reads ~/.lldbinit
            r = subprocess.run([LLDB, "--no-use-colors", "-p", str(t.pid)],
                               input="py-dump --json -o %s\nprocess detach\n"
                               "quit\n" % out, capture_output=True, text=True,
                               env=env, timeout=TIMEOUT)
        assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
        assert_matches_truth(json.loads(out.read_text()), t.truth)
    finally:
        t.close()


def test_gdb_completion(tmp_path):
    """Options complete with Tab, file names after -o."""
    from debuggers import Gdb
    (tmp_path / "out-file.txt").write_text("")
    prefix = str(tmp_path / "out-f")
    commands = ["complete py-dump --j", "complete py-dump --no",
                "complete py-dump --json -o " + prefix, "complete py-dump --"]
    tr = Gdb().run(commands)
    assert_no_python_error(tr)
    assert tr[commands[0]].split() == ["py-dump", "--json"]
    assert tr[commands[1]].split() == ["py-dump", "--no-source"]
    assert tr[commands[2]].split() == ["py-dump", "--json", "-o",
                                       str(tmp_path / "out-file.txt")]
    assert set(tr[commands[3]].split()) >= {"--json", "--output", "--thread",
                                            "--no-source", "--verbose"}
