"""A thread stopped as it enters an eval loop from C code (3.11, 3.12).

The thread state names the new loop's _PyCFrame (on the C stack) a few
instructions before the loop writes the two words in it, its current
frame and its previous: for that moment they are whatever the stack held
there.  A process that sorts with a Python key function is caught there
about one stop in 125 (3.12.1); pyunwind then read stack garbage (0x1,
0x2, a stale entry frame) and every reader failed: dumps, cores and even
`sample --blocking` (1 % of the samples of workloads.py sorting).  The
stack of that moment is the loop's below, which pyunwind finds on the C
stack (threads.c, pyu_cframe_above).

Real gdb stops the target (tests/targets/entering.py) there: it steps
it instruction by instruction to the first write of the thread state's
cframe that names a loop below the one it named.  At that stop, py-dump in gdb, `pyunwind
dump` and `pyunwind sample` of the live process and `pyunwind dump` of a
gcore core of it must each equal the target's own record of the stack
from which key is called.  Once as the stack was, and once with the two
words set to 2 by gdb (what the loop has not written yet may hold
anything; 2 is what 3.12.1 was seen to hold).  The build before this
one failed 7 of the 8 cases (Debian's 3.11.2 and pyenv's 3.11.7 and
3.12.1, stripped and not; all but 3.11.2 as the stack was); the pyenv
builds run it as well (`builds`)."""

import json
import re

import pytest

from conftest import PYUNWIND, Target, interpreters, pyunwind
from debuggers import Gdb, require_plugin

# (3.11 and 3.12 release builds: the versions whose thread state names a
# _PyCFrame; the words of the cframe, as in core/src/cpython/offsets.c)
PYTHONS = [p for p in interpreters()
           if p[0].startswith(("3.11", "3.12")) and not p[0].endswith("-dbg")]
WORDS = {"3.11": (8, 16), "3.12": (0, 8)}  # current_frame, previous
TS_CFRAME = 56  # PyThreadState.cframe, 3.11 and 3.12
GDB = Gdb()
pytestmark = [pytest.mark.debugger, pytest.mark.builds]

HELPER = '''
import gdb

def read(addr):
    return int(gdb.parse_and_eval("*(unsigned long *)%d" % addr))

def enter_nested(ts, words, garbage):
    """Steps the target to the moment the thread state names a loop
    below the one it named (a call of key from sorted), stops there.
    (Instruction by instruction: hardware watchpoints do not fire in
    every virtual machine, and a software one steps the same way.)"""
    at = ts + TS_CFRAME
    cur = read(at)
    for _ in range(STEPS):
        gdb.execute("stepi", to_string=True)
        new = read(at)
        if new < cur:
            break
        cur = new
    else:
        raise RuntimeError("no loop entered in STEPS instructions")
    if garbage:
        for off in words:
            gdb.execute("set var *(unsigned long *)%d = 2" % (new + off))
    print("entered", hex(new), "below", hex(cur))
'''.replace("TS_CFRAME", str(TS_CFRAME)).replace("STEPS", "200000")

FILE = re.compile(r'File "(.*)", line (\d+), in (.*)$')


def from_text(out):
    """(function, line) of py-dump's frames, innermost first (it prints
    them as a traceback does, innermost last)."""
    return [(m.group(3), int(m.group(2)))
            for m in (FILE.search(line) for line in out.splitlines())
            if m][::-1]


def from_json(text):
    frames = json.loads(text)["threads"][0]["frames"]
    return [(f["name"], f["line"]) for f in frames]


def from_collapsed(path):
    """Each stack of a collapsed profile, innermost first, with its
    count."""
    stacks = {}
    with open(path) as f:
        for line in f:
            stack, count = line.rsplit(" ", 1)
            stacks[stack] = stacks.get(stack, 0) + int(count)
    return stacks


@pytest.mark.parametrize("garbage", [False, True], ids=["as-is", "garbage"])
@pytest.mark.parametrize("param", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_stopped_entering_a_loop(param, garbage, tmp_path):
    require_plugin(GDB)
    label, python = param
    helper = tmp_path / "helper.py"
    helper.write_text(HELPER)
    t = Target(python, "entering.py", str(tmp_path), expect_threads=False)
    try:
        truth = [tuple(f) for f in reversed(t.truth["frames"])]
        words = WORDS[label[:4]]
        dumped = tmp_path / "dump.json"
        profile = tmp_path / "profile.txt"
        core = tmp_path / "core"
        commands = [
            "python exec(open(%r).read())" % str(helper),
            "python enter_nested(%d, %r, %r)" % (t.truth["tstate"], words,
                                                 garbage),
            "py-dump",
            "shell %s dump --json %d > %s" % (PYUNWIND, t.pid, dumped),
            "shell %s sample -d 0.3 -r 100 --format collapsed -o %s %d"
            % (PYUNWIND, profile, t.pid),
            "gcore %s" % core,
            "kill",
        ]
        tr = GDB.run(commands, args=["-p", str(t.pid)], plugin=True)
        assert "entered" in tr["python enter_nested"], tr.text
        assert from_text(tr["py-dump"]) == truth, tr["py-dump"]
        assert from_json(dumped.read_text()) == truth
        # (every sample of the stopped thread is of that moment)
        want = ";".join(["tid:%d" % t.pid] + [
            "entering.py:%s:%d" % (name, line) for name, line in
            reversed(truth)])
        stacks = from_collapsed(profile)
        assert list(stacks) == [want], stacks
        r = pyunwind("dump", "--json", "--core", str(core), "--exe", python)
        assert r.returncode == 0, r.stderr
        assert from_json(r.stdout) == truth
    finally:
        t.close()

