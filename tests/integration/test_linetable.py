"""The location-table decoder against CPython's own co_lines() and
co_positions(), for code objects of the standard library of one
interpreter of each kind (conftest.KINDS: every version; another build of
a version has the same tables)."""

import json
import os
import subprocess

import pytest

from conftest import ROOT, interpreters

PYTHONS = interpreters()
TEST_UNIT = os.environ.get("PYU_TEST_UNIT",
                           os.path.join(os.path.dirname(os.environ.get(
                               "PYUNWIND", os.path.join(ROOT, "build", "pyunwind"))),
                               "test_unit"))

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
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            walk(c)
for mod in (asyncio.base_events, threading, textwrap, argparse, dataclasses, j2.decoder):
    with open(mod.__file__, encoding="utf-8") as f:
        walk(compile(f.read(), mod.__file__, "exec"))
json.dump(out, sys.stdout)
"""


@pytest.mark.kinds
@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_lines_match_co_lines(label, python):
    codes = json.loads(subprocess.run([python, "-c", SNIPPET], check=True,
                                      capture_output=True, text=True).stdout)
    assert len(codes) > 300
    for c in codes[::3]:
        got = subprocess.run([TEST_UNIT, "lines", str(c["first"]), c["table"],
                              str(len(c["lines"]))],
                             check=True, capture_output=True, text=True).stdout
        assert [int(x) for x in got.split()] == c["lines"], c["name"]


@pytest.mark.kinds
@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_positions_match_co_positions(label, python):
    codes = json.loads(subprocess.run([python, "-c", SNIPPET], check=True,
                                      capture_output=True, text=True).stdout)
    for c in codes[1::3]:
        got = subprocess.run([TEST_UNIT, "positions", str(c["first"]),
                              c["table"], str(len(c["positions"]))],
                             check=True, capture_output=True, text=True).stdout
        got = [[int(x) for x in line.split()] for line in got.splitlines()]
        assert got == c["positions"], c["name"]
