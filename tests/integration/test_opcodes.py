"""sample --opcodes: each frame names the bytecode instruction it ran.

The truth is CPython's own `dis`, run by the target's interpreter over the
target's source: every instruction a profile names must be one that `dis`
lists at that offset of that function, on that line, under that name (or
one of its specialised or instrumented forms, as that version's `dis`
knows them).  The heat map's bytecode panel is read in headless chromium
and compared with the capture's json."""

import collections
import json
import os
import subprocess

import pytest

from conftest import (TIMEOUT, interpreters, labelled, longer, pyunwind,
                      until_shown)
from test_formats import report, web_harness
from test_sample import assert_split, collapsed, enough, split_target

PYTHONS = interpreters()

# Run by the target's interpreter: each function of a source file (by its
# qualified name; before 3.11, which has none, its name, as pyunwind shows
# it) with its instructions by offset in code units, and the names dis
# gives the specialised forms of each instruction.
DIS = r"""
import dis, json, sys
path = sys.argv[1]
code = {}
def lines(co):  # (before 3.11: the line each instruction is on)
    line = None
    for i in dis.get_instructions(co):
        line = i.starts_line or line
        yield i, line
def walk(co):
    code[getattr(co, "co_qualname", co.co_name)] = {
        str(i.offset // 2): [i.opname, i.positions.lineno
                             if hasattr(i, "positions") else line]
        for i, line in lines(co)}
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            walk(c)
with open(path) as f:
    walk(compile(f.read(), path, "exec"))
print(json.dumps({"code": code, "deopt": dict(getattr(dis, "deoptmap", {}))}))
"""


def dis_of(python, path):
    r = subprocess.run([python, "-c", DIS, path], capture_output=True,
                       text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def named_as(op, base, deopt):
    """Whether op is base or one of its forms in this version's dis."""
    return (op == base or deopt.get(op) == base or
            op == "INSTRUMENTED_" + base)


def instr_counts(data, path):
    """{(qualname, line, instr, op, base): [self, total]} of the frames of
    file path in a profile's json (total once per stack)."""
    funcs = data["functions"]
    out = collections.defaultdict(lambda: [0, 0])
    for st in data["stacks"]:
        seen = set()
        for k, i in enumerate(st["frames"]):
            f = data["frames"][i]
            fn = funcs[f["function"]]
            if fn["file"] != path or "instr" not in f:
                continue
            key = (fn["name"], f["line"], f["instr"], f["op"], f["base"])
            if k == len(st["frames"]) - 1:
                out[key][0] += st["count"]
            if i not in seen:
                seen.add(i)
                out[key][1] += st["count"]
    return out


def check_instrs(data, src, python):
    """Every instruction a profile's json names in file src is the one
    the interpreter's dis lists at that offset of that function, on that
    line, by that name or one of its forms.  Returns instr_counts."""
    counts = instr_counts(data, src)
    assert counts, data["frames"][:10]
    want = dis_of(python, src)
    for (name, line, instr, op, base), (self, total) in counts.items():
        ins = want["code"].get(name, {}).get(str(instr))
        assert ins, (name, instr, op, "no such instruction in dis")
        assert ins[0] == base, (name, instr, op, base, ins)
        assert named_as(op, base, want["deopt"]), (name, op, base)
        assert ins[1] in (line, None), (name, instr, line, ins)
    return counts


def opcodes_capture(python, workdir, seconds="1.5"):
    t = split_target(python, workdir)
    path = os.path.join(workdir, "ops.raw")
    try:
        r = pyunwind("sample", "-d", seconds, "--opcodes", "--format", "raw",
                     "-o", path, str(t.pid))
        assert r.returncode == 0, r.stderr
    finally:
        t.close()
    return path, t.truth


@pytest.mark.parametrize("label,python", PYTHONS, ids=[p[0] for p in PYTHONS])
def test_opcodes_are_the_targets_own_instructions(label, python, workdir):
    """Every instruction the profile names in split.py is the one dis
    lists at that offset, on that line; busy()'s loop shows several of its
    instructions, whose self samples are busy()'s; the formats that show
    no instructions still show the split, one line per stack."""
    def attempt(k):  # (longer runs until the split can be judged)
        path, truth = opcodes_capture(python, workdir, longer("1.5", k))
        text = report(path, "--format", "collapsed").stdout
        return enough(collapsed(text)[truth["roles"]["main"]], 0.1) and \
            (path, truth)
    path, truth = until_shown(attempt)
    data = json.loads(report(path, "--format", "json").stdout)
    counts = check_instrs(data, truth["file"], python)
    busy = {k: v for k, v in counts.items() if k[0] == "busy"}
    assert len(busy) >= 3, busy
    # (busy() is innermost whenever it runs: its self samples are its
    # instructions')
    funcs = data["functions"]
    busy_self = sum(st["count"] for st in data["stacks"]
                    if funcs[data["frames"][st["frames"][-1]]["function"]]
                    ["name"] == "busy")
    assert sum(s for s, _ in busy.values()) == busy_self
    text = report(path, "--format", "collapsed").stdout
    stacks = [line.rsplit(" ", 1)[0] for line in text.splitlines()]
    assert len(set(stacks)) == len(stacks)  # one line per stack
    assert_split(collapsed(text)[truth["roles"]["main"]], tolerance=0.1)


def test_heatmap_bytecode_panel_in_chromium(workdir):
    """The heat map of a capture with --opcodes, in headless chromium: the
    bytecode toggle shows under each line the instructions that ran on it,
    with the self and total samples the capture's json gives them."""
    python = labelled(PYTHONS, "3.15.2-debian")
    path, truth = opcodes_capture(python, workdir)
    data = json.loads(report(path, "--format", "json").stdout)
    page = os.path.join(workdir, "heat.html")
    report(path, "--format", "heatmap", "-o", page)
    src = truth["file"]
    got = web_harness("heatmap_bytecode.mjs", page, "heatmap-bytecode", src)
    assert got["errors"] == [], got["errors"]
    assert got["hidden_before"] == 0, got  # shown only when asked for
    want = collections.defaultdict(list)
    for (name, line, instr, op, base), (self, total) in sorted(
            instr_counts(data, src).items(), key=lambda kv: kv[0][2]):
        want[str(line)].append([instr, op, base, self, total])
    for rows in want.values():
        rows.sort(key=lambda x: (x[0], x[1]))
    shown = {line: sorted(rows, key=lambda x: (x[0], x[1]))
             for line, rows in got["lines"].items()}
    assert shown == dict(want)


def ops_of(titles):
    """{op: self samples} summed over tooltips' "instructions (self):"."""
    out = collections.Counter()
    for t in titles:
        for line in t.splitlines():
            if line.startswith("instructions (self): "):
                for part in line.split(": ", 1)[1].split(", "):
                    op, n = part.rsplit(" ", 1)
                    out[op] += int(n)
    return dict(out)


def test_flamegraph_tooltips_name_instructions(workdir):
    """The flame graph of a capture with --opcodes, in headless chromium:
    busy()'s frames say which instructions they ran, with the self samples
    the capture's json gives each, in the graph and in the inverted
    view."""
    python = labelled(PYTHONS, "3.15.2-debian")
    path, truth = opcodes_capture(python, workdir)
    data = json.loads(report(path, "--format", "json").stdout)
    page = os.path.join(workdir, "flame.html")
    report(path, "--format", "flamegraph", "-o", page)
    got = web_harness("flamegraph_ops.mjs", page, "flamegraph-opcodes",
                      "busy")
    assert got["errors"] == [], got["errors"]
    want = collections.Counter()
    for (name, _, _, op, _), (self, _) in instr_counts(
            data, truth["file"]).items():
        if name == "busy" and self:
            want[op] += self
    assert len(want) >= 3, want
    assert ops_of(got["titles"]) == dict(want)
    assert ops_of(got["inverted"]) == dict(want)
