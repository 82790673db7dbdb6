"""Target with many threads that stay: N threads (default 48) waiting on
an event for the whole run, and the main thread computing.

    python parked.py TRUTH.json [--threads N]

TRUTH.json gets the threads' native ids (the main thread's first).
Prints "ready" once every thread waits; runs until killed."""

import argparse
import json
import threading


def parked(ev, ids, lock):
    with lock:
        ids.append(threading.get_native_id())
    ev.wait()


def compute():
    while True:
        sum(range(1000))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("--threads", type=int, default=48)
    a = ap.parse_args()
    ev, lock = threading.Event(), threading.Lock()
    ids = [threading.get_native_id()]
    threads = [threading.Thread(target=parked, args=(ev, ids, lock),
                                daemon=True) for _ in range(a.threads)]
    for t in threads:
        t.start()
    while True:  # (each thread has written its id)
        with lock:
            if len(ids) == a.threads + 1:
                break
    with open(a.truth, "w", encoding="utf-8") as f:
        json.dump({"native_ids": ids}, f)
    print("ready", flush=True)
    compute()


if __name__ == "__main__":
    main()
