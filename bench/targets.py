"""Benchmark targets for bench/run: a process with parked Python stacks.

    python3.15 bench/targets.py deep   main thread 50 frames deep, sleeping
    python3.15 bench/targets.py wide   4 threads 200 frames deep each, main
                                       thread blocked too
    python3 bench/targets.py threads50 50 threads 20 frames deep each, main
                                       thread blocked too (bench/gdb-run)
    python3.15 bench/targets.py deep-busy, wide-busy
                                       the same stacks, each running a loop
                                       at its bottom instead of sleeping
                                       (bench/sample-run)
    python3.15 bench/targets.py deep-churn
                                       main thread 50 frames deep, its leaf
                                       calling two short functions in turn
                                       (a stack that never stands still)
    python3.15 bench/targets.py count  main thread 50 frames deep, counting:
                                       prints "rate N" (loop iterations per
                                       second) every second
    python3.15 bench/targets.py tree N N children (os.fork) each 50 frames
                                       deep, sleeping, the parent too
                                       (bench/sample-run tree)

Prints "ready" (and flushes) once every thread is parked, then blocks until
killed.  The stacks do not change afterwards (a busy loop changes only the
line of its innermost frame), so every read of the process sees the same
frames.
"""
import os
import sys
import threading
import time

DEEP = 50
WIDE_THREADS = 4
WIDE_DEPTH = 200
THREADS50 = (50, 20)


def park():
    while True:
        time.sleep(3600)


def spin():
    x = 0
    while True:
        x += 1


def count_loop():
    n = 0
    next_report = time.monotonic() + 1
    while True:
        for _ in range(10000):
            n += 1
        now = time.monotonic()
        if now >= next_report:
            print("rate", int(n / (now - next_report + 1)), flush=True)
            n = 0
            next_report = now + 1


def short_a(x):
    return x + 1


def short_b(x):
    return x - 1


def churn():
    x = 0
    while True:
        x = short_a(x)
        x = short_b(x)


def recurse(n, at_bottom, then=None):
    if n > 1:
        return recurse(n - 1, at_bottom, then)
    at_bottom()
    (then or park)()


def say_ready():
    print("ready", flush=True)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    busy = mode.endswith("-busy")
    mode = mode.removesuffix("-busy")
    if mode == "count":
        recurse(DEEP, say_ready, count_loop)
    elif mode == "tree":
        parked = []
        for _ in range(int(sys.argv[2])):
            r, w = os.pipe()
            if os.fork() == 0:
                os.close(r)
                recurse(DEEP, lambda: os.write(w, b"."))
            os.close(w)
            parked.append(r)
        for r in parked:  # (each child writes once it is parked)
            os.read(r, 1)
        recurse(DEEP, say_ready)
    elif mode == "deep-churn":
        recurse(DEEP, say_ready, churn)
    elif mode == "deep":
        # The recursion itself is DEEP frames (plus main() and <module>);
        # "ready" is printed from the bottom, just before time.sleep.
        recurse(DEEP, say_ready, spin if busy else None)
    elif mode in ("wide", "threads50"):
        count, depth = (WIDE_THREADS, WIDE_DEPTH) if mode == "wide" \
            else THREADS50
        parked = threading.Semaphore(0)
        for i in range(count):
            threading.Thread(target=recurse,
                             args=(depth, parked.release,
                                   spin if busy else None),
                             name=f"{mode}-{i}", daemon=True).start()
        for _ in range(count):
            parked.acquire()
        # Each thread releases the semaphore just before entering
        # time.sleep; give them a moment to actually block in it.
        time.sleep(0.2)
        print("ready", flush=True)
        park()
    else:
        sys.exit("usage: targets.py deep|wide|threads50|deep-busy|"
                 "wide-busy|deep-churn|count|tree N")


if __name__ == "__main__":
    main()
