"""Worker processes with a known split of their time, for sampling a
process tree.

    python workers.py TRUTH.json MODE [--workers N] [--parent-exits S]
    python workers.py TRUTH.json short [--rate R] [--life MS] [--seconds S]
                                       [--count N]

MODE fork, spawn or forkserver: a ProcessPoolExecutor of N workers (default
2) started by that method, each given a task that never ends: a loop of
three() busy for 3 ms and one() busy for 1 ms (of CPU time), as
split.py's main thread, then an 8 ms sleep; each worker writes to its file
(workers/worker.PID) the time the two took by the clock, preemption
included, so a sampler must find three() and one() in that proportion.
The parent waits for the tasks (in wait()).  Once every worker's file is
there, TRUTH.json gets {"parent": pid, "workers": [pids]} and "ready" is
printed.  With
--parent-exits S the parent instead exits S seconds after that (by the
clock), leaving its workers running (they were started by fork, as
daemons of no pool: os.fork, so that nothing waits for them); once it has
gone they go on for as long as it had lived when it forked them and S
seconds more, then they exit too: each outlives the parent by S seconds
however slowly a loaded machine ran the parent's start.

MODE short: the parent forks R children a second (default 200) for S
seconds (default 2), or until it has forked N of them when --count is
given (however long a loaded machine makes that: a test asks for a
number, not for a speed), each asleep in short_life() for MS ms (default
50) and then gone (200 busy ones would want 10 CPUs); TRUTH.json gets
{"parent": pid, "children": [pids]}, written at the end ("ready" comes at
the start).
"""
import argparse
import concurrent.futures
import json
import multiprocessing
import os
import time

from split import clock, timed_turn  # (split.py's, beside it)


def split_forever(directory, parent=None, after=0.0):
    """three() and one() in turn, then an 8 ms sleep (the workers leave the
    machine's CPUs room); the time each took by the clock, preemption
    included, written to the worker's file after each turn: "T3 T1" in
    seconds, the truth a profile's shares are held to.  With parent (its
    pid): until `after` seconds after that process has exited."""
    path = os.path.join(directory, "worker.%d" % os.getpid())
    t3 = t1 = 0.0
    until = None
    while until is None or clock() < until:
        if parent is not None and until is None and os.getppid() != parent:
            until = clock() + after
        d3, d1 = timed_turn()
        t3 += d3
        t1 += d1
        with open(path + ".tmp", "w") as f:
            f.write("%.6f %.6f" % (t3, t1))
        os.replace(path + ".tmp", path)
        time.sleep(0.008)


def short_life(ms):
    time.sleep(ms / 1000.0)


def wait_for_files(directory, n):
    while True:
        pids = [int(f.split(".")[1]) for f in os.listdir(directory)
                if f.startswith("worker.") and not f.endswith(".tmp")]
        if len(pids) >= n:
            return sorted(pids)
        time.sleep(0.01)


def write_truth(path, truth):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(truth, f)
    os.replace(tmp, path)


def pool(args, directory):
    ctx = multiprocessing.get_context(args.mode)
    ex = concurrent.futures.ProcessPoolExecutor(max_workers=args.workers,
                                                mp_context=ctx)
    futures = [ex.submit(split_forever, directory)
               for _ in range(args.workers)]
    pids = wait_for_files(directory, args.workers)
    write_truth(args.truth, {"parent": os.getpid(), "workers": pids})
    print("ready", flush=True)
    concurrent.futures.wait(futures)


def lived():
    """Seconds since this process started (its start time in /proc, in
    clock ticks since boot)."""
    with open("/proc/self/stat") as f:
        ticks = int(f.read().rsplit(")", 1)[1].split()[19])
    return (time.clock_gettime(time.CLOCK_BOOTTIME) -
            ticks / os.sysconf("SC_CLK_TCK"))


def parent_exits(args, directory):
    parent, before = os.getpid(), lived()
    for _ in range(args.workers):
        if os.fork() == 0:
            try:
                split_forever(directory, parent, before + args.parent_exits)
            finally:
                os._exit(0)
    pids = wait_for_files(directory, args.workers)
    write_truth(args.truth, {"parent": os.getpid(), "workers": pids})
    print("ready", flush=True)
    end = clock() + args.parent_exits
    while clock() < end:
        pass
    os._exit(0)


def short(args):
    print("ready", flush=True)
    children = []
    period = 1.0 / args.rate
    start = clock()
    k = 0
    while (len(children) < args.count if args.count
           else clock() - start < args.seconds):
        wait = start + k * period - clock()
        if wait > 0:
            time.sleep(wait)
        pid = os.fork()
        if pid == 0:
            try:
                short_life(args.life)
            finally:
                os._exit(0)
        children.append(pid)
        k += 1
        while True:  # (reap the ones that ended)
            try:
                done, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if not done:
                break
    for _ in children:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    write_truth(args.truth, {"parent": os.getpid(), "children": children})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("mode", choices=["fork", "spawn", "forkserver", "short"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--parent-exits", type=float, default=0)
    ap.add_argument("--rate", type=float, default=200)
    ap.add_argument("--life", type=float, default=50)
    ap.add_argument("--seconds", type=float, default=2)
    ap.add_argument("--count", type=int, default=0)
    args = ap.parse_args()
    directory = os.path.join(os.path.dirname(os.path.abspath(args.truth)),
                             "workers")
    os.makedirs(directory, exist_ok=True)
    if args.mode == "short":
        short(args)
    elif args.parent_exits:
        parent_exits(args, directory)
    else:
        pool(args, directory)


if __name__ == "__main__":
    main()
