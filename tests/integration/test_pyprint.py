"""py-print's lookups in real gdb and lldb (core/src/cpython/lookup.c):
locals, cells, globals, builtins, attributes (inline values, split and
combined dicts, a materialised dict, tp_dictoffset, __slots__, class
attributes, modules), list, tuple and dict items, in a function's and a
generator's frame; what cannot be read without running code, and each
kind of failure, as one line; gdb's completion of names and attributes.
The truth is the target's own evaluation of each expression
(tests/targets/pyprint.py).  One debugger session per interpreter and
kind, live and on a gcore core, stripped interpreters among them."""

import os
import shutil

import pytest

from conftest import TARGETS, Target, interpreters, matrix
from debuggers import Gdb, Lldb, require_plugin

GDB, LLDB = Gdb(), Lldb()
# (interpreter, debugger): 3.11's split values, 3.13+'s inline values,
# both free-threaded builds (their dict pointer is one word before the
# object), 3.15's stripped Debian build
CASES = [(label, python, dbg)
         for label, python in interpreters()
         for want, dbg in (("3.11.2-debian", GDB), (matrix("3.13"), GDB),
                           (matrix("3.14t"), GDB), ("3.15.2-debian", GDB),
                           (matrix("3.13t"), LLDB), ("3.15.2-debian", LLDB))
         if label == want]

WHY = {  # the line each failure gives, by the target's reason
    "property": "p.norm: a property of Point, not evaluated (py-print runs "
                "no code in the target)",
    "empty": "s.b: the slot 'b' of Slotted is empty",
    "attribute": "p.nope: 'Point' object has no attribute 'nope'",
    "range": "items[9]: list index out of range",
    "key": "d['zz']: no such key",
    "subscript": "count[0]: py-print reads items of lists, tuples and dicts, "
                 "not of 'int' objects",
    "not found": "'nosuch' not found",
    "form": "'p..x': py-print reads NAME, then .ATTR, [INDEX] or ['KEY'], "
            "not '..x'",
}


@pytest.fixture(scope="module", params=CASES,
                ids=["%s-%s" % (c[0], c[2].name) for c in CASES])
def target(request, tmp_path_factory):
    label, python, dbg = request.param
    require_plugin(dbg)
    work = str(tmp_path_factory.mktemp("pyprint"))
    shutil.copy(os.path.join(TARGETS, "pyprint.py"), work)
    t = Target(python, "pyprint.py", work, expect_threads=False)
    t._wait_threads(1)  # (the thread that wrote the truth has ended)
    t.label, t.python, t.dbg = label, python, dbg
    yield t
    t.close()


def argument(dbg, expr):
    """expr as the debugger passes it on: lldb's parser takes quotes off
    its arguments, so an expression with quotes goes in the others."""
    if dbg is LLDB and ("'" in expr or '"' in expr):
        return ('"%s"' if "'" in expr else "'%s'") % expr
    return expr


def commands(t):
    cmds = []
    for frame in (0, 1, 2):
        if frame:
            cmds.append("py-up")
        cmds += ["py-print " + argument(t.dbg, v[1])
                 for v in t.truth["values"] if v[0] == frame]
        cmds += ["py-print " + argument(t.dbg, e[1])
                 for e in t.truth["errors"] if e[0] == frame]
        if t.dbg is GDB and frame == 0:
            cmds += ["complete py-print p.", "complete py-print LIM",
                     "complete py-print p.x.", "complete py-print items[0].",
                     "complete py-print nosuch."]
    return cmds


def check(tr, t):
    assert all(o is not None for o in tr.outputs), tr.text[-3000:]
    error = "error: " if t.dbg is LLDB else ""
    for frame, expr, scope, value in t.truth["values"]:
        out = tr["py-print " + argument(t.dbg, expr)]
        assert out.strip() == "%s %r = %s" % (scope, expr, value), \
            (frame, expr, out)
    for frame, expr, why in t.truth["errors"]:
        out = tr["py-print " + argument(t.dbg, expr)]
        assert out.strip() == error + WHY[why], (expr, out)
    if t.dbg is GDB:
        offered = [line.split("py-print p.", 1)[1] for line in
                   tr["complete py-print p."].strip().splitlines()]
        # p's own attributes and its class's are offered, and nothing
        # that Python's dir(p) does not have
        assert set(t.truth["attributes"]) <= set(offered), offered
        assert set(offered) <= set(t.truth["dir"]), offered
        assert offered == sorted(offered)
        assert tr["complete py-print LIM"].strip() == "py-print LIMIT"
        # items[0] is a Point too (an item, then attributes)
        assert [line.split("py-print items[0].", 1)[1] for line in
                tr["complete py-print items[0]."].strip().splitlines()] == \
            offered
        # an int's attributes are its class's (3.11: readable; 3.12+ keeps
        # a static type's dict elsewhere: none); a failing expression
        # offers nothing, and says nothing
        int_offered = [line.split("py-print p.x.", 1)[1] for line in
                       tr["complete py-print p.x."].strip().splitlines()]
        assert set(int_offered) <= set(t.truth["int_dir"]), int_offered
        assert tr["complete py-print nosuch."].strip() == ""


@pytest.mark.debugger
def test_live(target):
    setup, args, teardown = target.dbg.attach(target.pid)
    tr = target.dbg.run(commands(target) + teardown, args=args, setup=setup)
    check(tr, target)


@pytest.mark.debugger
def test_core(target):
    if target.dbg is not GDB or target.label != "3.15.2-debian":
        pytest.skip("a core: once, on the stripped build")
    core = target.gcore()
    try:
        setup, args, teardown = target.dbg.core(target.python, core)
        tr = target.dbg.run(commands(target), args=args, setup=setup)
        check(tr, target)
    finally:
        os.unlink(core)
