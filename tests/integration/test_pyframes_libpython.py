"""pyunwind's py-bt, py-up, py-list, py-locals against CPython's own
python-gdb.py (Tools/gdb/libpython.py) on the same stopped process, and
the two loaded together.

Per interpreter with DWARF (where python-gdb.py can work at all:
Debian's python3.11 with python3.11-dbg's symbols, the free-threaded
source builds of 3.13 and 3.14, Debian's python3.15d): one
tests/targets/pyframes.py process (<module> -> main -> Pipeline.run ->
sorted() -> key_of -> leaf, two eval-loop calls), read by gdb with

- python-gdb.py alone (`source` of the interpreter's libpython.py, gdb's
  auto-loading off);
- pyunwind alone (its plugin, as the other gdb tests load it);
- both, python-gdb.py auto-loaded for real from an auto-load directory,
  once loaded before pyunwind and once after it.

Four gdb sessions per interpreter, each a few commands.
"""

import ast
import os
import re
import shutil

import pytest

from conftest import Target, interpreters
from debuggers import Gdb, require_plugin

pytestmark = pytest.mark.debugger  # (the plugin: release build only)
CACHE = os.environ.get("PYUNWIND_CACHE", "/var/cache/pyunwind")
GDB = Gdb()
# Debian's python3.11-dbg: debug symbols of /usr/bin/python3.11 and the
# python-gdb.py that gdb auto-loads with it
DEBIAN_311 = "/usr/share/gdb/auto-load/usr/bin/python3.11-gdb.py"


# scripts/get-pythons' labels of the interpreters with DWARF, and which
# kind each is
KINDS = ((r"^3\.11\.\d+-debian$", "debian"),     # + python3.11-dbg
         (r"^3\.1[34]\.\d+t$", "source"),           # built with -g -O3
         (r"^3\.15\.\d+-debian-dbg$", "debian-dbg"))  # python3.15d


def kind_of(label):
    return next((k for pattern, k in KINDS if re.match(pattern, label)),
                None)


def libpython_of(label, python):
    """The python-gdb.py of an interpreter with DWARF, or None."""
    kind = kind_of(label)
    if kind == "debian":
        path = DEBIAN_311
    elif kind == "source":
        path = os.path.join(CACHE, "src", "Python-" + label.rstrip("t"),
                            "Tools", "gdb", "libpython.py")
    elif kind == "debian-dbg":
        root = os.path.dirname(os.path.dirname(os.path.dirname(python)))
        path = os.path.join(root, "usr", "share", "gdb", "auto-load", "usr",
                            "bin", "python3.15d-gdb.py")
    else:
        return None
    return path if os.path.exists(path) else None


PYTHONS = [(label, python) for label, python in interpreters()
           if kind_of(label)]


def run_gdb(commands, args, setup=(), plugin=False):
    """gdb -batch without init files (debuggers.Gdb): setup and the
    commands after args (attaching); with plugin, pyunwind's plugin
    sourced before setup.  Returns (whole text, [output of each
    command])."""
    tr = Gdb().run(commands, args=args, setup=setup, plugin=plugin)
    return tr.text, tr.outputs


LEVEL = "python print('LEVEL', gdb.selected_frame().level())"
# For each eval-loop call (innermost first): can gdb read what
# python-gdb.py finds its Python frames by, the call's `frame` argument
# (or, in 3.11, its `cframe`)?
PROBE = "python exec(%r)" % (
    "f, seen = gdb.newest_frame(), []\n"
    "while f is not None:\n"
    "    if f.name() == '_PyEval_EvalFrameDefault':\n"
    "        ok = not f.read_var('frame').is_optimized_out\n"
    "        try:\n"
    "            c = f.read_var('cframe')\n"
    "            ok = ok or not c.is_optimized_out\n"
    "        except ValueError:\n"
    "            pass\n"
    "        seen.append(ok)\n"
    "    f = f.older()\n"
    "print('READABLE', seen)\n")
UPS = 4  # python-gdb.py's py-up steps: leaf's call, sort(), sorted(), run's


@pytest.fixture(scope="module", params=PYTHONS, ids=[p[0] for p in PYTHONS])
def target(request, tmp_path_factory):
    require_plugin(GDB)
    label, python = request.param
    libpython = libpython_of(label, python)
    if libpython is None:
        pytest.skip("no python-gdb.py with debug symbols for %s (Debian's "
                    "python3.11-dbg comes with 3.11.X-debian-dbg of "
                    "scripts/get-pythons)" % label)
    work = str(tmp_path_factory.mktemp("libpython"))
    t = Target(python, "pyframes.py", work, expect_threads=False)
    t._wait_threads(1)  # (the thread that wrote the truth has ended)
    t.label, t.python, t.libpython = label, python, libpython
    t.kind = kind_of(label)
    t.version = tuple(int(x) for x in label.split("-")[0].split(".")[:2])
    with open(t.truth["frames"][0]["file"], encoding="utf-8") as f:
        t.lines = f.read().splitlines()
    yield t
    t.close()


FILE = re.compile(r'^(\* |  )File "(.*)", line (\d+), in (.*)$')
BUILTIN = re.compile(r"^  <built-in method (\w+) of \w+ object at remote "
                     r"0x[0-9a-f]+>$")
UNREADABLE = "Unable to read information on python frame"


def traceback(text):
    """py-bt's lines after its header: ("file", file, line, function,
    source line), ("builtin", name) or ("unreadable",)."""
    lines = text.strip("\n").splitlines()
    assert lines[0] == "Traceback (most recent call first):", text
    out = []
    for line in lines[1:]:
        m, b = FILE.match(line), BUILTIN.match(line)
        if m:
            out.append(["file", m.group(2), int(m.group(3)), m.group(4),
                        None])
        elif b:
            out.append(["builtin", b.group(1)])
        elif line == "  (unable to read python frame information)":
            out.append(["unreadable"])
        else:
            assert line.startswith("    ") and out[-1][0] == "file" and \
                out[-1][4] is None, text
            out[-1][4] = line
    return [tuple(x) for x in out]


def variables(text):
    """py-locals' "name = value" lines as [(name, value)]."""
    return [tuple(line.split(" = ", 1))
            for line in text.strip("\n").splitlines()]


def locals_for(text):
    """python-gdb.py's py-locals: {function: [(name, value)]} from its
    "Locals for FUNCTION" headers (one per Python frame of the eval-loop
    call), in order."""
    out = {}
    for line in text.strip("\n").splitlines():
        if line.startswith("Locals for "):
            current = out.setdefault(line[len("Locals for "):], [])
        else:
            current.append(tuple(line.split(" = ", 1)))
    return out


PLAIN = re.compile(r"^(-?\d+|'[^'\\]*')$")  # an int's or a str's repr


def assert_same_variables(theirs, ours, truth):
    """python-gdb.py's and pyunwind's variables of one Python frame: the
    same names in the same order; the same value where both print a plain
    repr; else the differences of format, each exactly."""
    assert [n for n, _ in theirs] == [n for n, _ in ours], (theirs, ours)
    for (name, a), (_, b) in zip(theirs, ours):
        if PLAIN.match(a) or PLAIN.match(b) or a == b:
            assert a == b, (name, a, b)
            continue
        # python-gdb.py does not show a float's value: pyunwind does
        m = re.match(r"^<float at remote 0x[0-9a-f]+>$", a)
        if m:
            assert b == truth[name], (name, a, b)
            continue
        # an instance: python-gdb.py shows its __dict__, pyunwind its
        # type and address: the same object
        m = re.match(r"^<(\w+)\(.*\) at remote (0x[0-9a-f]+)>$", a)
        assert m and b == "<%s at %s>" % m.groups(), (name, a, b)


def test_against_python_gdb(target):
    """The same stopped process read by python-gdb.py alone and by
    pyunwind alone (no auto-loading in either session)."""
    t = target
    args = ["-iex", "set auto-load python-scripts off", "-p", str(t.pid)]
    ours_cmds = ["py-bt", "py-list", "py-locals",       # 0-2: leaf
                 "py-up", LEVEL, "py-locals",           # 3-5: key_of
                 "py-up", LEVEL, "py-list", "py-locals",  # 6-9: run
                 "py-up", "py-locals",                  # 10-11: main
                 "py-up", "py-locals"]                  # 12-13: <module>
    text, ours = run_gdb(ours_cmds, args, plugin=True)
    assert "Traceback (most recent call last)" not in text and \
        "Python Exception" not in text, text[-3000:]
    # (python-gdb.py's session second: on 3.14 it calls a function in the
    # process, which ends the target's sleep with an error once gdb lets
    # go -- pyframes.py sleeps again, through fewer native frames)
    theirs_cmds = ["py-bt", "py-list", "py-locals", PROBE]
    for _ in range(UPS):
        theirs_cmds += ["py-up", LEVEL, "py-list", "py-locals"]
    text, theirs = run_gdb(theirs_cmds, args,
                           setup=["source " + t.libpython])
    assert "Traceback (most recent call last)" not in text and \
        "Python Exception" not in text, text[-3000:]

    truth = t.truth["frames"]
    assert [f["function"] for f in truth] == [
        "leaf", "key_of", "Pipeline.run", "main", "<module>"]
    # pyunwind: the truth's frames, innermost first, leaf selected
    bt = traceback(ours[0])
    assert bt == [("file", f["file"], f["line"], f["function"],
                   "    " + t.lines[f["line"] - 1].strip()) for f in truth]
    assert ours[0].splitlines()[1].startswith("* File"), ours[0]
    level = {}  # pyunwind's gdb frame for a Python frame
    level["key_of"] = int(ours[4].split()[1])
    level["run"] = int(ours[7].split()[1])
    assert level["key_of"] < level["run"]
    ours_vars = {"leaf": variables(ours[2]), "key_of": variables(ours[5]),
                 "run": variables(ours[9]), "main": variables(ours[11]),
                 "<module>": variables(ours[13])}
    for f in truth:  # the truth's plain values are pyunwind's
        mine = dict(ours_vars[f["function"].split(".")[-1]])
        for name, value in f["locals"].items():
            assert mine[name] == value, (f["function"], name, value)
    expected_list = {
        name: ["%4s    %s" % ((">" if n == line else "") + str(n),
                              t.lines[n - 1])
               for n in range(line - 5, line + 6)]
        for name, line in (("leaf", truth[0]["line"]),
                           ("run", truth[2]["line"]))}
    assert ours[1].strip("\n").splitlines() == expected_list["leaf"]
    assert ours[8].strip("\n").splitlines() == expected_list["run"]

    readable = re.search(r"^READABLE (\[.*\])$", theirs[3], re.M)
    assert readable, theirs[3]
    readable = ast.literal_eval(readable.group(1))
    # python-gdb.py's py-up stops: [(gdb frame level, py-list, py-locals)]
    stops = []
    for k in range(UPS):
        up, lvl, lst, loc = theirs[4 + 4 * k:8 + 4 * k]
        m = re.match(r"^LEVEL (\d+)$", lvl.strip())
        stops.append((up, int(m.group(1)), lst, loc))

    if readable == [True, True]:
        # gdb reads each eval-loop call's Python frame (3.11's Debian
        # build with python3.11-dbg's symbols: through `cframe`; 3.15's
        # debug build: through `frame`; 3.13's free-threaded source build,
        # whose eval loop keeps `frame`): python-gdb.py sees every frame.
        assert t.kind in ("debian", "debian-dbg") or \
            t.label.startswith("3.13.") and t.label.endswith("t"), t.label
        # py-bt: the same frames, lines and source lines in the same
        # order.  Differences: python-gdb.py names a function by its
        # co_name ("run"), pyunwind by its co_qualname ("Pipeline.run");
        # python-gdb.py also lists the C functions Python called
        # (time.sleep, list.sort, sorted), which pyunwind does not; it
        # marks no frame as selected.
        assert traceback(theirs[0]) == [
            ("builtin", "sleep"), qualname_to_name(bt[0]),
            qualname_to_name(bt[1]), ("builtin", "sort"),
            ("builtin", "sorted"), qualname_to_name(bt[2]),
            qualname_to_name(bt[3]), qualname_to_name(bt[4])], theirs[0]
        # py-list: the innermost Python frame's lines, marker and all,
        # byte for byte
        assert theirs[1] == ours[1]
        # py-locals: python-gdb.py's selected frame is time.sleep's C
        # call, which has no Python variables; pyunwind's is leaf
        assert theirs[2].strip() == UNREADABLE
        # py-up: python-gdb.py steps by native frames (an eval-loop call,
        # or a C function's), printing every Python frame of an
        # eval-loop call; pyunwind by Python frames.  They stop in the
        # same native frames: the eval-loop call that runs leaf and
        # key_of, then (after sort() and sorted()) the one that runs
        # Pipeline.run, main and <module>.
        assert [s[1] for s in stops][0] == level["key_of"]
        assert [s[1] for s in stops][3] == level["run"]
        assert [BUILTIN.match("  " + s[0].strip().split(" ", 1)[1]).group(1)
                for s in stops[1:3]] == ["sort", "sorted"], stops
        # there, py-list is the call's innermost Python frame's (leaf,
        # Pipeline.run), as pyunwind lists it
        assert stops[0][2] == ours[1]
        assert stops[3][2] == ours[8]
        # py-locals: python-gdb.py prints the variables of every Python
        # frame of the call, each after "Locals for NAME"; each frame's
        # names are pyunwind's, in pyunwind's order, and the values are
        # the same where both are plain reprs
        got = locals_for(stops[0][3])
        assert list(got) == ["leaf", "key_of"], stops[0][3]
        got.update(locals_for(stops[3][3]))
        assert list(got) == ["leaf", "key_of", "run", "main", "<module>"]
        for f in truth:
            name = f["function"].split(".")[-1]
            assert_same_variables(got[name], ours_vars[name], f["locals"])
    else:
        # gdb cannot read the `frame` of any eval-loop call: the source
        # builds are optimized (-O3) and 3.12+ has no `cframe`.
        # python-gdb.py sees the C functions' calls and the eval-loop
        # calls, but no Python frame in them; pyunwind, reading memory
        # without DWARF, sees them all.
        assert readable == [False, False], readable
        assert t.kind == "source"
        if t.version >= (3, 14):
            # 3.14's python-gdb.py falls back on the thread state's
            # current_frame for py-bt: the frames are the same as
            # pyunwind's (by co_name), without the C functions' calls
            assert traceback(theirs[0]) == [qualname_to_name(f)
                                            for f in bt], theirs[0]
        else:
            assert traceback(theirs[0]) == [
                ("builtin", "sleep"), ("unreadable",), ("builtin", "sort"),
                ("builtin", "sorted"), ("unreadable",)], theirs[0]
        assert theirs[1].strip() == UNREADABLE
        assert theirs[2].strip() == UNREADABLE
        # py-up stops at the eval-loop call that runs Pipeline.run, as
        # pyunwind's py-up does, but cannot read it there either
        run_stop = [s for s in stops if s[1] == level["run"]]
        assert run_stop, stops
        assert run_stop[0][0].strip() == \
            "#%d (unable to read python frame information)" % level["run"]
        assert run_stop[0][2].strip() == UNREADABLE
        assert run_stop[0][3].strip() == UNREADABLE
        if t.version >= (3, 14):
            # its first Python frame is already the call that runs leaf
            # (3.14's C function calls are not recognized): py-up goes
            # straight to Pipeline.run's, then finds nothing older
            assert stops[0][1] == level["run"]
            assert [s[0].strip() for s in stops[1:]] == \
                ["Unable to find an older python frame"] * (UPS - 1)
        else:
            assert stops[0][1] == level["key_of"]
            assert stops[3][1] == level["run"]


def qualname_to_name(frame):
    """A py-bt line of pyunwind's as python-gdb.py names its function."""
    kind, file, line, function, source = frame
    return (kind, file, line, function.split(".")[-1], source)


COMMANDS = ("py-bt", "py-bt-full", "py-up", "py-down", "py-list",
            "py-locals", "py-print")


def auto_load(t, tmp):
    """gdb arguments that make it auto-load t's python-gdb.py with the
    interpreter, as Debian's python3.X-dbg does, and the script's path.
    Debian's python3.11-gdb.py is where gdb looks by default
    (/usr/share/gdb/auto-load/usr/bin/python3.11-gdb.py for
    /usr/bin/python3.11); for the others, a copy named after the
    interpreter's path in an auto-load directory of the test's own."""
    if t.libpython == DEBIAN_311:
        return [], DEBIAN_311
    script = os.path.join(tmp, os.path.realpath(t.python).lstrip("/") +
                          "-gdb.py")
    os.makedirs(os.path.dirname(script), exist_ok=True)
    shutil.copy(t.libpython, script)
    return ["-iex", "add-auto-load-scripts-directory " + tmp,
            "-iex", "add-auto-load-safe-path " + tmp], script


@pytest.mark.parametrize("order", ["python-gdb.py first", "pyunwind first"])
def test_auto_loaded_python_gdb(target, order, tmp_path):
    """python-gdb.py auto-loaded for real, before pyunwind (gdb -p PID:
    gdb attaches, and so loads the interpreter and its python-gdb.py,
    before its -ex commands source the plugin) or after it (the plugin
    sourced, then `attach PID`): either way py-bt and the others are
    pyunwind's, say so in their help, and python-gdb.py's
    pretty-printers still work."""
    t = target
    args, script = auto_load(t, str(tmp_path))
    commands = ["info auto-load python-scripts",                 # 0
                *["help " + c for c in COMMANDS],                # 1-7
                "py-bt",                                         # 8
                "py-up",                                         # 9
                "py-locals",                                     # 10
                "py-print word",                                 # 11
                "p (PyObject *) &_Py_NoneStruct",                # 12
                "p (PyObject *) 0"]                              # 13
    if order == "python-gdb.py first":
        text, out = run_gdb(commands, args + ["-p", str(t.pid)],
                            plugin=True)
    else:
        text, out = run_gdb(commands, args, plugin=True,
                            setup=["attach %d" % t.pid])
    assert "Traceback (most recent call last)" not in text and \
        "Python Exception" not in text and "Error" not in text, text[-3000:]
    # python-gdb.py was auto-loaded
    assert re.search(r"^Yes\s+%s\s*$" % re.escape(script), out[0], re.M), \
        out[0]
    for c, help_text in zip(COMMANDS, out[1:8]):
        words = " ".join(help_text.split())
        assert words.endswith(
            "This is pyunwind's %s. CPython's python-gdb.py "
            "(Tools/gdb/libpython.py, which Debian's python3.X-dbg makes gdb "
            "load with the interpreter) has a command of that name: with "
            "pyunwind loaded, pyunwind's is the one that runs, whichever of "
            "the two gdb loads first." % c), help_text
    truth = t.truth["frames"]
    # pyunwind's py-bt: the selected frame marked "* ", qualified names
    # (python-gdb.py's marks none and prints "run")
    assert traceback(out[8]) == [
        ("file", f["file"], f["line"], f["function"],
         "    " + t.lines[f["line"] - 1].strip()) for f in truth], out[8]
    assert out[8].splitlines()[1].startswith("* File"), out[8]
    # py-up by one Python frame, "#K File ..." (python-gdb.py's: "#N Frame
    # 0x..., for file ...")
    assert out[9].splitlines()[0] == '#1 File "%s", line %d, in key_of' % (
        truth[1]["file"], truth[1]["line"]), out[9]
    assert variables(out[10]) == list(truth[1]["locals"].items()), out[10]
    assert out[11].strip() == "local 'word' = %s" % \
        truth[1]["locals"]["word"], out[11]
    # python-gdb.py's pretty-printer of PyObject *
    assert out[12].strip() == "$1 = None", out[12]
    assert out[13].strip() == "$2 = 0x0", out[13]
