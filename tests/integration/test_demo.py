"""scripts/demo, the README's first command, as a new user runs it: the
hung service dumped (also by py-dump in gdb), then the busy job profiled,
its top table printed and its two pages written, each opened in headless
chromium."""

import os
import re
import subprocess

import pytest

from conftest import ROOT, TIMEOUT
from test_formats import flamegraph_page, web_harness

JOB = os.path.join(ROOT, "examples", "busy_job.py")


@pytest.mark.debugger
def test_demo_dumps_then_profiles():
    r = subprocess.run([os.path.join(ROOT, "scripts", "demo")],
                       capture_output=True, text=True, timeout=4 * TIMEOUT)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out = r.stdout
    # the dump: each of the hung service's threads where it waits; then
    # py-dump in gdb, of the main thread
    dump = out[:out.index("$ gdb -p")]
    for where in ("in Cache._slow_backend_call", "in handle_request",
                  "in main"):
        assert where in dump, dump
    gdb = out[out.index("$ gdb -p"):out.index("$ build/pyunwind sample")]
    assert "in main" in gdb and "handle_request" not in gdb, gdb
    # the profile: the job's functions in the top table, under the
    # target's own stripped Debian python
    top = out[out.index("$ build/pyunwind report"):]
    assert re.search(r"^Process \d+: CPython 3\.15\.\d+, wall mode, \d+ "
                     r"samples", top, re.M), top[:500]
    rows = re.findall(r"^\s+(\d+)\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(\S+)"
                      r"(?: \((.+):\d+\))?$", top, re.M)
    assert len(rows) == 12, top
    mine = {fn for _, _, fn, path in rows if path == JOB}
    assert "make_orders" in mine and len(mine) >= 2, rows
    pages = dict(re.findall(r"^(flame graph|heat map): +(\S+)$", out, re.M))
    assert set(pages) == {"flame graph", "heat map"}, out[-500:]
    # the pages, as a browser shows them
    flame = flamegraph_page(pages["flame graph"], "demo-flame", "write",
                            "batch", "make_orders")
    assert flame["errors"] == [], flame["errors"]
    drawn = {f["fn"] for f in flame["load"]}
    assert {"batch", "make_orders", "write", "read"} <= drawn, drawn
    heat = web_harness("heatmap.mjs", pages["heat map"], "demo-heat", JOB,
                       "write")
    assert heat["errors"] == [], heat["errors"]
    assert any(p == JOB for _, p in heat["index"]), heat["index"]
    with open(JOB, encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[heat["link"]["line"] - 1].startswith("def write("), \
        heat["link"]
