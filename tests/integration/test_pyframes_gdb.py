"""gdb's py-bt, py-bt-full, py-up, py-down, py-list, py-locals, py-print
and pyunwind_gdb.selected_frame() (gdb-plugin/pyunwind_gdb/pyframes.py)
against the target's own record of its frames (tests/targets/pyframes.py:
<module> -> main -> Pipeline.run -> sorted() -> key_of -> leaf, two
eval-loop calls), in real gdb attached to the live process and on a gcore
core, on stripped and unstripped interpreters; on the kernel's core of the
target killed by SIGABRT and through gdbserver on loopback, on two
interpreters each.  Bad input, one line each: the target's thread that
never ran Python, a native frame older than every Python frame selected,
cores cut off (a gcore core at half its size; the kernel's core before
the main thread's stack, and before all its memory).  One gdb session
per interpreter and kind, many commands each."""

import os
import re
import shutil
import struct
import time

import pytest

from conftest import (RUNNING, TARGETS, Target, interpreters,
                      kernel_cores_land_here, matrix)
from debuggers import Gdb, Server, process_state, require_plugin

PYTHONS = [p for p in interpreters() if p[0] in
           ("3.11.2-debian", matrix("3.13"), matrix("3.13t"), matrix("3.14t"),
            "3.15.2-debian")] or interpreters()[:1]
# the kernel's core and a remote target read the memory each their own
# way: on two interpreters each (stripped and not, GIL and free-threaded)
KERNEL = [p for p in PYTHONS if p[0] in (matrix("3.14t"), "3.15.2-debian")]
REMOTE = [p for p in PYTHONS if p[0] in ("3.11.2-debian", matrix("3.13t"))]
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


def start(param, work):
    """The pyframes target of interpreter param (label, path) in work,
    from a copy of its own of the script (so that it can be changed
    under a core), once it has recorded its frames."""
    label, python = param
    script = os.path.join(work, "pyframes.py")
    shutil.copy(os.path.join(TARGETS, "pyframes.py"), script)
    with open(os.path.join(work, "helper.py"), "w") as f:
        f.write(HELPER)
    t = Target(python, script, work, ["--native-thread"],
               expect_threads=False)
    try:
        # the main thread and the one without Python (the thread that
        # wrote the truth has ended)
        t._wait_threads(2)
    except Exception:
        t.close()
        raise
    t.label, t.python, t.script = label, python, script
    with open(script, encoding="utf-8") as f:
        t.lines = f.read().splitlines()
    return t


def fixtures(dbg, name):
    """The fixtures of a debugger's tests: target (one process per
    interpreter, for the module), remote_target and kernel_core (t.core,
    the kernel's core of the target killed by SIGABRT, where the main
    thread receives it: the other thread blocks every signal; t.stack,
    where the main thread's stack was)."""
    @pytest.fixture(scope="module", params=PYTHONS,
                    ids=[p[0] for p in PYTHONS])
    def target(request, tmp_path_factory):
        require_plugin(dbg)
        t = start(request.param, str(tmp_path_factory.mktemp(name)))
        yield t
        t.close()

    @pytest.fixture(params=REMOTE, ids=[p[0] for p in REMOTE])
    def remote_target(request, tmp_path):
        require_plugin(dbg)
        t = start(request.param, str(tmp_path))
        yield t
        t.close()

    @pytest.fixture(params=KERNEL, ids=[p[0] for p in KERNEL])
    def kernel_core(request, tmp_path):
        require_plugin(dbg)
        if not kernel_cores_land_here():
            pytest.skip("core_pattern sends cores elsewhere")
        t = dead(request.param, str(tmp_path))
        yield t
        os.unlink(t.core)

    return target, remote_target, kernel_core


target, remote_target, kernel_core = fixtures(GDB, "pyframes")


def dead(param, work):
    """The target of param in work killed by SIGABRT; t.core, t.stack."""
    t = start(param, work)
    try:
        with open("/proc/%d/maps" % t.pid) as f:
            t.stack, = [int(line.split("-")[0], 16) for line in f
                        if line.rstrip().endswith("[stack]")]
        t.core = t.abort()
    finally:
        t.close()
    assert t.core, "the kernel wrote no core file"
    return t


def loads(core):
    """[(p_offset, p_vaddr, p_filesz)] of the core's PT_LOAD segments."""
    with open(core, "rb") as f:
        head = f.read(64)
        phoff, = struct.unpack_from("<Q", head, 32)
        size, count = struct.unpack_from("<HH", head, 54)
        f.seek(phoff)
        table = f.read(size * count)
    out = []
    for k in range(count):
        kind, _, offset, vaddr, _, filesz = struct.unpack_from(
            "<IIQQQQ", table, k * size)
        if kind == 1:
            out.append((offset, vaddr, filesz))
    return out


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


# the commands over the selected Python frame, as the bad-input checks
# run them (py-print: a variable of the innermost frame)
EACH = ["py-bt", "py-bt-full", "py-up", "py-down 2", "py-list", "py-locals",
        "py-print label"]


def check_not_python(out, t, want, error, at_top, k):
    """What gdb and lldb print alike for commands 1 to 7 and 12 to 16 of
    not_python(): on the thread that never ran Python, each of EACH is
    the one line want % its name; then, in the main thread, with the
    outermost native frame selected (it runs no Python frame itself),
    the Python frame selected is k: the outermost (4), or where the
    debugger's unwinder stopped short of the eval loop, the innermost
    (0).  error: how the debugger prefixes an error's line; at_top: its
    message for `up` at the outermost frame."""
    for c, o in zip(EACH, out[1:8]):
        assert o.strip() == want % c.split()[0], (c, o)
    assert_bt(out[12], t, k)
    assert out[13].strip("\n").splitlines() == locals_lines(t, k), out[13]
    assert out[14].strip() == error + "'count' not found", out[14]
    if k == 4:
        assert out[15].strip() == error + at_top, out[15]
        assert_frame(out[16], t, 3)
    else:
        assert_frame(out[15], t, k + 1)
        assert_frame(out[16], t, k)


def check_one_line(out, error, names=EACH):
    """Each command of names (out: their outputs) failed in one line,
    headed by its name, without a Python traceback."""
    for c, o in zip(names, out):
        assert o is not None and len(o.strip().splitlines()) == 1 and \
            o.strip().startswith(error + c.split()[0] + ": "), (c, o)
        assert "Traceback" not in o, o


def check_cut_stack(out, t, error, at_top, at_bottom=None):
    """EACH (out: their outputs) on the kernel's core cut off where the
    main thread's stack begins: the Python frames read from what is left
    (how many depends on where the version keeps them: 3.14t's and 3.15's
    frames are on a stack of their own, but a call from C, as sorted()'s
    to key_of, is linked through the C stack) are the innermost ones of
    the truth, and the traceback says in one line why the others are not
    shown; or, when none is left, each command is one line.  The
    commands work on the frames there are."""
    truth = t.truth["frames"]
    frames = frames_of(out[0])
    if not frames:
        check_one_line(out, error)
        return
    k = len(frames)
    assert [(f[1], f[2], f[3]) for f in frames] == \
        [(f["file"], f["line"], f["function"]) for f in truth[:k]], out[0]
    rest = [f[4] for f in frames]
    said = [line for lines in rest for line in lines
            if line.startswith("  [older frames not shown: ")]
    assert said == ([] if k == len(truth) else [rest[-1][-1]]), out[0]
    if said:
        assert said[0].startswith(
            "  [older frames not shown: after %d frames: " % k), out[0]
    full = frames_of(out[1])
    assert [f[0] for f in full] == ["#%d " % n for n in range(k)], out[1]
    if k >= 2:  # py-up, then py-down 2: to the innermost
        assert_frame(out[2], t, 1)
        assert_frame(out[3], t, 0)
    else:  # (py-down 2 at the innermost: gdb stays, lldb refuses)
        assert out[2].strip() == error + at_top, out[2]
        if at_bottom:
            assert out[3].strip() == error + at_bottom, out[3]
        else:
            assert_frame(out[3], t, 0)
    line = truth[0]["line"]
    want = ["%4s    %s" % ((">" if n == line else "") + str(n),
                           t.lines[n - 1]) for n in range(line - 5, line + 6)]
    assert out[4].strip("\n").splitlines() == want, out[4]
    assert out[5].strip("\n").splitlines() == locals_lines(t, 0), out[5]
    assert out[6].strip() == "local 'label' = %s" % \
        truth[0]["locals"]["label"], out[6]


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


SWITCH = "python th = [x for x in gdb.selected_inferior().threads() " \
    "if x.ptid[1] == %d][0]; th.switch(); print('THREAD', th.num)"


def not_python(t):
    """Commands after commands(): EACH on the thread without Python, then
    the outermost native frame of the main thread selected."""
    return [
        SWITCH % t.truth["native_only"],                # 0
        *EACH,                                          # 1-7
        "python exec('try: pyunwind_gdb.selected_frame()\\nexcept "
        "pyunwind_gdb.Error as e: print(\"Error:\", e)')",  # 8
        "thread apply all -s py-bt",                    # 9
        SWITCH % t.truth["native_id"],                  # 10
        "python exec('f = gdb.newest_frame()\\nwhile f.older() is not "
        "None: f = f.older()\\nf.select()')",           # 11
        "py-bt",                                        # 12
        "py-locals",                                    # 13
        "py-print count",                               # 14
        "py-up",                                        # 15
        "py-down",                                      # 16
    ]


def check_gdb_not_python(out, t):
    """not_python() (out: its outputs): one line each, saying what to
    do (`thread apply all -s py-bt`), which does it."""
    number = re.search(r"^THREAD (\d+)$", out[0], re.M)
    assert number, out[0]
    why = "no Python frames in thread %s (LWP %d): it is not a Python " \
        "thread (`thread apply all -s py-bt` shows those that are)" % (
            number.group(1), t.truth["native_only"])
    check_not_python(out, t, "%s: " + why, "",
                     "Initial frame selected; you cannot go up.", 4)
    assert out[8].strip() == "Error: " + why, out[8]
    # (the main thread alone, its Python frame selected marked)
    heads = [line for line in out[9].splitlines()
             if line.startswith("Thread ")]
    assert len(heads) == 1 and re.search(r"[ .]%d[ )]" % t.truth[
        "native_id"], heads[0]), out[9]  # (LWP 12 / Thread 12.12)
    bt = out[9].split(heads[0] + "\n", 1)[1]
    marked = [f[0] for f in frames_of(bt)].index("* ")
    assert_bt(bt, t, marked)


def run(t, args, more=(), setup=()):
    tr = GDB.run(commands(t) + list(more), args,
                 setup=["source " + os.path.join(t.workdir, "helper.py"),
                        *setup])
    assert all(o is not None for o in tr.outputs), tr.text[-3000:]
    return tr


@pytest.mark.debugger
def test_live(target):
    # then the inferior runs (and stops on a signal it ignores): the
    # selection starts again at the innermost frame
    tr = run(target, ["-p", str(target.pid)], not_python(target) + [
        "py-up 2", "handle SIGWINCH stop print nopass",
        "shell kill -WINCH %d" % target.pid, "continue", "py-bt", "detach"])
    check(tr, target)
    n = len(commands(target))
    check_gdb_not_python(tr.outputs[n:], target)
    n += len(not_python(target))
    assert "SIGWINCH" in tr.outputs[n + 3], tr.outputs[n + 3]
    assert_bt(tr.outputs[n + 4], target, 0)


@pytest.mark.debugger
def test_remote(remote_target):
    """Through gdbserver on loopback (gdb's memory, gdb's threads), the
    target running again afterwards."""
    t = remote_target
    server = Server(GDB, t.pid)
    try:
        tr = run(t, [], not_python(t) + [
            "py-dump --verbose --json --thread %d" % t.pid, "detach"],
            setup=["target remote 127.0.0.1:%d" % server.port])
    finally:
        server.close()
    check(tr, t)
    check_gdb_not_python(tr.outputs[len(commands(t)):], t)
    assert "pyunwind: reading process %d through gdb's memory" % t.pid in \
        tr.text, tr.text[-3000:]
    assert process_state(t.pid) in RUNNING


@pytest.mark.debugger
def test_core(target):
    core = target.gcore()
    st = os.stat(target.script)
    future = int(time.time()) + 3600
    try:
        tr = run(target, [target.python, core], not_python(target) + [
            "shell touch -d @%d %s" % (future, target.script),
            "py-list", "py-bt"])
        check(tr, target)
        n = len(commands(target))
        check_gdb_not_python(tr.outputs[n:], target)
        n += len(not_python(target))
        check_changed(tr.outputs[n + 1:], target, "")
        # cut off at half its size (gcore writes the notes, the threads,
        # last): gdb refuses it, and says why; each command then says
        # what to load
        os.truncate(core, os.path.getsize(core) // 2)
        tr = GDB.run(EACH, [target.python, core])
        check_one_line(tr.outputs, "")
        assert "is not a core dump" in tr.text, tr.text[-3000:]
    finally:
        os.utime(target.script, ns=(st.st_atime_ns, st.st_mtime_ns))
        os.unlink(core)


@pytest.mark.debugger
def test_kernel_core(kernel_core):
    """The kernel's core of the target killed by SIGABRT; then cut off
    before the main thread's stack, and before all of its memory."""
    t = kernel_core
    tr = run(t, [t.python, t.core], not_python(t))
    check(tr, t)
    check_gdb_not_python(tr.outputs[len(commands(t)):], t)
    segments = loads(t.core)
    os.truncate(t.core, [o for o, v, _ in segments if v == t.stack][0])
    # (and the other thread: not a Python thread, whatever the main
    # thread's error)
    tr = GDB.run(EACH + [SWITCH % t.truth["native_only"], "py-bt"],
                 [t.python, t.core])
    check_cut_stack(tr.outputs, t, "",
                    "Initial frame selected; you cannot go up.")
    assert tr.outputs[-1].strip().endswith(
        "(LWP %d): it is not a Python thread (`thread apply all -s py-bt` "
        "shows those that are)" % t.truth["native_only"]), tr.outputs[-1]
    os.truncate(t.core, min(o for o, _, _ in segments))
    tr = GDB.run(EACH, [t.python, t.core])
    check_one_line(tr.outputs, "")
    # (gdb's memory has no Python either: the line says why pyunwind's
    # own reader failed too)
    assert "the core is cut off" in tr.outputs[0], tr.outputs[0]


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
