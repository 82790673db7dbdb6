"""The location-table decoder against CPython's own co_lines() and
co_positions(), for code objects of the standard library of one
interpreter of each kind (conftest.KINDS: every version; another build of
a version has the same tables); before 3.11, the line-table decoders
against co_lines() (3.10) and dis.findlinestarts() (3.9's co_lnotab)."""

import json
import os
import subprocess

import pytest

from conftest import ROOT, interpreters

# (`builds`: the line decoders hold on every build, 3.9 and 3.10
# among them, conftest.OTHER_BUILDS)
pytestmark = pytest.mark.builds
PYTHONS = interpreters()
TEST_UNIT = os.environ.get("PYU_TEST_UNIT",
                           os.path.join(os.path.dirname(os.environ.get(
                               "PYUNWIND", os.path.join(ROOT, "build", "pyunwind"))),
                               "test_unit"))

# (the end of each snippet: walk() goes on into nested code objects, and
# runs over the code of some standard library modules)
WALK_ON = r"""
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            walk(c)
for mod in (asyncio.base_events, threading, textwrap, argparse, dataclasses, j2.decoder):
    with open(mod.__file__, encoding="utf-8") as f:
        walk(compile(f.read(), mod.__file__, "exec"))
json.dump(out, sys.stdout)
"""

SNIPPET = r"""
import json, sys, types
import asyncio, json as j2, threading, textwrap, argparse, dataclasses
out = []
def walk(code):
    units = len(code.co_code) // 2
    lines = [0] * units
    for start, end, line in code.co_lines():
        for b in range(start, end, 2):
            lines[b // 2] = line or 0
    positions = [[p[0] or 0, p[1] or 0, p[2], p[3]]
                 for p in code.co_positions()]
    for p in positions:  # (a column unknown: both, as pyunwind keeps them)
        if p[0] == 0 or p[2] is None or p[3] is None:
            p[2] = p[3] = -1
        if p[0] == 0:
            p[1] = 0
    out.append({"first": code.co_firstlineno, "table": code.co_linetable.hex(),
                "lines": lines, "positions": positions,
                "name": code.co_qualname})
""" + WALK_ON


# Before 3.11: each instruction's line as the interpreter tells it (3.10:
# co_lines(); 3.9: the last line start at or before it), with the table
# the frame's line comes from (co_linetable, co_lnotab).
SNIPPET_OLD = r"""
import dis, json, sys, types
import asyncio, json as j2, threading, textwrap, argparse, dataclasses
out = []
def walk(code):
    units = len(code.co_code) // 2
    lines = [0] * units
    if sys.version_info >= (3, 10):
        table = code.co_linetable
        for start, end, line in code.co_lines():
            for b in range(start, end, 2):
                lines[b // 2] = line or 0
    else:
        table = code.co_lnotab
        starts = dict(dis.findlinestarts(code))
        line = code.co_firstlineno
        for u in range(units):
            line = starts.get(2 * u, line)
            lines[u] = line
    out.append({"first": code.co_firstlineno, "table": table.hex(),
                "lines": lines, "name": code.co_name})
""" + WALK_ON


def minor_of(label):
    return int(label.split(".")[1])


@pytest.mark.kinds
@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_lines_match_co_lines(label, python):
    minor = minor_of(label)
    mode = "lines" if minor >= 11 else "lines310" if minor == 10 else "lnotab"
    codes = json.loads(subprocess.run(
        [python, "-c", SNIPPET if minor >= 11 else SNIPPET_OLD], check=True,
        capture_output=True, text=True).stdout)
    assert len(codes) > 300
    for c in codes[::3]:
        got = subprocess.run([TEST_UNIT, mode, str(c["first"]), c["table"],
                              str(len(c["lines"]))],
                             check=True, capture_output=True, text=True).stdout
        assert [int(x) for x in got.split()] == c["lines"], c["name"]


@pytest.mark.kinds
@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_positions_match_co_positions(label, python):
    if minor_of(label) < 11:
        pytest.skip("%s has no co_positions (columns came in 3.11)" % label)
    codes = json.loads(subprocess.run([python, "-c", SNIPPET], check=True,
                                      capture_output=True, text=True).stdout)
    for c in codes[1::3]:
        got = subprocess.run([TEST_UNIT, "positions", str(c["first"]),
                              c["table"], str(len(c["positions"]))],
                             check=True, capture_output=True, text=True).stdout
        got = [[int(x) for x in line.split()] for line in got.splitlines()]
        assert got == c["positions"], c["name"]
