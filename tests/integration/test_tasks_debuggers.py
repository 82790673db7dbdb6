"""py-tasks in the real gdb and lldb, on every 3.14+ interpreter: attached,
over gdbserver / lldb-server on loopback, and on the kernel's core.  The
table, the tree and the JSON are byte for byte what `pyunwind tasks` writes
for the same process at the same moment, and the table's rows are the
peer's (see test_tasks.py)."""

import json
import os
import tempfile

import pytest

from conftest import Target, interpreters, kernel_cores_land_here, sleeping
from debuggers import DEBUGGERS, PLUGINS, Server, cli_command
from test_debuggers import assert_no_python_error, available
from test_tasks import ASYNC, assert_rows, peer_rows

pytestmark = pytest.mark.debugger


@pytest.fixture(params=DEBUGGERS, ids=[d.name for d in DEBUGGERS])
def dbg(request):
    if not available(request.param):
        pytest.fail("the %s plugin is not built" % request.param.name)
    return request.param


@pytest.fixture(scope="module", params=ASYNC, ids=[p[0] for p in ASYNC])
def target(request):
    label, python = request.param
    with tempfile.TemporaryDirectory(prefix="pyu-tasks-dbg-") as d:
        t = Target(python, "tasks.py", d, expect_threads=False)
        t.label, t.python = label, python
        t.version = label.split("-")[0].rstrip("t")
        t.core = None
        yield t
        t.close()


def tasks_session(dbg, setup, cli_args, tmp):
    """py-tasks as table, tree and JSON to files, the CLI the same from the
    debugger's shell; each pair byte-identical.  Returns the transcript."""
    pre, args, post = setup
    commands = []
    for fmt in ("", "--tree", "--json"):
        commands.append("py-tasks %s -o %s" % (fmt, tmp / ("dbg%s" % fmt)))
        commands.append(dbg.shell(cli_command(cli_args, tmp / ("cli%s" % fmt))
                                  .replace(" dump ", " tasks %s " % fmt)))
    commands.append("py-tasks --verbose")
    tr = dbg.run(commands + list(post), args, setup=pre)
    assert_no_python_error(tr)
    for fmt in ("", "--tree", "--json"):
        mine, cli = tmp / ("dbg%s" % fmt), tmp / ("cli%s" % fmt)
        assert mine.exists(), tr.text[-3000:]
        assert mine.read_bytes() == cli.read_bytes(), fmt
    printed = tr["py-tasks --verbose"]
    assert (tmp / "dbg").read_text() in printed
    return tr


def check_rows(target, tmp, peer):
    ours = (tmp / "dbg").read_text().splitlines()[2:]
    assert_rows(ours, peer, target.truth, target.pid, target.version)


def test_attach(dbg, target, tmp_path):
    peer = peer_rows(target.python, target.pid)
    setup = dbg.attach(target.pid)
    api = tmp_path / "api.json"
    # the scripting API (gdb's and lldb's): the same as --json
    calls = (["python import json, pyunwind_gdb; json.dump("
              "pyunwind_gdb.tasks(), open('%s', 'w'))" % api]
             if dbg.name == "gdb" else
             ["command script import "
              + os.path.join(PLUGINS, "pyunwind_lldb.py"),
              "script import json, pyunwind_lldb; json.dump("
              "pyunwind_lldb.tasks(lldb.debugger), open('%s', 'w'))" % api])
    setup = (setup[0], setup[1], [*calls, *setup[2]])
    tr = tasks_session(dbg, setup, str(target.pid), tmp_path)
    assert json.loads(api.read_text()) == \
        json.loads((tmp_path / "dbg--json").read_text())
    assert "pyunwind: reading live process %d directly" % target.pid in tr.text
    check_rows(target, tmp_path, peer)


@pytest.mark.kinds
def test_remote(dbg, target, tmp_path):
    peer = peer_rows(target.python, target.pid)
    server = Server(dbg, target.pid)
    try:
        tr = tasks_session(dbg, dbg.remote(server.port), str(target.pid),
                           tmp_path)
    finally:
        server.close()
    assert "through %s's memory" % dbg.name in tr.text
    check_rows(target, tmp_path, peer)


def test_kernel_core(dbg, target, tmp_path):
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    if target.core is None:
        target.peer = peer_rows(target.python, target.pid)
        target.core = target.abort()
    assert target.core, "the kernel wrote no core file"
    tr = tasks_session(dbg, dbg.core(target.python, target.core),
                       "--core " + target.core, tmp_path)
    assert "pyunwind: reading core file" in tr.text
    check_rows(target, tmp_path, target.peer)


def test_not_before_314(dbg, tmp_path):
    old = {}
    for label, path in interpreters():  # the first 3.11 and 3.13
        if label[:4] in ("3.11", "3.13"):
            old.setdefault(label[:4], path)
    if not old:
        pytest.skip("no 3.11 or 3.13 interpreter")
    for python in old.values():
        with sleeping(python) as p:
            pre, args, post = dbg.attach(p.pid)
            tr = dbg.run(["py-tasks", "py-tasks --tree", *post], args,
                         setup=pre)
            assert_no_python_error(tr)
            for c in ("py-tasks", "py-tasks --tree"):
                assert ("py-tasks: asyncio tasks need CPython 3.14 or newer"
                        in tr[c]), (python, tr[c])


def test_dump_async(dbg, tmp_path):
    """py-dump --async in the debugger is pyunwind dump --async."""
    if not ASYNC:
        pytest.skip("no interpreter with asyncio debug offsets among the "
                    "selected ones (PYU_ONLY)")
    label, python = ASYNC[-1]
    t = Target(python, "tasks.py", str(tmp_path), ["--running"],
               expect_threads=False)
    try:
        mine, cli = tmp_path / "dbg.txt", tmp_path / "cli.txt"
        js, api, via = (tmp_path / "dbg.json", tmp_path / "api.json",
                        tmp_path / "via-gdb.json")
        extra = []
        if dbg.name == "gdb":  # the scripting API builds the same objects
            extra = ["py-dump --json --async --thread %d -o %s" % (t.pid, js)]
            for path, more in ((api, ""), (via, ", through_gdb=True")):
                extra.append("python import json, pyunwind_gdb; json.dump("
                             "pyunwind_gdb.dump(thread=%d, async_stacks=True%s)"
                             ", open('%s', 'w'))" % (t.pid, more, path))
        pre, args, post = dbg.attach(t.pid)
        tr = dbg.run(["py-dump --async -o %s" % mine,
                      dbg.shell(cli_command("--async %d" % t.pid, cli)),
                      *extra, *post], args, setup=pre)
        assert_no_python_error(tr)
        assert mine.read_bytes() == cli.read_bytes()
        assert "[task 'runner' (0x" in mine.read_text()
        if dbg.name == "gdb":
            want = json.loads(js.read_text())
            assert [x["name"] for x in want["threads"][0]["tasks"]][:2] == \
                ["runner", "waiter"]
            assert json.loads(api.read_text()) == want
            assert json.loads(via.read_text()) == want
    finally:
        t.close()
