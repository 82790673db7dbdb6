"""Target with many threads that come and go: N threads (default 1000),
each sleeping (or, one in twenty, spinning 5 ms) for 50 ms to 1 s and
then ending,
each replaced by a new one as soon as it ends, so the thread list is never
the same twice.

    python threads.py TRUTH.json [--threads N]

TRUTH.json gets the main thread's native id.  Prints "ready" once N
threads run; runs until killed."""

import argparse
import json
import random
import threading
import time


def worker(rng):
    end = time.perf_counter() + rng.uniform(0.05, 1.0)
    if rng.random() < 0.95:
        time.sleep(end - time.perf_counter())
    else:
        end = time.perf_counter() + 0.005
        while time.perf_counter() < end:
            pass


def keeper(n, started):
    rng = random.Random(1)
    alive = []
    while True:
        alive = [t for t in alive if t.is_alive()]
        while len(alive) < n:
            t = threading.Thread(target=worker,
                                 args=(random.Random(rng.random()),),
                                 daemon=True)
            t.start()
            alive.append(t)
        started.set()
        time.sleep(0.001)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("--threads", type=int, default=1000)
    a = ap.parse_args()
    started = threading.Event()
    threading.Thread(target=keeper, args=(a.threads, started),
                     daemon=True).start()
    started.wait()
    with open(a.truth, "w") as f:
        json.dump({"main": threading.get_native_id(),
                   "threads": a.threads}, f)
    print("ready", flush=True)
    while True:
        time.sleep(1)


main()
