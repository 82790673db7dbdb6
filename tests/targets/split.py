"""Target program for the sampler tests: a known split of wall time.

    python split.py TRUTH.json [--seconds S] [--exit CODE] [--handler]
                               [--churn] [--native] [--gc] [--one-ms MS]

The main thread runs, in a loop, three() busy for 3 ms and one() busy for
1 ms, each measured in the thread's CPU time, so a sampler that reads wall
time must find three() in about 3/4 of the main thread's samples and one()
in about 1/4, whatever the machine's speed and load: the time the thread
waits for a CPU falls in the function it was in, in proportion to the CPU
time each takes.  (Measured by the clock, a wait that began in three() and
outlasted it took the time of one() that followed, which pulled the split
towards 1/2 on a loaded machine: 0.58-0.72 with three busy processes on two
CPUs.)  Each turn of the loop scales both by the same random factor from
0.5 to 1.5: a turn as long as the scheduler's slice (4 ms of CPU) kept
its waits at the same place of the turn: 0.75-0.78 on that machine.
Beside it:

  sleeper      a thread asleep in time.sleep (present in wall mode, absent
               in cpu and gil modes)
  --handler    a thread that alternates 1 ms busy inside an `except` block
               (in_except) with 1 ms busy outside one (no_except)
  --churn      a thread whose stack changes all the time: recursion to a
               random depth, calls at varying lines (for the frame cache)
  --native     the main loop calls one() through C: sorted(key=...) calls
               a key function that runs one()
  --gc         a thread that makes reference cycles and collects them
  --one-ms MS  one() busy for MS ms instead of 1 (0: one() is not called):
               a known regression (or a vanished stack) for diff views

TRUTH.json gets the native thread ids by role and the file's path.  It
prints "ready" once every thread runs, runs for S seconds (default 600), or
until it gets SIGUSR1 (a test that ends it once a run has the samples it
needs), then exits with CODE (default 0), or with --exec PROGRAM runs exec.
"""

import argparse
import gc
import json
import os
import random
import signal
import sys
import threading
import time

clock = time.perf_counter
cpu = time.thread_time


def busy(seconds):
    """Busy for `seconds` of this thread's CPU time.  The loop watches the
    clock (a cheap call) until the CPU time left could have been spent,
    then asks the CPU time (a system call): time off the CPU meanwhile is
    made up for."""
    end = cpu() + seconds
    x = 0
    left = seconds
    while left > 0:
        until = clock() + left
        while clock() < until:
            x += 1
        left = end - cpu()
    return x


SCALE = 1.0  # (the main loop's factor for its turn)


def three():
    busy(0.003 * SCALE)


ONE_S = 0.001


def one():
    busy(ONE_S * SCALE)


def timed_turn():
    """three(), then one(): the seconds each took by the clock, preemption
    included (workers.py, prefork.py)."""
    a = clock()
    three()
    b = clock()
    one()
    return b - a, clock() - b


def sleeper(started):
    started.release()
    while True:
        time.sleep(3600)


def in_except():
    busy(0.001)


def no_except():
    busy(0.001)


def handler(started):
    started.release()
    while True:
        try:
            raise ValueError("handled")
        except ValueError:
            in_except()
        no_except()


def churn_level(n, rng):
    if n == 0:
        x = 0
        for _ in range(rng.randrange(1, 50)):
            x += 1
        return x
    if n % 2:
        return churn_level(n - 1, rng) + 1
    return churn_level(n - 1, rng) + 2


def churner(started):
    started.release()
    rng = random.Random(7)
    while True:
        churn_level(rng.randrange(0, 30), rng)


class Node:
    def __init__(self):
        self.other = self


def collector(started):
    started.release()
    while True:
        for _ in range(20000):
            Node()
        gc.collect()


def key_calls_one(v):
    one()
    return v


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--exit", type=int, default=0)
    ap.add_argument("--handler", action="store_true")
    ap.add_argument("--churn", action="store_true")
    ap.add_argument("--native", action="store_true")
    ap.add_argument("--gc", action="store_true")
    ap.add_argument("--one-ms", type=float, default=1.0)
    ap.add_argument("--exec", metavar="PROGRAM",
                    help="at the end, exec PROGRAM (with no arguments) "
                    "instead of exiting")
    args = ap.parse_args()
    global ONE_S, SCALE
    ONE_S = args.one_ms / 1000
    roles = {"main": threading.get_native_id()}
    started = threading.Semaphore(0)
    helpers = [("sleeper", sleeper)]
    if args.handler:
        helpers.append(("handler", handler))
    if args.churn:
        helpers.append(("churn", churner))
    if args.gc:
        helpers.append(("gc", collector))
    threads = []
    for role, fn in helpers:
        t = threading.Thread(target=fn, args=(started,), name=role,
                             daemon=True)
        t.start()
        threads.append((role, t))
    for _ in helpers:
        started.acquire()
    for role, t in threads:
        roles[role] = t.native_id
    with open(args.truth, "w", encoding="utf-8") as f:
        json.dump({"roles": roles, "file": os.path.abspath(__file__),
                   "version": "%d.%d.%d" % sys.version_info[:3]}, f)
    stop = []
    signal.signal(signal.SIGUSR1, lambda *_: stop.append(True))
    print("ready", flush=True)
    end = time.monotonic() + args.seconds
    rng = random.Random(3)
    while time.monotonic() < end and not stop:
        SCALE = 0.5 + rng.random()  # (a C method: no frame of its own)
        three()
        if args.native:
            sorted([1], key=key_calls_one)
        elif ONE_S > 0:
            one()
    if args.exec:
        os.execv(args.exec, [args.exec])
    sys.exit(args.exit)


if __name__ == "__main__":
    main()
