"""dump --native and --native-last: each thread's native stack, with the
Python frames placed in the eval-loop frames that run them.

The target (tests/targets/native.py) goes Python -> C -> Python -> C
through a small C extension (tests/targets/ext/crashext.c) built here for
each interpreter scripts/get-pythons lists (stripped and unstripped, GIL
and free-threaded), and blocks or crashes at the bottom.  The native
frames are compared with what gdb's own unwinder finds on the same
process or core (every frame's pc, for every thread), the Python frames
with the target's own traceback, and their placement with the C calls
between them."""

import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import (DEADLINE, RUNNING, TARGETS, TIMEOUT, Target,
                      interpreters, kernel_cores_land_here, labelled, matrix,
                      pyunwind, traced_by_strace)

PYTHONS = interpreters()
EXT_SOURCE = os.path.join(TARGETS, "ext", "crashext.c")

INFO = ("import sys, sysconfig, json; print(json.dumps({k: sysconfig."
        "get_config_var(k) for k in ('EXT_SUFFIX', 'Py_GIL_DISABLED')} | {k: "
        "sysconfig.get_paths()[k] for k in ('include', 'platinclude')} | "
        "{'minor': sys.version_info[1]}))")


def limited_api_headers():
    """Headers of an interpreter that has them, for an abi3 build."""
    for label, python in PYTHONS:
        if label == matrix("3.13-shared"):
            return os.path.join(os.path.dirname(os.path.dirname(python)),
                                "include", "python3.13")
    return None


def build_ext(python, out_dir):
    """crashext for `python`: with its own headers, or with the limited API
    (abi3) and another interpreter's headers when it ships none (Debian's
    stripped runtime packages)."""
    info = json.loads(subprocess.run([python, "-c", INFO], check=True,
                                     capture_output=True, text=True).stdout)
    os.makedirs(out_dir, exist_ok=True)
    inc = [info["include"], info["platinclude"]]
    if os.path.exists(os.path.join(inc[0], "Python.h")):
        target = os.path.join(out_dir, "crashext" + info["EXT_SUFFIX"])
        flags = ["-I" + i for i in inc]
    else:
        headers = limited_api_headers()
        if not headers or info["Py_GIL_DISABLED"]:
            pytest.skip("no headers to build a C extension for " + python)
        target = os.path.join(out_dir, "crashext.abi3.so")
        # (the limited API of the interpreter's own version: 3.13's
        # headers make what 3.9 lacks, such as Py_GetConstantBorrowed,
        # part of it only for 3.13 and later)
        flags = ["-I" + headers,
                 "-DPy_LIMITED_API=0x03%02x0000" % min(info["minor"], 13)]
    subprocess.run(["gcc", "-shared", "-fPIC", "-g", "-O1", *flags, "-o",
                    target, EXT_SOURCE], check=True)
    return out_dir


class NativeTarget(Target):
    """tests/targets/native.py with crashext built for `python`, started
    as conftest's Target (which reads the truth it writes)."""

    def __init__(self, python, workdir, how, threads=True, ext=None):
        os.makedirs(workdir, exist_ok=True)
        self.ext = ext or build_ext(python, os.path.join(workdir, "ext"))
        super().__init__(python, "native.py", workdir,
                         [self.ext, how] + (["--threads"] if threads else []),
                         expect_threads=False)
        self.thread_truth = None
        if threads:
            with open(self.truth_path + ".thread") as f:
                self.thread_truth = json.load(f)
        if how == "block":
            wait_paused(self)


def wait_paused(target):
    """Until every thread of the target is inside pause() (syscall 34)."""
    task = "/proc/%d/task" % target.pid

    def paused():
        try:
            return all(open(os.path.join(task, t, "syscall")).read()
                       .split()[0] == "34" for t in os.listdir(task))
        except (OSError, IndexError):
            return False

    deadline = time.time() + DEADLINE
    while not paused():
        if time.time() > deadline:
            target.close()
            raise RuntimeError("the target's threads never blocked")
        time.sleep(0.02)


def crashed(python, tmp_path):
    """The crash target run to its SIGSEGV: (target, the kernel's core)."""
    t = NativeTarget(python, str(tmp_path), "crash")
    try:
        t.proc.wait(timeout=TIMEOUT)
    finally:
        t.close()
    cores = [n for n in os.listdir(str(tmp_path)) if n.startswith("core")]
    assert cores, "no core written"
    return t, os.path.join(str(tmp_path), cores[0])


@pytest.fixture(scope="module", params=PYTHONS, ids=[p[0] for p in PYTHONS])
def blocked(request):
    label, python = request.param
    with tempfile.TemporaryDirectory(prefix="pyu-native-") as d:
        t = NativeTarget(python, d, "block")
        t.label, t.python = label, python
        yield t
        t.close()


GDB_PCS = r"""
import gdb, json
out = {}
for th in gdb.selected_inferior().threads():
    th.switch()
    f, pcs = gdb.newest_frame(), []
    while f is not None and len(pcs) < 1024:
        # (the physical frames only: not inlined calls, nor the calls
        # that ended in a tail call, which gdb rebuilds from DWARF)
        if f.type() not in (gdb.INLINE_FRAME, gdb.TAILCALL_FRAME):
            pcs.append(f.pc())
        try:
            f = f.older()
        except gdb.error:
            break
    out[str(th.ptid[1])] = pcs
json.dump(out, open(OUT, "w"))
"""


def gdb_pcs(args, tmp):
    """Every thread's frames as gdb's unwinder finds them: {tid: [pc]}
    (inlined calls and tail calls, which gdb shows as frames of their
    own, are not physical frames)."""
    out = os.path.join(tmp, "gdb-pcs.json")
    script = os.path.join(tmp, "gdb-pcs.py")
    with open(script, "w") as f:
        f.write("OUT = %r\n" % out + GDB_PCS)
    r = subprocess.run(["gdb", "-nx", "-batch", "-ex", "set pagination off",
                        "-ex", "set backtrace past-main on",
                        "-ex", "set backtrace past-entry on",
                        "-ex", "source " + script, *args],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert os.path.exists(out), r.stdout + r.stderr
    with open(out) as f:
        return {int(k): v for k, v in json.load(f).items()}


def dump_native(*args, ok=(0,)):
    r = pyunwind("dump", "--native", "--json", *args)
    assert r.returncode in ok, r.stderr
    return json.loads(r.stdout)


def python_names(thread):
    return [f["name"] for f in thread["frames"]]


def check_placement(thread, bottom):
    """The Python frames sit in eval-loop frames; between two of those
    the C call crashext.call; past the innermost one, `bottom` (the C
    function the thread is in).  Every Python frame is placed, each run
    in one native frame, in order."""
    native = thread["native"]
    assert thread["native_error"] is None
    assert thread["python_unplaced"] == 0
    runs = [(i, n["python_frames"]) for i, n in enumerate(native)
            if n["python_frames"]]
    covered = [k for _, (first, count) in runs
               for k in range(first, first + count)]
    assert covered == list(range(len(thread["frames"]))), runs
    names = [n["symbol"] for n in native]
    # the frames that run Python code are the eval loop's: named so where
    # the build has the symbol (any frame of the stack is), else unnamed,
    # in the interpreter's binary
    named = "_PyEval_EvalFrameDefault" in names
    for i, _ in runs:
        if named:
            assert names[i] == "_PyEval_EvalFrameDefault", (i, names)
        else:
            assert names[i] is None and "python3" in os.path.basename(
                native[i]["module"]), (i, names, native[i]["module"])
    # innermost: the C function it blocks or crashes in, then (outwards)
    # the eval frame that called it
    first_run = runs[0][0]
    assert bottom in names[:first_run], names
    # each run that starts with a lambda (called back from C) sits above
    # a crashext.call frame
    frames = thread["frames"]
    for (i, (first, count)), nxt in zip(runs, runs[1:]):
        between = names[i + 1:nxt[0]]
        innermost_of_outer = frames[nxt[1][0]]["name"]
        if innermost_of_outer in ("level1", "level2"):
            assert "crashext_call" in between, (between, runs)
            assert frames[first + count - 1]["name"] == "<lambda>", runs


def check_truth(thread, truth):
    want = [f["function"] for f in truth["frames"]]
    got = [f["name"] for f in thread["frames"]]
    assert got == want, (got, want)
    # (the innermost line the target recorded is that of its record())
    assert [f["line"] for f in thread["frames"]][1:] == \
        [f["line"] for f in truth["frames"]][1:]


def check_against_gdb(dump, pcs):
    """Every thread's native pcs equal gdb's, frame for frame (gdb may go
    one frame further at the very top of a stack, or stop one earlier; a
    pc of 0 is where gdb found nothing, as in a gcore core's zeroed
    stack next to a guard region).  The main thread's goes all the way."""
    for th in dump["threads"]:
        ours = [n["pc"] for n in th["native"]]
        theirs = pcs[th["native_thread_id"]]
        while theirs and theirs[-1] == 0:
            theirs = theirs[:-1]
        n = min(len(ours), len(theirs))
        assert ours[:n] == theirs[:n], (ours, theirs)
        assert abs(len(ours) - len(theirs)) <= 1, (ours, theirs)
        if th["main"]:
            assert n >= 10, (ours, theirs)


def by_tid(dump, truth):
    return next(t for t in dump["threads"]
                if t["native_thread_id"] == truth["native_id"])


def test_live(blocked, tmp_path):
    dump = dump_native(str(blocked.pid))
    for truth in (blocked.truth, blocked.thread_truth):
        th = by_tid(dump, truth)
        check_truth(th, truth)
        check_placement(th, "crashext_block_here")
    check_against_gdb(dump, gdb_pcs(["-p", str(blocked.pid)], tmp_path))
    # the target runs again afterwards
    with open("/proc/%d/stat" % blocked.pid) as f:
        assert f.read().rsplit(")", 1)[1].split()[0] in RUNNING


def test_text(blocked):
    """Outermost first: each eval-loop frame, then the Python frames it
    runs; --native-last: the traceback, then only what lies past it."""
    r = pyunwind("dump", "--native", "--no-source", str(blocked.pid))
    assert r.returncode == 0, r.stderr
    block = next(b for b in r.stdout.split("\n\n") if "main thread" in b)
    lines = block.splitlines()[2:]
    assert lines[-1].startswith("  [native] 0x")
    level3 = next(i for i, line in enumerate(lines) if line.endswith(
        "in level3"))
    after = lines[level3 + 1:]
    assert all(line.startswith("  [native] ") for line in after)
    assert any(" in crashext_block_here+0x" in line for line in after)
    r = pyunwind("dump", "--native-last", "--no-source", str(blocked.pid))
    assert r.returncode == 0, r.stderr
    block = next(b for b in r.stdout.split("\n\n") if "main thread" in b)
    lines = block.splitlines()[2:]
    py = [line for line in lines if line.startswith("  File ")]
    assert len(py) == len(blocked.truth["frames"])
    assert lines[:len(py)] == py  # the traceback first, whole
    tail = lines[len(py):]
    assert tail == after[-len(tail):] and tail  # then the innermost natives


def test_gcore(blocked, tmp_path):
    prefix = str(tmp_path / "gcore")
    r = subprocess.run(["gcore", "-o", prefix, str(blocked.pid)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    core = "%s.%d" % (prefix, blocked.pid)
    assert r.returncode == 0 and os.path.exists(core), r.stderr
    dump = dump_native("--core", core, ok=(0, 5))
    main = by_tid(dump, blocked.truth)
    check_truth(main, blocked.truth)
    check_placement(main, "crashext_block_here")
    check_against_gdb(dump, gdb_pcs([blocked.python, core], str(tmp_path)))


@pytest.mark.skipif(not kernel_cores_land_here(),
                    reason="core_pattern sends cores elsewhere")
@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_kernel_core_crash(label, python, tmp_path):
    """A SIGSEGV in C under three levels of callbacks: the crashing thread
    comes first, marked; its innermost native frame is the faulting
    function, as gdb says on the same core."""
    t, core = crashed(python, tmp_path)
    dump = dump_native("--core", core)
    main = by_tid(dump, t.truth)
    assert main["crashed"] and dump["signal"]["number"] == 11
    assert sum(th["crashed"] for th in dump["threads"]) == 1
    check_truth(main, t.truth)
    check_placement(main, "crashext_crash_here")
    assert main["native"][0]["symbol"] == "crashext_crash_here"
    check_against_gdb(dump, gdb_pcs([python, core], str(tmp_path)))
    r = pyunwind("dump", "--native-last", "--no-source", "--core", core)
    assert r.returncode == 0, r.stderr
    first = r.stdout.split("\n\n")[1]
    assert "(native %d, main thread): received SIGSEGV" % t.truth[
        "native_id"] in first.splitlines()[0]
    assert first.splitlines()[-1].endswith(
        " in crashext_crash_here+0x0 (%s)" % next(
            n for n in os.listdir(t.ext) if n.endswith(".so")))


def test_refused_combinations():
    r = pyunwind("dump", "--native", "--nonblocking", "1")
    assert r.returncode == 2 and "--native needs the process stopped" in \
        r.stderr
    r = pyunwind("dump", "--native", "--async", "1")
    assert r.returncode == 2 and "do not go together" in r.stderr


# ------------------------------------------------- ctypes callbacks

def build_callback_lib(out_dir):
    """tests/targets/ext/callback.c without unwind tables, with frame
    pointers."""
    lib = os.path.join(out_dir, "libcallback.so")
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2",
                    "-fno-omit-frame-pointer", "-fno-asynchronous-unwind-tables",
                    "-fno-unwind-tables", "-o", lib,
                    os.path.join(TARGETS, "ext", "callback.c")], check=True)
    return lib


def check_callbacks(thread, truth):
    """inner, compare and outer/<module> each run in an eval-loop frame;
    between the first two, the C library without unwind tables; between
    the last two, libc's qsort and libffi's ffi_call."""
    check_truth(thread, truth)
    assert thread["native_error"] is None
    assert thread["python_unplaced"] == 0
    native = thread["native"]
    runs = [(i, n["python_frames"]) for i, n in enumerate(native)
            if n["python_frames"]]
    covered = [k for _, (first, count) in runs
               for k in range(first, first + count)]
    assert covered == list(range(len(thread["frames"]))), runs
    names = [n["symbol"] or "?" for n in native]
    py = [[thread["frames"][k]["name"] for k in range(f, f + c)]
          for _, (f, c) in runs]
    # (before 3.11 a function called from Python runs in an eval loop of
    # its own, as a callback does: outer and <module> in one each)
    assert py[:3] == [["inner"], ["compare"], ["outer", "<module>"]] or \
        (truth.get("version", "")[:4] in ("3.9.", "3.10") and
         py == [["inner"], ["compare"], ["outer"], ["<module>"]]), py
    between = names[runs[0][0] + 1:runs[1][0]]
    assert [n for n in between if n.startswith("callback_")] == [
        "callback_apply", "callback_twice"], between
    between = names[runs[1][0] + 1:runs[2][0]]
    assert any(n.startswith("qsort") for n in between), between
    # (Debian 11's libffi 7 exports no symbol for the frames it has here:
    # they are unnamed frames of libffi, as gdb has them)
    mods = [os.path.basename(n["module"] or "")
            for n in native[runs[1][0] + 1:runs[2][0]]]
    assert "ffi_call" in between or any(
        m.startswith("libffi.so.7") and n == "?"
        for n, m in zip(between, mods)), list(zip(between, mods))


@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_ctypes_callbacks(label, python, tmp_path):
    """Native stacks through libffi's closures and a C library without
    unwind tables, live and from the kernel's core, frame for frame as
    gdb's unwinder finds them.  (Debian's python3.15 brings a libffi
    that maps a page of its own file below itself, which once put every
    libffi frame at the wrong place in its file.)"""
    lib = build_callback_lib(str(tmp_path))
    t = Target(python, "callbacks.py", str(tmp_path), [lib],
               expect_threads=False)
    try:
        wait_paused(t)
        dump = dump_native(str(t.pid))
        check_callbacks(by_tid(dump, t.truth), t.truth)
        check_against_gdb(dump, gdb_pcs(["-p", str(t.pid)], str(tmp_path)))
        core = t.abort() if kernel_cores_land_here() else None
    finally:
        t.close()
    if core:
        dump = dump_native("--core", core)
        check_callbacks(by_tid(dump, t.truth), t.truth)
        check_against_gdb(dump, gdb_pcs([python, core], str(tmp_path)))


# ------------------------------------------------------------ debuggers

from debuggers import DEBUGGERS, require_plugin  # noqa: E402


@pytest.fixture(params=DEBUGGERS, ids=[d.name for d in DEBUGGERS])
def dbg(request):
    return require_plugin(request.param)


def debugger_native(dbg, setup, tmp, cli_args):
    """py-dump --native (JSON, text) in the debugger, with its own
    unwinder, and the CLI's text (libdwfl) on the same target, taken
    before the debugger holds it (ptrace allows one tracer)."""
    pre, args, post = setup
    dj, dt = tmp / "dbg.json", tmp / "dbg.txt"
    r = pyunwind("dump", "--native", "--no-source", *cli_args.split())
    assert r.returncode == 0, r.stderr
    select = (["thread 2", "frame 3"] if dbg.name == "gdb"
              else ["thread select 2", "frame select 3"])
    commands = [*select, dbg.selection(),
                "py-dump --native --json -o %s" % dj,
                "py-dump --native --no-source -o %s" % dt,
                dbg.selection()]
    if dbg.name == "gdb":
        commands.append("show backtrace past-main")
    tr = dbg.run(commands + list(post), args, setup=pre)
    assert "Traceback" not in tr.text and "Python Exception" not in tr.text, \
        tr.text[-3000:]
    # the debugger's selected thread and frame, and its settings, are as
    # they were
    # (lldb may print the thread selection's stop report late, into the
    # next command's output: the selection is the last line)
    def selection(text):  # (lldb: its last "frame #N" line)
        lines = (text or "").strip().splitlines()
        if dbg.name == "lldb":
            lines = [line for line in lines if line.startswith("frame #")]
        return lines[-1:]
    before = selection(tr.outputs[len(select)])
    after = selection(tr.outputs[len(select) + 3])
    assert before and before == after, (before, after)
    before = before[0]
    if dbg.name == "lldb":
        assert "frame #3" in before, before
    if dbg.name == "gdb":
        assert "is off" in tr["show backtrace past-main"]
    assert dj.exists() and dt.exists(), tr.text[-3000:]
    return json.loads(dj.read_text()), dt.read_text(), r.stdout


@pytest.mark.debugger
def debugger_unwinds_to_python(dbg, pid):
    """Whether the debugger's own `bt` of the main thread reaches the
    eval loop (it is what py-dump --native uses in the debugger)."""
    pre, args, post = dbg.attach(pid)
    tr = dbg.run(["bt", *post], args, setup=pre)
    return "_PyEval_EvalFrameDefault" in tr["bt"]


def test_debugger_attach(dbg, blocked, tmp_path):
    """Attached: the debugger's unwinder gives the very frames libdwfl
    gives the CLI, so the text is the CLI's byte for byte."""
    if (dbg.name == "lldb" and
            not debugger_unwinds_to_python(dbg, blocked.pid)):
        # lldb 19's own unwinder stops in cfunction_vectorcall_NOARGS of
        # Debian 12's python3.11 (its bt then shows a data symbol), and
        # in PyObject_Vectorcall of pyenv's libpython3.12.so with its
        # DWARF (not of the stripped copy)
        pytest.skip("lldb's own bt does not get past the C call on %s"
                    % blocked.label)
    dump, text, cli = debugger_native(dbg, dbg.attach(blocked.pid),
                                      tmp_path, str(blocked.pid))
    for truth in (blocked.truth, blocked.thread_truth):
        th = by_tid(dump, truth)
        check_truth(th, truth)
        check_placement(th, "crashext_block_here")
    assert text == cli


@pytest.mark.debugger
def test_debugger_ctypes_callbacks(dbg, tmp_path):
    """py-dump --native in the debugger, on the ctypes callbacks of
    Debian's python3.15 and its libffi: the debugger's unwinder gives the
    frames libdwfl gives the CLI."""
    python = labelled(PYTHONS, "3.15.2-debian")
    lib = build_callback_lib(str(tmp_path))
    t = Target(python, "callbacks.py", str(tmp_path), [lib],
               expect_threads=False)
    try:
        wait_paused(t)
        dump, text, cli = debugger_native(dbg, dbg.attach(t.pid), tmp_path,
                                          str(t.pid))
    finally:
        t.close()
    check_callbacks(by_tid(dump, t.truth), t.truth)
    assert text == cli


@pytest.mark.debugger
@pytest.mark.skipif(not kernel_cores_land_here(),
                    reason="core_pattern sends cores elsewhere")
def test_debugger_core(dbg, tmp_path):
    python = labelled(PYTHONS, "3.15.2-debian")
    t, core = crashed(python, tmp_path)
    dump, text, cli = debugger_native(dbg, dbg.core(python, core), tmp_path,
                                      "--core %s --exe %s" % (core, python))
    main = by_tid(dump, t.truth)
    assert main["crashed"]
    check_truth(main, t.truth)
    check_placement(main, "crashext_crash_here")
    assert text == cli


# ------------------------------------------------ gdb's bt, filtered

import re  # noqa: E402

FRAME_LINE = re.compile(r"^#(\d+)\s+(?:(0x[0-9a-f]+) in )?")


def bt_python(text):
    """[(frame line, [python lines under it])] of a filtered bt."""
    out, current = [], None
    for line in text.splitlines():
        m = FRAME_LINE.match(line)
        if m:
            current = (line, [])
            out.append(current)
        elif line.startswith("    [Python] ") and current is not None:
            current[1].append(line.strip())
    return out


@pytest.mark.debugger
def test_gdb_bt_shows_python(blocked, tmp_path):
    """gdb's own `bt` shows each Python frame under the eval-loop frame
    that runs it (the one py-dump --native places it in); `bt
    -no-filters` is gdb's raw view, with the same native frames."""
    from debuggers import Gdb
    tid = blocked.truth["native_id"]
    tr = Gdb().run(["thread find %d" % tid, "bt", "bt -no-filters",
                    "py-dump --native --json -o %s" % (tmp_path / "d.json")],
                   ["-p", str(blocked.pid)])
    # (gdb's thread 1 is the main thread, selected after attaching)
    filtered, raw = tr["bt"], tr["bt -no-filters"]
    assert "[Python]" not in raw
    groups = bt_python(filtered)
    def numbers(lines):  # (frame number, pc when shown)
        return [FRAME_LINE.match(line).groups() for line, _ in lines]
    assert numbers(groups) == numbers(bt_python(raw))
    python = [line for _, lines in groups for line in lines]
    dump = json.loads((tmp_path / "d.json").read_text())
    main = by_tid(dump, blocked.truth)
    want = ["[Python] %s () at %s:%d" % (f["function"], f["file"], f["line"])
            for f in main["frames"]]
    assert python == want, (python, want)
    # in the eval loop's frames, as py-dump --native places them (gdb
    # numbers inlined calls as frames too: compare the groups)
    placed = [n["python_frames"][1] for n in main["native"]
              if n["python_frames"]]
    assert [len(lines) for _, lines in groups if lines] == placed
    for line, lines in groups:
        if lines:
            assert "_PyEval_EvalFrameDefault" in line or " ?? ()" in line, \
                line


@pytest.mark.debugger
@pytest.mark.skipif(not kernel_cores_land_here(),
                    reason="core_pattern sends cores elsewhere")
def test_gdb_bt_core(tmp_path):
    from debuggers import Gdb
    python = labelled(PYTHONS, "3.15.2-debian")
    t, core = crashed(python, tmp_path)
    tr = Gdb().run(["bt"], [python, core])
    lines = [line for _, ls in bt_python(tr["bt"]) for line in ls]
    assert lines[0].startswith("[Python] level3 () at ") and \
        lines[-1].startswith("[Python] <module> () at "), tr["bt"]
    assert len(lines) == len(t.truth["frames"])


@pytest.mark.debugger
def test_gdb_bt_untouched_elsewhere():
    """A process without CPython: the filter stays out of the way (gdb
    prints its backtrace exactly as without the plugin)."""
    from debuggers import Gdb
    p = subprocess.Popen(["sleep", "60"])
    try:
        time.sleep(0.2)
        tr = Gdb().run(["bt", "bt -no-filters"], ["-p", str(p.pid)])
        assert tr["bt"] == tr["bt -no-filters"] and tr["bt"].count("#") >= 2
    finally:
        p.kill()
        p.wait()


def test_another_tracer(tmp_path):
    """Another tracer (strace) holds the process: the Python stacks are
    read as always; the native ones cannot be (ptrace allows one tracer),
    which each thread says, and exit 5 with one line says why."""
    python = labelled(PYTHONS, "3.15.2-debian")
    t = NativeTarget(python, str(tmp_path), "block")
    try:
        with traced_by_strace(t.pid):
            r = pyunwind("dump", "--native", "--json", str(t.pid))
        assert r.returncode == 5, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "have no native stack" in lines[0] and \
            "debugger" in lines[0], r.stderr
        dump = json.loads(r.stdout)
        main = by_tid(dump, t.truth)
        check_truth(main, t.truth)
        assert main["native"] == [] and main["native_error"]
        assert main["python_unplaced"] == len(main["frames"])
    finally:
        t.close()


def test_names_from_separate_debug_file(tmp_path):
    """A stripped extension with its symbols in a separate debug file
    (objcopy --only-keep-debug, found through .gnu_debuglink): its static
    functions are named from that file; without it, they are not."""
    python = labelled(PYTHONS, "3.15.2-debian")
    t = NativeTarget(python, str(tmp_path), "block", threads=False)
    try:
        so = next(os.path.join(t.ext, n) for n in os.listdir(t.ext)
                  if n.endswith(".so"))
        names = [n["symbol"] for n in
                 by_tid(dump_native(str(t.pid)), t.truth)["native"]]
        assert "crashext_call" in names  # (a static function: .symtab)
    finally:
        t.close()
    # the same extension, stripped, its debug info beside it
    debug = so + ".debug"
    subprocess.run(["objcopy", "--only-keep-debug", so, debug], check=True)
    subprocess.run(["strip", "--strip-all", so], check=True)
    subprocess.run(["objcopy", "--add-gnu-debuglink=" + debug, so],
                   check=True, cwd=os.path.dirname(so))
    t = NativeTarget(python, str(tmp_path / "again"), "block", threads=False,
                     ext=t.ext)
    try:
        names = [n["symbol"] for n in
                 by_tid(dump_native(str(t.pid)), t.truth)["native"]]
        assert "crashext_call" in names, names
        os.unlink(debug)
        names = [n["symbol"] for n in
                 by_tid(dump_native(str(t.pid)), t.truth)["native"]]
        assert "crashext_call" not in names, names
        assert "crashext_block_here" in names  # (exported: .dynsym)
    finally:
        t.close()
