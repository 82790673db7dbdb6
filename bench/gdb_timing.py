"""Runs inside gdb for bench/gdb-run: times pyunwind's py-dump against
gdb's own libpython.py py-bt on every thread, in one gdb session attached to
one process.  Configured by environment variables:

    BENCH_REPEAT   timed runs of each command (the median is printed)
    BENCH_OUT      a scratch file for py-dump's output

Prints one line per reader:

    gdb READER first_ms F median_ms M frames N threads T

first_ms is the first run (caches cold), median_ms the median of the
BENCH_REPEAT runs after it; frames counts the Python frames printed (for
py-dump from its JSON, since the text folds recursion as tracebacks do;
for py-bt its "File ..." lines).
"""
import json
import os
import re
import statistics
import time

import gdb

REPEAT = int(os.environ.get("BENCH_REPEAT", "5"))
OUT = os.environ["BENCH_OUT"]


def timed(command):
    t0 = time.perf_counter()
    text = gdb.execute(command, to_string=True)
    return (time.perf_counter() - t0) * 1000, text


def py_dump():
    ms, _ = timed("py-dump -o " + OUT)
    with open(OUT, encoding="utf-8", errors="replace") as f:
        return ms, f.read()


def py_bt():
    return timed("thread apply all py-bt")


def py_dump_frames(text):
    gdb.execute("py-dump --json -o " + OUT)
    with open(OUT, encoding="utf-8") as f:
        return sum(len(t["frames"]) for t in json.load(f)["threads"])


def measure(name, run, count_frames, count_threads):
    first, text = run()
    runs = [run()[0] for _ in range(REPEAT)]
    print("gdb %s first_ms %.1f median_ms %.1f frames %d threads %d"
          % (name, first, statistics.median(runs), count_frames(text),
             count_threads(text)))


measure("py-dump", py_dump, py_dump_frames,
        lambda t: len(re.findall(r"^Thread 0x", t, re.M)))
measure("py-bt", py_bt,
        lambda t: len(re.findall(r'^\s+File "', t, re.M)),
        lambda t: len(re.findall(r"^Traceback \(most recent call first\)",
                                 t, re.M)))
