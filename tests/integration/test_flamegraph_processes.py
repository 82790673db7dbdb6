"""The flame graph page of several processes: one run of `pyunwind sample
--subprocesses` over tests/targets/tree.py (a parent, a fork Pool's two
workers, a spawn and a forkserver child, a child behind /bin/sh), opened
in headless chromium (tests/web/flamegraph_processes.mjs) and used as a
person would, against the pids the tree recorded itself."""
import os
import re

from conftest import interpreters, labelled, matrix, python_version, pyunwind
from test_formats import web_harness
from test_subprocesses import tree

PYTHONS = interpreters()
ROLES = ("pool", "spawned", "forkserved", "shelled")


def test_flamegraph_of_subprocesses_in_chromium(workdir):
    """The processes' table lists every Python process of the tree by pid
    (not the shell), their samples add up to all the stacks, and so does
    the process choice; a pool worker chosen, the graph is its own stack
    (pool_park, not the parent's parent_park), the thread choice lists
    its one thread, its row is marked; the tooltip names the processes a
    frame's samples came from; search works inside the choice; a click
    on the chosen row shows every process again."""
    python = labelled(PYTHONS, matrix("3.14"), matrix("3.14t"))
    page = os.path.join(workdir, "page.html")
    with tree(python, workdir) as (pid, truth):
        r = pyunwind("sample", "--subprocesses", "-d", "2", "--format",
                     "flamegraph", "-o", page, str(pid))
        assert r.returncode == 0, r.stderr
    with open(page, encoding="utf-8") as f:
        html = f.read()
    # self-contained (the one URL is the SVG export's namespace, a name)
    html = html.replace('"http://www.w3.org/2000/svg"', "")
    assert "http:" not in html and "https:" not in html
    worker, other = truth["pool"]
    got = web_harness("flamegraph_processes.mjs", page,
                      "flamegraph-processes", str(worker), "pool_park")
    assert got["errors"] == [], got["errors"]
    rows = got["rows"]
    pids = [row["pid"] for row in rows]
    assert len(set(pids)) == len(pids)
    assert pids[0] == truth["parent"] == pid, pids
    for role in ROLES:
        for child in truth[role]:
            assert child in pids, (role, child, pids)
    assert truth["shell"] not in pids
    assert got["title"].startswith(
        "%d processes: CPython %s, wall mode"
        % (len(rows), python_version(python))), got["title"]
    # the tree was there before the run: every process sampled to the
    # end, from the start (the root) or from when the first scans of the
    # tree found it: near the start by the run's ticks, not the clock's
    # (the first look at the tree may take a while on a loaded machine or
    # in the ASan build, and no tick is sampled before it; each tick
    # samples every process found, so each main thread has nearly the
    # root's samples: the thread choice's counts)
    assert rows[0]["when"] == "whole run", rows[0]
    for row in rows[1:]:
        assert re.fullmatch(r"whole run|from \d+\.\d\d s", row["when"]), row
    mains = {int(m.group(1)): int(m.group(2)) for m in (
        re.search(r"^pid \d+: Thread (\d+) \(main thread\) — (\d+) samples$",
                  t) for t in got["threads"]) if m}
    assert set(pids) <= set(mains), (pids, got["threads"])
    assert all(mains[p] >= 0.9 * mains[pid] for p in pids), mains
    assert all(row["samples"] > 0 for row in rows), rows
    total = sum(row["samples"] for row in rows)
    assert total == got["total"] == got["stacks"], (rows, got["total"],
                                                    got["stacks"])
    assert abs(sum(float(row["share"].rstrip("%")) for row in rows) -
               100) < 0.01 * len(rows), rows
    # the process choice: every process with its samples
    options = got["options"]
    assert options[0] == {"value": "-1", "text": "all processes — %d "
                          "samples" % total}, options[0]
    for row, opt in zip(rows, options[1:]):
        assert opt["text"].startswith("pid %d " % row["pid"]), (row, opt)
        assert opt["text"].endswith(" — %d samples" % row["samples"]), opt
    assert len(options) == len(rows) + 1
    # every process drawn: its outermost row holds every stack
    assert sum(f["total"] for f in got["all"] if f["depth"] == 0) == total
    # the tooltips of pool_park (a frame for each way a worker was
    # forked): the two workers, no other process, each frame's samples
    named = set()
    for tip in got["tooltips"]:
        m = re.search(r"\ntotal (\d+) samples.*\nin \d+ process(?:es)?: "
                      r"(.*)$", tip)
        assert m, tip
        counts = {int(p): int(c) for p, c in
                  re.findall(r"pid (\d+) (\d+) \(", m.group(2))}
        assert sum(counts.values()) == int(m.group(1)), tip
        named |= set(counts)
    assert named == {worker, other}, (named, got["tooltips"])
    # one worker chosen: its own stack only
    chosen = got["chosen"]
    assert "pool_park" in chosen["frames"], chosen["frames"]
    assert "parent_park" not in chosen["frames"], chosen["frames"]
    assert not {"spawned_park", "forkserved_park",
                "shelled_park"} & set(chosen["frames"]), chosen["frames"]
    mine = next(row for row in rows if row["pid"] == worker)
    assert chosen["info"] == "total %d samples in process %d" % (
        mine["samples"], worker), chosen["info"]
    assert chosen["marked"] == [worker], chosen["marked"]
    assert chosen["threads"] == [
        "all threads",
        "Thread %d (main thread) — %d samples" % (worker, mine["samples"])], \
        chosen["threads"]
    assert chosen["hotspots"] == ["park_here"], chosen["hotspots"]
    assert chosen["search"] == ["pool_park"], chosen["search"]
    assert chosen["matched"] == "matched: %d samples, 100.00%%" % \
        mine["samples"], chosen["matched"]
    assert "pool_park" in got["thread"], got["thread"]
    # every process's thread choice names each thread's process
    assert all(t.startswith("pid ") for t in got["threads"][1:]), \
        got["threads"]
    assert len(got["threads"]) > len(rows)  # (the parent's pool threads)
    assert got["back"] == got["all"]
