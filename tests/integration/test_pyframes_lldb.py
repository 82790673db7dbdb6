"""lldb's py-bt, py-bt-full, py-up, py-down, py-list, py-locals, py-print
and pyunwind_lldb.selected_frame() (lldb-plugin/pyframes.cpp) against the
target's own record of its frames (tests/targets/pyframes.py, as
test_pyframes_gdb.py reads it), in real lldb attached to the live process
and on a gcore core, on stripped and unstripped interpreters; on the
kernel's core and through lldb-server on loopback on two interpreters
each; and the same bad input as in gdb, one line each (the thread without
Python, the outermost native frame selected, cut-off cores).  One lldb
session per interpreter and kind, many commands each.  The text is gdb's
(the checks are test_pyframes_gdb.py's); the messages at the ends of the
stack are lldb's own for up and down, and so is their way: an error when
already at the end, even with a count."""

import os
import re
import time

import pytest

from conftest import RUNNING
from debuggers import PLUGINS, Lldb, Server, process_state, require_plugin
from test_pyframes_gdb import (EACH, assert_bt, assert_frame, check_changed,
                               check_cut_stack, check_moves, check_not_python,
                               check_one_line, fixtures, loads)

LLDB = Lldb()
THREAD = "lldb.debugger.GetSelectedTarget().GetProcess().GetSelectedThread()"
MODULE = os.path.join(PLUGINS, "pyunwind_lldb.py")


target, remote_target, kernel_core = fixtures(LLDB, "pyframes-lldb")


def commands(t):
    return [
        "py-bt",                                        # 0
        "py-down",                                      # 1
        "py-up",                                        # 2
        "py-up",                                        # 3
        # the native frame py-up selected (kept for command 19), and the
        # pc of the first frame of its group (the frames inlined in it
        # come first, the real pc in the innermost: py-dump --native's)
        "script pyframes_native = %s.GetSelectedFrame().GetFrameID(); "
        "print('FRAME', pyframes_native, hex(%s.GetFrameAtIndex(min(i for "
        "i in range(pyframes_native + 1) if all(%s.GetFrameAtIndex(j)"
        ".IsInlined() for j in range(i, pyframes_native)))).GetPC()), "
        "%s.GetNumFrames())" % (THREAD, THREAD, THREAD, THREAD),  # 4
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
        "frame select 0",                               # 16
        "py-bt",                                        # 17
        "py-dump --native",                             # 18
        # lldb's selected frame: the native frame py-up selected for
        # Pipeline.run (command 4), which also runs main and <module>
        "script %s.SetSelectedFrame(pyframes_native)" % THREAD,  # 19
        "py-bt",                                        # 20
        "script f = pyunwind_lldb.selected_frame(); print('SELECTED', "
        "f['index'], f['function'], f['line'], "
        "{v['name']: v['value'] for v in f['locals']})",  # 21
        "py-up",                                        # 22
        "py-list 1,3",                                  # 23
        "py-list 2",                                    # 24
        "py-up x",                                      # 25
        "py-list 1,x",                                  # 26
        "help py-bt",                                   # 27
        "py-down 999",                                  # 28
        "py-down 2",                                    # 29
        "py-bt --all",                                  # 30
        "py-print",                                     # 31
        "py-bt extra",                                  # 32
    ]


def check(tr, t):
    out = tr.outputs
    for k in (4, 19, 21):  # (the scripts: no Python exception)
        assert "Traceback (most recent call last)" not in out[k], out[k]
    truth = t.truth["frames"]
    assert [f["function"] for f in truth] == [
        "leaf", "key_of", "Pipeline.run", "main", "<module>"]
    assert_bt(out[0], t, 0)
    assert out[1].strip() == "error: Already at the bottom of the stack."
    assert_frame(out[2], t, 1)
    assert_frame(out[3], t, 2)
    # lldb's selected frame is the eval loop's that runs Pipeline.run, as
    # py-dump --native places it (the native frame just before it; or,
    # where lldb's unwinder stops short of the eval loop, as on Debian's
    # 3.11, the outermost frame it found, which both take to own the
    # 64 KiB of stack above it)
    sel = re.search(r"^FRAME (\d+) (0x[0-9a-f]+) (\d+)$", out[4], re.M)
    assert sel and int(sel.group(1)) > 0, out[4]
    # (lldb's unwinder stopped at that frame: it runs every Python frame)
    cut = int(sel.group(1)) == int(sel.group(3)) - 1
    out[4] += "FRAMES-CUT\n" if cut else ""
    native = None
    for line in out[18].splitlines():
        m = re.match(r"\s+\[native\] (0x[0-9a-f]+) in ", line)
        if m:
            native = int(m.group(1), 16)
        elif line.strip().endswith(", in Pipeline.run"):
            break
    assert native == int(sel.group(2), 16), (out[4], out[18])
    check_moves(out, t, "error: ", "Already at the top of the stack.")
    assert_bt(out[17], t, 0)   # lldb's frame 0: the innermost again
    # the native frame of <module>: the innermost Python frame it runs
    k = 0 if cut else 2
    assert_bt(out[20], t, k)
    sel = re.search(r"^SELECTED %d %s (\d+) (.*)$" % (
        k, re.escape(truth[k]["function"])), out[21], re.M)
    assert sel and int(sel.group(1)) == truth[k]["line"], out[21]
    assert "%r: %r" % ("depth", truth[0]["locals"]["depth"]) in \
        sel.group(2) if cut else "'limit': '42'" in sel.group(2), out[21]
    assert_frame(out[22], t, k + 1)  # (the same native frame)
    assert out[23].strip("\n").splitlines() == [
        "%4s    %s" % (n, t.lines[n - 1]) for n in (1, 2, 3)]
    assert out[24].strip("\n").splitlines() == [
        "%4s    %s" % (n, t.lines[n - 1]) for n in range(2, 13)]
    assert out[25].strip() == "error: py-up: 'x' is not a number of frames"
    assert out[26].strip().startswith("error: py-list: '1,x': give a line")
    assert '"* "' in out[27] and "Syntax: py-bt [--all]" in out[27]
    assert_frame(out[28], t, 0)  # as lldb's `down 999`: to the innermost
    assert out[29].strip() == "error: Already at the bottom of the stack."
    head, _, rest = out[30].partition("\n")
    assert head == "thread #1, tid = %d" % t.truth["native_id"], out[30]
    assert_bt(rest, t, 0)
    assert out[31].strip() == \
        "error: py-print: give the name of a variable (py-print NAME)"
    assert out[32].strip() == \
        "error: py-bt: takes no argument ('extra' given)"
    # every error is one line
    for k in (1, 10, 14, 25, 26, 29, 31, 32):
        assert len(out[k].strip().splitlines()) == 1, out[k]


SWITCH = "script pyframes_process = lldb.debugger.GetSelectedTarget()" \
    ".GetProcess(); pyframes_process.SetSelectedThreadByID(%d); " \
    "print('THREAD', pyframes_process.GetSelectedThread().GetIndexID())"


def not_python(t):
    """Commands after commands(): EACH on the thread without Python, then
    the outermost native frame of the main thread selected (as gdb's
    test_pyframes_gdb.not_python())."""
    return [
        SWITCH % t.truth["native_only"],                # 0
        *EACH,                                          # 1-7
        "script exec(\"try: pyunwind_lldb.selected_frame()\\n"
        "except pyunwind_lldb.Error as e: print('Error:', e)\")",  # 8
        "py-locals --json",                             # 9
        SWITCH % t.truth["native_id"],                  # 10
        "script %s.SetSelectedFrame(%s.GetNumFrames() - 1)"
        % (THREAD, THREAD),                             # 11
        "py-bt",                                        # 12
        "py-locals",                                    # 13
        "py-print count",                               # 14
        "py-up",                                        # 15
        "py-down",                                      # 16
    ]


def check_lldb_not_python(out, t, cut):
    """not_python() (out: its outputs): one line each, saying what to do
    (py-bt --all, which commands() shows leaving that thread out).  cut:
    lldb's unwinder stopped short of the eval loop (check())."""
    number = re.search(r"^THREAD (\d+)$", out[0], re.M)
    assert number, out[0]
    why = "no Python frames in thread #%s (tid %d): it is not a Python " \
        "thread (py-bt --all shows those that are)" % (
            number.group(1), t.truth["native_only"])
    check_not_python(out, t, "error: %s: " + why, "error: ",
                     "Already at the top of the stack.", 0 if cut else 4)
    assert out[8].strip() == "Error: " + why, out[8]
    assert out[9].strip() == "error: py-locals: " + why, out[9]


def run(t, setup, more=()):
    tr = LLDB.run(commands(t) + list(more), setup=[
        *setup, "command script import " + MODULE])
    assert all(o is not None for o in tr.outputs), tr.text[-3000:]
    return tr


def check_all(tr, t):
    """check() and check_lldb_not_python() of a session that ran
    commands() and then not_python()."""
    check(tr, t)
    check_lldb_not_python(tr.outputs[len(commands(t)):], t,
                          "FRAMES-CUT" in tr.outputs[4])


@pytest.mark.debugger
def test_live(target):
    # then the inferior runs (and stops on a signal it ignores): the
    # selection starts again: back in the native frame py-up selected
    # before (for main), it is the innermost Python frame that frame runs
    # (Pipeline.run), not main
    tr = run(target, ["process attach --pid %d" % target.pid],
             not_python(target) + [
        "frame select 0", "py-up 3",
        "process handle -s true -p false -n true SIGWINCH",
        LLDB.shell("kill -WINCH %d" % target.pid),
        "script lldb.debugger.SetAsync(False); "
        "lldb.debugger.GetSelectedTarget().GetProcess().Continue(); "
        "print(%s.GetStopDescription(100))" % THREAD,
        "script %s.SetSelectedFrame(pyframes_native)" % THREAD,
        "py-bt", "process detach"])
    check_all(tr, target)
    n = len(commands(target)) + len(not_python(target)) + 1
    assert_frame(tr.outputs[n], target, 3)
    assert "SIGWINCH" in tr.outputs[n + 3], tr.outputs[n + 3]
    cut = "FRAMES-CUT" in tr.outputs[4]
    assert_bt(tr.outputs[n + 5], target, 0 if cut else 2)


@pytest.mark.debugger
def test_remote(remote_target):
    """Through lldb-server on loopback (lldb's memory), the target
    running again afterwards."""
    t = remote_target
    server = Server(LLDB, t.pid)
    try:
        tr = run(t, ["gdb-remote 127.0.0.1:%d" % server.port],
                 not_python(t) + ["py-dump --verbose --json --thread %d"
                                  % t.pid, "process detach"])
    finally:
        server.close()
    check_all(tr, t)
    assert "pyunwind: reading process %d through lldb's memory" % t.pid in \
        tr.text, tr.text[-3000:]
    assert process_state(t.pid) in RUNNING


@pytest.mark.debugger
def test_core(target):
    core = target.gcore()
    st = os.stat(target.script)
    future = int(time.time()) + 3600
    try:
        tr = run(target, ["target create %s --core %s"
                          % (target.python, core)], not_python(target) + [
            LLDB.shell("touch -d @%d %s" % (future, target.script)),
            "py-list", "py-bt"])
        check_all(tr, target)
        n = len(commands(target)) + len(not_python(target))
        check_changed(tr.outputs[n + 1:], target, "error: ")
        # cut off at half its size: lldb loads it without the notes (gcore
        # writes them last), so without threads: each command says so, or
        # why the runtime cannot be read, in one line
        os.truncate(core, os.path.getsize(core) // 2)
        tr = LLDB.run(EACH, setup=["target create %s --core %s"
                                   % (target.python, core)])
        check_one_line(tr.outputs, "error: ")
    finally:
        os.utime(target.script, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.unlink(core)


@pytest.mark.debugger
def test_kernel_core(kernel_core):
    """The kernel's core of the target killed by SIGABRT; then cut off
    before the main thread's stack, and before all of its memory."""
    t = kernel_core
    tr = run(t, ["target create %s --core %s" % (t.python, t.core)],
             not_python(t))
    check_all(tr, t)
    segments = loads(t.core)
    os.truncate(t.core, [o for o, v, _ in segments if v == t.stack][0])
    setup = ["target create %s --core %s" % (t.python, t.core)]
    # (and the other thread: not a Python thread, whatever the main
    # thread's error)
    tr = LLDB.run(EACH + [SWITCH % t.truth["native_only"], "py-bt"],
                  setup=setup)
    check_cut_stack(tr.outputs, t, "error: ",
                    "Already at the top of the stack.",
                    "Already at the bottom of the stack.")
    assert tr.outputs[-1].strip().endswith(
        "(tid %d): it is not a Python thread (py-bt --all shows those that "
        "are)" % t.truth["native_only"]), tr.outputs[-1]
    os.truncate(t.core, min(o for o, _, _ in segments))
    tr = LLDB.run(EACH, setup=setup)
    check_one_line(tr.outputs, "error: ")
    assert "the core is cut off" in tr.outputs[0], tr.outputs[0]


@pytest.mark.debugger
def test_no_process():
    """Before any process: each command is one line of lldb error."""
    require_plugin(LLDB)
    cmds = ["py-bt", "py-bt --all", "py-bt-full", "py-up", "py-down 2",
            "py-list", "py-locals", "py-locals --json", "py-print x",
            "script exec(\"try: pyunwind_lldb.selected_frame()\\n"
            "except pyunwind_lldb.Error as e: print('Error:', e)\")"]
    tr = LLDB.run(cmds, setup=["command script import " + MODULE])
    for c, out in zip(cmds, tr.outputs):
        assert out is not None, (c, tr.text[-3000:])
        lines = out.strip().splitlines()
        assert len(lines) == 1, (c, out)
        if c.startswith("py-"):
            assert lines[0].startswith(
                "error: " + c.split()[0] + ": no process"), (c, out)
        else:  # the scripting API raises pyunwind_lldb.Error
            assert lines[0].startswith("Error: no process"), (c, out)
