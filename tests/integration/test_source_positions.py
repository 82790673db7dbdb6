"""dump's source lines: the running expression marked with carets as the
target's own traceback module marks it (3.11 and 3.13+ differ), the four
positions in JSON, and a source file changed after the process started
(or after the core was written) said in place of a line that may be
wrong; the same in gdb and lldb.

The target (tests/targets/carets.py) blocks inside a subscript, binary
operations and a call over two lines, down to threading's Event.wait;
another of its threads writes, for each frame of the blocked thread, its
positions and the lines its interpreter's traceback module writes for
them."""

import json
import os
import shutil
import time

import pytest

from conftest import TARGETS, Target, interpreters, labelled, pyunwind

# (positions, and so carets, from 3.11 on)
PYTHONS = [p for p in interpreters()
           if not p[0].startswith(("3.9.", "3.10."))]


class CaretTarget(Target):
    """carets.py, run from a copy of its own (its time is the test's)."""

    def __init__(self, python, workdir):
        self.script = os.path.join(workdir, "carets.py")
        shutil.copy(os.path.join(TARGETS, "carets.py"), self.script)
        self.started = time.time()
        super().__init__(python, self.script, workdir, expect_threads=False)
        self._wait_threads(1)  # (the recorder has ended)

    def set_script_time(self, t):
        os.utime(self.script, (t, t))


@pytest.fixture(scope="module", params=PYTHONS, ids=[p[0] for p in PYTHONS])
def target(request, tmp_path_factory):
    label, python = request.param
    t = CaretTarget(python, str(tmp_path_factory.mktemp("carets")))
    t.label = label
    yield t
    t.close()


def main_block(text, native_id):
    return next(b for b in text.split("\n\n")
                if "(native %d" % native_id in b.splitlines()[0])


def frames_text(block):
    """[(File line, the lines under it)], outermost first."""
    out = []
    for line in block.splitlines()[2:]:
        if line.startswith("  File "):
            out.append((line, []))
        elif out:
            out[-1][1].append(line)
    return out


def check_text(text, truth):
    got = frames_text(main_block(text, truth["native_id"]))
    want = list(reversed(truth["frames"]))
    assert len(got) == len(want), (got, want)
    for (head, lines), f in zip(got, want):
        assert ", line %d, in " % f["line"] in head, (head, f)
        assert "\n".join(lines) + "\n" == f["text"], (head, lines, f["text"])


def check_json(dump, truth):
    th = next(t for t in dump["threads"]
              if t["native_thread_id"] == truth["native_id"])
    got = [(f["line"], f["end_line"], f["column"], f["end_column"])
           for f in th["frames"]]
    want = [(f["line"], f["end_line"], f["col"], f["end_col"])
            for f in truth["frames"]]
    assert got == want
    return th


def changed_frames(th, script):
    return {f["source_changed"] for f in th["frames"] if f["file"] == script}


def test_carets_and_changed_sources(target, tmp_path):
    """Live, then from a gcore core: the lines under each frame equal the
    target's traceback's; then the script's time moved past the start
    (past the core's writing) puts the message in their place."""
    t = target
    t.set_script_time(t.started - 100)
    r = pyunwind("dump", str(t.pid))
    assert r.returncode == 0, r.stderr
    check_text(r.stdout, t.truth)
    r = pyunwind("dump", "--json", str(t.pid))
    th = check_json(json.loads(r.stdout), t.truth)
    assert changed_frames(th, t.script) == {False}
    # (threading.py, unchanged, in the same stack)
    assert {f["source_changed"] for f in th["frames"]
            if f["file"] != t.script} == {False}

    t.set_script_time(t.started + 30)
    r = pyunwind("dump", str(t.pid))
    frames = frames_text(main_block(r.stdout, t.truth["native_id"]))
    said = "    [source not shown: the file changed after the process started]"
    for head, lines in frames:
        if t.script in head:
            assert lines == [said], (head, lines)
        else:
            assert lines and lines != [said], (head, lines)
    th = check_json(json.loads(pyunwind("dump", "--json", str(t.pid)).stdout),
                    t.truth)
    assert changed_frames(th, t.script) == {True}

    core = t.gcore()
    written = os.stat(core).st_mtime
    t.set_script_time(written - 100)
    r = pyunwind("dump", "--core", core)
    assert r.returncode == 0, r.stderr
    check_text(r.stdout, t.truth)
    t.set_script_time(written + 30)
    r = pyunwind("dump", "--core", core)
    frames = frames_text(main_block(r.stdout, t.truth["native_id"]))
    assert [lines for head, lines in frames if t.script in head] == [[
        "    [source not shown: the file changed after the core was "
        "written]"]] * 4
    th = check_json(json.loads(pyunwind("dump", "--json", "--core",
                                        core).stdout), t.truth)
    assert changed_frames(th, t.script) == {True}
    os.unlink(core)


# ------------------------------------------------------------ debuggers

from debuggers import DEBUGGERS, require_plugin  # noqa: E402


@pytest.mark.debugger
@pytest.mark.parametrize("debugger", DEBUGGERS, ids=[d.name for d in DEBUGGERS])
def test_debuggers(debugger, tmp_path):
    """py-dump's text in gdb and lldb is the CLI's: carets, and the
    message for a changed file."""
    dbg = require_plugin(debugger)
    t = CaretTarget(labelled(PYTHONS, "3.15.2-debian"), str(tmp_path))
    try:
        t.set_script_time(t.started + 30)  # (its frames: the message)
        cli = pyunwind("dump", str(t.pid)).stdout
        out = tmp_path / "dbg.txt"
        pre, args, post = dbg.attach(t.pid)
        tr = dbg.run(["py-dump -o %s" % out, *post], args, setup=pre)
        assert out.exists(), tr.text[-3000:]
        text = out.read_text()
    finally:
        t.close()
    assert "^" in text and "[source not shown: the file changed" in text
    assert main_block(text, t.truth["native_id"]) == main_block(
        cli, t.truth["native_id"])
