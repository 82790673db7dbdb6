"""The calls by name pyunwind finds in a code object's bytecode
(core/src/cpython/call_sites.c, CPython 3.9 and 3.10), held to what the
calls really called: tests/targets/callsites.py runs each of its
functions under sys.setprofile and records, for every call, the
instruction it was made at and the name of what it called.  The sampler
rejects a frame object put on a caller that stands at a call of another
name (objects.c), so a name told wrong would throw real stacks away."""

import json
import os
import subprocess

import pytest

from conftest import PYUNWIND, ROOT, interpreters

pytestmark = pytest.mark.builds
DRIVER = os.path.join(os.path.dirname(PYUNWIND), "call_sites_driver")
OBJECT_FRAMES = [p for p in interpreters()
                 if p[0].startswith(("3.9.", "3.10."))]


@pytest.fixture
def target(request):
    python = request.param
    p = subprocess.Popen([python, os.path.join(ROOT, "tests", "targets",
                                               "callsites.py")],
                         stdout=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        assert line, "callsites.py printed nothing"
        yield p.pid, json.loads(line)
    finally:
        p.kill()
        p.wait()


def ask(pid, questions):
    """The driver's answers to questions (lines), one list of lines per
    question."""
    if not os.path.exists(DRIVER):
        pytest.skip("call_sites_driver not built")
    r = subprocess.run([DRIVER, str(pid)], input="".join(questions),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out, one = [], []
    lines = r.stdout.splitlines()
    for q in questions:
        if q.startswith("reach"):
            out.append([lines.pop(0)])
            continue
        while lines[0] != "end":
            one.append(lines.pop(0))
        lines.pop(0)
        out.append(one)
        one = []
    return out


def read_sites(pid, truth):
    """{code address: [(start, at, name or None)]} as the driver reads
    them from the target, names as the target spells them."""
    codes = [c["addr"] for c in truth["codes"].values()]
    out = {}
    for code, lines in zip(codes, ask(pid, ["sites %d\n" % c
                                            for c in codes])):
        out[code] = []
        for line in lines:
            start, at, name = (int(x) for x in line.split())
            # (a name pyunwind reports is one of the code's co_names)
            assert name == 0 or str(name) in truth["names"], line
            out[code].append((start, at, truth["names"].get(str(name))))
    return out


@pytest.mark.parametrize("target", [p[1] for p in OBJECT_FRAMES],
                         ids=[p[0] for p in OBJECT_FRAMES], indirect=True)
def test_call_sites_name_what_was_called(target):
    pid, truth = target
    sites = read_sites(pid, truth)
    called = {}  # (code, unit) -> the names called there
    for code, unit, name in truth["calls"]:
        called.setdefault((code, unit), set()).add(name)
    named_calls = 0
    for name, code in truth["codes"].items():
        got = sites[code["addr"]]
        # every call instruction dis lists, and only those
        assert [at for _, at, _ in got] == code["calls"], name
        for start, at, site_name in got:
            seen = set()
            for unit in range(start, at + 1):
                seen |= called.get((code["addr"], unit), set())
            if site_name is not None and seen:
                # a Python callee by its code's name, a C one by its own;
                # sorted()'s key is called from the same instruction.
                # (A name told where the bytecode does not say -- a local
                # variable's, the list's of `[leaf][0]()`, one of the two
                # of `(leaf if c else other)()` -- is not what was called.)
                assert site_name in seen, (name, at, site_name, seen)
                named_calls += 1
            elif seen and code["addr"] not in truth["unnamed"]:
                pytest.fail("%s: the call at %d (of %s) was not named"
                            % (name, at, sorted(seen)))
    # (29 calls by name on 3.9: the profile hook saw them all)
    assert named_calls >= 25, named_calls


@pytest.mark.parametrize("target", [p[1] for p in OBJECT_FRAMES],
                         ids=[p[0] for p in OBJECT_FRAMES], indirect=True)
def test_reached_after_a_call(target):
    """What a frame ran after each of its calls, as sys.settrace saw it,
    is reached from that call (an exception's handler, a loop's next turn
    too); "not reached" is what the sampler rejects a stack for, so it
    must never be said of an instruction that ran."""
    pid, truth = target
    calls = {c["addr"]: set(c["calls"]) for c in truth["codes"].values()}
    pairs = set()
    for code, *units in truth["runs"]:
        for i, u in enumerate(units):
            if u in calls[code]:
                pairs |= {(code, u, later) for later in units[i + 1:]}
    assert len(pairs) > 200, len(pairs)
    pairs = sorted(pairs)
    answers = ask(pid, ["reach %d %d %d\n" % (code, at, frm)
                        for code, frm, at in pairs])
    wrong = [p for p, a in zip(pairs, answers) if a != ["1"]]
    assert not wrong, wrong[:5]
    # and what cannot run after a call is not reached: pick()'s two
    # branches, each with its own call; plain()'s load of leaf, before
    # its call
    pick = truth["codes"]["pick"]
    first, second = pick["calls"]
    plain = truth["codes"]["plain"]
    assert ask(pid, ["reach %d %d %d\n" % (pick["addr"], second, first),
                     "reach %d %d %d\n" % (pick["addr"], first, second),
                     "reach %d %d %d\n" % (plain["addr"], 0,
                                            plain["calls"][0])]) == \
        [["0"], ["0"], ["0"]]
