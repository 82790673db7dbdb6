"""CPython's own remote unwinder as the anchor for bench/run.

    python3.15 bench/anchor.py PID ITERATIONS

Run with the SAME interpreter as the target.  For each RemoteUnwinder
configuration that this interpreter's constructor accepts, builds one
unwinder on PID, takes one warm-up get_stack_trace(), then times ITERATIONS
successful calls with time.perf_counter_ns and prints one line per
configuration:

    anchor CONFIG us_per_read F frames N threads T errors E

CONFIG is "default" (RemoteUnwinder(pid)) or the keyword arguments used,
joined with "+" (e.g. "all_threads+cache_frames").  A call that raises while
the target runs is counted in E and retried.  Nothing is asserted.
"""
import sys
import time

import _remote_debugging

# (name, kwargs).  Without all_threads=True the unwinder reads only each
# interpreter's main thread; with cache_frames=True it keeps the frames it
# read last time and re-reads only what changed.  In its default mode (0,
# wall time) it does not ask the kernel whether a thread is on a CPU; mode=1
# (CPU time) with skip_non_matching_threads=False reads every thread's
# /proc/PID/task/TID/stat as pyunwind does without PYU_OPEN_NO_CPU_STATE, and
# still returns every thread.
CONFIGS = [
    ("default", {}),
    ("cache_frames", {"cache_frames": True}),
    ("all_threads", {"all_threads": True}),
    ("all_threads+cache_frames", {"all_threads": True, "cache_frames": True}),
    ("all_threads+cpu_mode", {"all_threads": True, "mode": 1,
                              "skip_non_matching_threads": False}),
]

MAX_FAILURES_IN_A_ROW = 1000


def count(trace):
    threads = frames = 0
    for interp in trace:
        for thread in interp.threads:
            threads += 1
            frames += len(thread.frame_info)
    return threads, frames


def supported(kwargs):
    """Whether the constructor takes these keywords (3.13 takes fewer)."""
    try:
        _remote_debugging.RemoteUnwinder(0, **kwargs)
    except TypeError:
        return False
    except Exception:
        return True  # it got past argument parsing and failed on pid 0
    return True


def take(u, errors):
    failures = 0
    while True:
        try:
            return u.get_stack_trace()
        except (OSError, RuntimeError, UnicodeDecodeError):
            errors[0] += 1
            failures += 1
            if failures >= MAX_FAILURES_IN_A_ROW:
                raise


def bench(pid, iterations, kwargs):
    u = _remote_debugging.RemoteUnwinder(pid, **kwargs)
    errors = [0]
    take(u, [0])  # warm-up
    trace = None
    t0 = time.perf_counter_ns()
    for _ in range(iterations):
        trace = take(u, errors)
    elapsed = time.perf_counter_ns() - t0
    threads, frames = count(trace)
    return elapsed / 1e3 / iterations, frames, threads, errors[0]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: anchor.py PID ITERATIONS")
    pid, iterations = int(sys.argv[1]), int(sys.argv[2])
    for name, kwargs in CONFIGS:
        if not supported(kwargs):
            print(f"anchor {name} unsupported", flush=True)
            continue
        us, frames, threads, errors = bench(pid, iterations, kwargs)
        print(f"anchor {name} us_per_read {us:.3f} frames {frames} "
              f"threads {threads} errors {errors}", flush=True)


if __name__ == "__main__":
    main()
