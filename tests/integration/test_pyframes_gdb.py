"""gdb's py-bt, py-bt-full, py-up, py-down, py-list, py-locals, py-print
and pyunwind_gdb.selected_frame() (gdb-plugin/pyunwind_gdb/pyframes.py)
against the target's own record of its frames (tests/targets/pyframes.py:
<module> -> main -> Pipeline.run -> sorted() -> key_of -> leaf, two
eval-loop calls), in real gdb attached to the live process and on a gcore
core, on stripped and unstripped interpreters.  One gdb session per
interpreter and kind, many commands each."""

import os
import re
import shutil
import time

import pytest

from conftest import TARGETS, Target, interpreters
from debuggers import Gdb, require_plugin

PYTHONS = [p for p in interpreters() if p[0] in
           ("3.11.2-debian", "3.13.5", "3.13.5t", "3.14.7t",
            "3.15.2-debian")] or interpreters()[:1]
GDB = Gdb()

# gdb's native frame number that runs a Python function, as the frame
# filter of `bt` places it (the plugin's other half, not pyframes.py)
HELPER = '''
import re, gdb
def native_of(function):
    number = None
    for line in gdb.execute("bt", to_string=True).splitlines():
        m = re.match(r"#(\\d+) ", line)
        if m:
            number = int(m.group(1))
        elif line.strip().startswith("[Python] %s ()" % function):
            return number
'''

FRAME = re.compile(r'^(\* |  |#\d+ )File "(.*)", line (\d+), in (.*)$')


@pytest.fixture(scope="module", params=PYTHONS, ids=[p[0] for p in PYTHONS])
def target(request, tmp_path_factory):
    require_plugin(GDB)
    label, python = request.param
    work = str(tmp_path_factory.mktemp("pyframes"))
    # the script is a copy of its own, so that it can be changed under a
    # core
    script = os.path.join(work, "pyframes.py")
    shutil.copy(os.path.join(TARGETS, "pyframes.py"), script)
    with open(os.path.join(work, "helper.py"), "w") as f:
        f.write(HELPER)
    t = Target(python, script, work, expect_threads=False)
    t._wait_threads(2)  # (the thread that wrote the truth has ended,
    # the one without Python has not)
    t.label, t.python, t.script = label, python, script
    with open(script, encoding="utf-8") as f:
        t.lines = f.read().splitlines()
    yield t
    t.close()


def commands(t):
    return [
        "py-bt",                                        # 0
        "py-down",                                      # 1
        "py-up",                                        # 2
        "py-up",                                        # 3
        "frame",                                        # 4
        "py-list",                                      # 5
        "py-locals",                                    # 6
        "py-print table",                               # 7
        "py-down",                                      # 8
        "py-print word",                                # 9
        "py-print nosuch",                              # 10
        "py-down",                                      # 11
        "py-locals",                                    # 12
        "py-up 999",                                    # 13
        "py-up",                                        # 14
        "py-bt-full",                                   # 15
        "frame 0",                                      # 16
        "py-bt",                                        # 17
        "python print('NATIVE', native_of('Pipeline.run'), "
        "native_of('<module>'))",                       # 18
        "python gdb.execute('frame %d' % native_of('<module>'))",  # 19
        "py-bt",                                        # 20
        "python f = pyunwind_gdb.selected_frame(); print('SELECTED', "
        "f['index'], f['function'], f['line'], "
        "{v['name']: v['value'] for v in f['locals']})",  # 21
        "py-up",                                        # 22
        "py-list 1,3",                                  # 23
        "py-list 2",                                    # 24
        "py-up x",                                      # 25
        "py-list 1,x",                                  # 26
        "help py-bt",                                   # 27
    ]


def frames_of(text):
    """[(marker, file, line, function)] and the lines under each."""
    out = []
    for line in text.splitlines():
        m = FRAME.match(line)
        if m:
            out.append([m.group(1), m.group(2), int(m.group(3)), m.group(4),
                        []])
        elif out:
            out[-1][4].append(line)
    return out


def assert_frame(text, t, k):
    """text is py-up's / py-down's "#K File ..." and the source line."""
    truth = t.truth["frames"][k]
    lines = text.strip("\n").splitlines()
    assert lines[0] == '#%d File "%s", line %d, in %s' % (
        k, truth["file"], truth["line"], truth["function"]), text
    assert lines[1] == "    " + t.lines[truth["line"] - 1].strip(), text
    assert len(lines) == 2, text


def assert_bt(text, t, marked):
    frames = frames_of(text)
    assert text.startswith("Traceback (most recent call first):\n"), text
    truth = t.truth["frames"]
    assert [(f[1], f[2], f[3]) for f in frames] == \
        [(f["file"], f["line"], f["function"]) for f in truth], text
    assert [f[0] for f in frames] == \
        ["* " if k == marked else "  " for k in range(len(truth))], text
    for f in frames:
        assert f[4] == ["    " + t.lines[f[2] - 1].strip()], text


def locals_lines(t, k):
    return ["%s = %s" % kv for kv in t.truth["frames"][k]["locals"].items()]


def check_moves(out, t, error, at_top):
    """What gdb and lldb print alike for commands 5 to 15 (commands()):
    py-list, py-locals, py-print, py-down, py-up 999, py-bt-full; error:
    how the debugger prefixes an error's line; at_top: its message for
    `up` at the outermost frame."""
    truth = t.truth["frames"]
    # py-list: five lines around the frame's, the frame's marked
    line = truth[2]["line"]
    want = ["%4s    %s" % ((">" if n == line else "") + str(n),
                           t.lines[n - 1]) for n in range(line - 5, line + 6)]
    assert out[5].strip("\n").splitlines() == want, out[5]
    got = out[6].strip("\n").splitlines()
    assert set(locals_lines(t, 2)) <= set(got), out[6]
    assert got[0] == "self = <Pipeline at 0x%s>" % got[0].split("0x")[1][:-1]
    assert got[1] == "limit = 42", out[6]
    assert out[7].strip() == "local 'table' = %s" % \
        truth[2]["locals"]["table"]
    assert_frame(out[8], t, 1)
    assert out[9].strip() == "local 'word' = %s" % truth[1]["locals"]["word"]
    assert out[10].strip() == error + "'nosuch' not found"
    assert_frame(out[11], t, 0)
    assert out[12].strip("\n").splitlines() == locals_lines(t, 0)
    assert_frame(out[13], t, 4)  # as the debugger's `up 999`: to the outermost
    assert out[14].strip() == error + at_top
    full = frames_of(out[15])
    assert [f[0] for f in full] == ["#%d " % k for k in range(len(truth))]
    assert full[0][4][1:] == ["      Arguments:",
                              "        depth = %s" % truth[0]["locals"]
                              ["depth"],
                              "        label = %s" % truth[0]["locals"]
                              ["label"],
                              "      Locals:",
                              "        ratio = 0.25",
                              "        flags = [True, None, 3]"], out[15]


def check_changed(out, t, error):
    """py-list and py-bt (out) after the script was touched past the
    core's time: each says so in one line (error: how the debugger
    prefixes an error's line)."""
    assert out[0].strip() == (
        "%spy-list: source not shown: %s changed after the core was "
        "written" % (error, t.script)), out[0]
    said = "    [source not shown: the file changed after the core " \
           "was written]"
    frames = frames_of(out[1])
    assert [f[4] for f in frames] == [[said]] * 5, out[1]


def check(tr, t):
    out = tr.outputs
    assert "Traceback (most recent call last)" not in tr.text and \
        "Python Exception" not in tr.text, tr.text[-3000:]
    truth = t.truth["frames"]
    assert [f["function"] for f in truth] == [
        "leaf", "key_of", "Pipeline.run", "main", "<module>"]
    assert_bt(out[0], t, 0)
    assert out[1].strip() == \
        "Bottom (innermost) frame selected; you cannot go down."
    assert_frame(out[2], t, 1)
    assert_frame(out[3], t, 2)
    # gdb's selected frame is the eval loop's that runs Pipeline.run
    native = re.search(r"^NATIVE (\d+) (\d+)$", out[18], re.M)
    assert native and native.group(1) == native.group(2), out[18]
    assert out[4].startswith("#%s " % native.group(1)), out[4]
    check_moves(out, t, "",
                "Initial frame selected; you cannot go up.")
    assert_bt(out[17], t, 0)   # gdb's frame 0: the innermost again
    assert_bt(out[20], t, 2)   # the native frame of <module>: the innermost
    # Python frame it runs
    sel = re.search(r"^SELECTED 2 Pipeline.run (\d+) (.*)$", out[21], re.M)
    assert sel and int(sel.group(1)) == truth[2]["line"], out[21]
    assert "'limit': '42'" in sel.group(2), out[21]
    assert_frame(out[22], t, 3)  # (the same native frame)
    assert out[23].strip("\n").splitlines() == [
        "%4s    %s" % (n, t.lines[n - 1]) for n in (1, 2, 3)]
    assert out[24].strip("\n").splitlines() == [
        "%4s    %s" % (n, t.lines[n - 1]) for n in range(2, 13)]
    assert out[25].strip() == "py-up: 'x' is not a number of frames"
    assert out[26].strip().startswith("py-list: '1,x': give a line")
    assert '"* "' in out[27]
    # every error is one line
    for k in (1, 10, 14, 25, 26):
        assert len(out[k].strip().splitlines()) == 1, out[k]


def run(t, args, more=()):
    tr = GDB.run(commands(t) + list(more), args,
                 setup=["source " + os.path.join(t.workdir, "helper.py")])
    assert all(o is not None for o in tr.outputs), tr.text[-3000:]
    return tr


@pytest.mark.debugger
def test_live(target):
    # then the inferior runs (and stops on a signal it ignores): the
    # selection starts again at the innermost frame
    tr = run(target, ["-p", str(target.pid)], [
        "py-up 2", "handle SIGWINCH stop print nopass",
        "shell kill -WINCH %d" % target.pid, "continue", "py-bt", "detach"])
    check(tr, target)
    n = len(commands(target))
    assert "SIGWINCH" in tr.outputs[n + 3], tr.outputs[n + 3]
    assert_bt(tr.outputs[n + 4], target, 0)


@pytest.mark.debugger
def test_core(target):
    core = target.gcore()
    st = os.stat(target.script)
    future = int(time.time()) + 3600
    try:
        tr = run(target, [target.python, core], [
            "shell touch -d @%d %s" % (future, target.script),
            "py-list", "py-bt"])
        check(tr, target)
        check_changed(tr.outputs[len(commands(target)) + 1:], target, "")
    finally:
        os.utime(target.script, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.unlink(core)


@pytest.mark.debugger
def test_no_process():
    """Before any process: each command is one line of gdb error."""
    require_plugin(GDB)
    cmds = ["py-bt", "py-bt-full", "py-up", "py-down 2", "py-list",
            "py-locals", "py-print x",
            "python exec('try: pyunwind_gdb.selected_frame()\\nexcept "
            "pyunwind_gdb.Error as e: print(\"Error:\", e)')"]
    tr = GDB.run(cmds)
    for c, out in zip(cmds, tr.outputs):
        lines = out.strip().splitlines()
        assert len(lines) == 1, (c, out)
        if c.startswith("py-"):
            assert lines[0].startswith(c.split()[0] + ": no process"), \
                (c, out)
        else:  # the scripting API raises pyunwind_gdb.Error
            assert lines[0].startswith("Error: no process"), (c, out)
