"""gdb's py-bt, py-list, py-locals, py-up on a thread that runs a
subinterpreter: one native thread, two thread states (the main
interpreter's, in run_subinterpreter, and the subinterpreter's, in park),
tests/targets/stacks.py's.  gdb's `bt` shows the Python frames of both,
each under the eval-loop frame that runs it; the py- commands read the
first (as py-dump --thread does), also when gdb's selected frame is one
that runs the subinterpreter's frames.  One interpreter, one gdb
session."""

import os
import re

import pytest

from conftest import Target, interpreters
from debuggers import Gdb, require_plugin
import test_pyframes_gdb

pytestmark = pytest.mark.debugger  # (the plugin: release build only)
GDB = Gdb()
# a 3.13 or 3.14 with a GIL and debug symbols (pyenv's; until 2026-12-07
# one built from source): gdb's frame numbers in `bt` are those the
# helper below reads
PYTHONS = [p for p in interpreters()
           if re.fullmatch(r"3\.1[34]\.\d+-pyenv", p[0])][:1]

HELPER = test_pyframes_gdb.HELPER + '''
def select_lwp(lwp):
    for t in gdb.selected_inferior().threads():
        if t.ptid[1] == lwp:
            t.switch()
'''


@pytest.mark.skipif(not PYTHONS, reason="no pyenv CPython 3.13 or 3.14 (with "
                    "symbols) among the interpreters (PYU_ONLY)")
def test_thread_running_a_subinterpreter(tmp_path):
    require_plugin(GDB)
    label, python = PYTHONS[0]
    helper = os.path.join(str(tmp_path), "helper.py")
    with open(helper, "w") as f:
        f.write(HELPER)
    t = Target(python, "stacks.py", str(tmp_path),
               args=("--threads", "0", "--depth", "3"))
    try:
        threads = t.truth["threads"]
        outer = next(v for k, v in threads.items() if k.startswith("0:") and
                     v["frames"][0]["function"] == "run_subinterpreter")
        inner = threads["1:" + next(k for k, v in threads.items()
                                    if v is outer).split(":")[1]]
        assert inner["native_id"] == outer["native_id"]
        assert [f["function"] for f in inner["frames"]] == ["park",
                                                           "<module>"]
        tr = GDB.run([
            "source " + helper,
            "python select_lwp(%d)" % outer["native_id"],
            "python print('NATIVE', native_of('park'), "
            "native_of('run_subinterpreter'))",                     # 2
            "python gdb.execute('frame %d' % native_of('park'))",   # 3
            "py-bt",                                                # 4
            "py-list",                                              # 5
            "py-locals",                                            # 6
            "py-up",                                                # 7
        ], args=["-p", str(t.pid)])
    finally:
        t.close()
    out = tr.outputs
    assert "Traceback (most recent call last)" not in tr.text and \
        "Python Exception" not in tr.text and \
        "internal error" not in tr.text, tr.text[-3000:]
    # bt: the subinterpreter's frames under an eval-loop frame newer than
    # the one that runs run_subinterpreter
    m = re.match(r"^NATIVE (\d+) (\d+)$", out[2].strip())
    assert m, out[2]
    park, run = int(m.group(1)), int(m.group(2))
    assert park < run, out[2]
    # py-bt: the main interpreter's thread state; gdb's frame runs no
    # frame of it, so the innermost one an older frame runs is selected
    lines = out[4].splitlines()
    want = outer["frames"]
    assert lines[0] == "Traceback (most recent call first):"
    assert [line for line in lines if "File" in line] == [
        '%sFile "%s", line %d, in %s' % ("* " if k == 0 else "  ",
                                          f["file"], f["line"],
                                          f["function"])
        for k, f in enumerate(want)], out[4]
    marked = [line.strip() for line in out[5].splitlines()
              if line.strip().startswith(">")]
    assert len(marked) == 1 and \
        marked[0].startswith(">%d " % want[0]["line"]), out[5]
    assert "truth_path = " in out[6], out[6]
    assert out[7].splitlines()[0] == '#1 File "%s", line %d, in %s' % (
        want[1]["file"], want[1]["line"], want[1]["function"]), out[7]
