"""Target program for the dump tests: parks threads at known places and
writes what CPython itself says about every thread's stack.

    python stacks.py TRUTH.json [--threads N] [--depth N]

Once every thread (main included) is parked, a recorder thread takes
sys._current_frames(), writes TRUTH.json (function, name, file, line of
every frame, innermost first, plus native thread ids and which thread plays
which role), prints "ready" on stdout, calls checkpoint() and ends.  A subinterpreter runs two
threads of its own and records them the same way; threads are keyed
"INTERPRETER_ID:THREAD_IDENT".  From then on no stack changes
until the process is killed, so a dump taken live, from gcore, or from the
core the kernel writes on SIGABRT must equal TRUTH.json exactly.
"""

import argparse
import asyncio
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import módulo_ñ  # noqa: E402  (non-ASCII file name, CJK function name)

PARK = threading.Event()      # never set: parked threads wait on it
parked = threading.Semaphore(0)
roles = {}                    # role -> thread ident
exceptions = {}               # role -> what sys.exception() was when parked
stop_busy = False


def asleep(native_id):
    """Whether thread native_id of this process is in time.sleep's system
    call (select or pselect6 before 3.11, clock_nanosleep after; the
    kernel's word, /proc/self/task/TID/syscall)."""
    try:
        with open("/proc/self/task/%d/syscall" % native_id) as f:
            return f.read().split()[0] in ("23", "35", "230", "270")
    except (OSError, IndexError):
        return False


def checkpoint():
    """Called by the recorder once the truth is written: a debugger that
    runs this program stops here with a breakpoint on getppid()."""
    os.getppid()


def park(role=None):
    """Marks the calling thread as parked, then blocks in a C call."""
    if role:
        roles[role] = threading.get_ident()
        exc = sys.exc_info()[1]
        exceptions[role] = type(exc).__name__ if exc is not None else None
    parked.release()
    time.sleep(1e6)


# -- shapes of stacks -------------------------------------------------------

def recurse(n):
    if n == 0:
        park("recursion")
        return
    recurse(n - 1)


def numbered(i, depth):
    if depth:
        return numbered(i, depth - 1)
    park()


class Outer:
    class Inner:
        def method(self):
            park("nested_class")


def make_closure():
    captured = 42

    def closure():
        park("closure")
        return captured
    return closure


def decorator(fn):
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper


@decorator
def decorated():
    park("decorator")


def lambda_caller():
    f = lambda: park("lambda")  # noqa: E731
    f()


def comprehension():
    # a generator expression has its own frame; a list comprehension is
    # inlined into its caller (PEP 709)
    return list(park("genexpr") for _ in range(1))


def list_comprehension():
    return [park("listcomp") for _ in range(1)]


def exec_code():
    code = compile("park('exec')\n", "<exec-string>", "exec")
    exec(code, {"park": park})


def eval_code():
    eval(compile("park('eval')", "<eval-string>", "eval"), {"park": park})


def generator():
    yield 1
    park("generator")
    yield 2


def drive_generator():
    for _ in generator():
        pass


async def coro_inner():
    park("coroutine")


async def coro_outer():
    await coro_inner()


def drive_coroutine():
    asyncio.run(coro_outer())


def handle_exception():
    try:
        raise ValueError("parked while handling this")
    except ValueError:
        park("except")


def generator_handling_exception():
    try:
        raise KeyError("handled inside a generator")
    except KeyError:
        park("generator_except")  # the exception is the generator's own
        yield


def drive_generator_handling_exception():
    next(generator_handling_exception())


def plain_generator():
    # no handler of its own: sys.exception() is the caller's ValueError
    park("generator_in_except")
    yield


def generator_inside_except():
    try:
        raise ValueError("handled around a generator")
    except ValueError:
        next(plain_generator())


def busy():
    global stop_busy
    roles["busy"] = threading.get_ident()
    parked.release()
    n = 0
    while not stop_busy: n += 1  # noqa: E701  (one line: a fixed location)


def unicode_name():
    módulo_ñ.グリーティング(park)


def emoji_file():
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "stack_\U0001F600.py")
    spec = importlib.util.spec_from_file_location("stack_emoji", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.emoji_file(park)


# -- a subinterpreter -------------------------------------------------------

# A thread of a subinterpreter also has a thread state in the main
# interpreter, under the same ident, and in 3.13 sys._current_frames()
# lists every interpreter's threads with frame objects from the caller's
# allocator (freeing them crashes 3.13.5).  So the subinterpreter's threads
# describe themselves, at the line of the sleep they then park in, and the
# main interpreter is recorded before the subinterpreter starts.
SUB_CODE = r"""
import json, os, sys, threading, time
parked = threading.Semaphore(0)
truth = {}

def write():
    with open(TRUTH + ".tmp", "w", encoding="utf-8") as f:
        json.dump(truth, f)
    os.replace(TRUTH + ".tmp", TRUTH)

def park(alone=False):
    me = describe(sys._getframe())
    me[0]["line"] = sys._getframe().f_lineno + 4
    truth[str(threading.get_ident())] = {"native_id": threading.get_native_id(), "name": threading.current_thread().name, "frames": me}
    parked.release()
    if alone: write()  # noqa: E701  (one line: the sleep's is counted)
    time.sleep(1e6)

def sub_worker(n, alone=False):
    if n:
        return sub_worker(n - 1, alone)
    park(alone)

def record():
    parked.acquire()
    parked.acquire()
    write()

if THREADS:
    threading.Thread(target=sub_worker, args=(3,)).start()
    threading.Thread(target=record).start()
    park()
else:  # 3.11: an isolated subinterpreter may not start threads
    sub_worker(3, True)
"""
sub_go = threading.Event()


def run_subinterpreter(truth_path, box, made):
    """Makes a new interpreter, imports SUB_CODE's modules in it and sets
    `made`; runs SUB_CODE there once the main interpreter has been
    recorded.  (The other threads start once `made` is set: on the
    versions whose interpreters share one GIL, a start and imports
    fighting busy() for it, in 5 ms turns, took 10 s.)"""
    try:
        try:
            import _interpreters
        except ImportError:  # 3.11: the same two calls, under their old name
            import _xxsubinterpreters as _interpreters
        interp = _interpreters.create()
        _interpreters.run_string(interp, SUB_CODE.split("\n", 2)[1])
    finally:
        made.set()
    box["ident"] = threading.get_ident()
    parked.release()
    sub_go.wait()
    box["id"] = interp
    import inspect
    code = "TRUTH = %r\nTHREADS = %r\n%s\n" % (
        truth_path, sys.version_info >= (3, 12), inspect.getsource(describe))
    code += SUB_CODE
    here = describe(sys._getframe())
    here[0]["line"] = sys._getframe().f_lineno + 2  # the run_string call
    box["outer"] = here
    _interpreters.run_string(interp, code)


# -- recording --------------------------------------------------------------

def last_line(func):
    """The last line of func's code: park()'s sleep, busy()'s loop."""
    code = func.__code__
    if hasattr(code, "co_lines"):
        return max(line for _, _, line in code.co_lines() if line)
    import dis  # (3.9: no co_lines)
    return max(line for _, line in dis.findlinestarts(code))


def describe(frame):
    out = []
    while frame is not None:
        code = frame.f_code
        out.append({"function": getattr(code, "co_qualname", code.co_name),
                    "name": code.co_name,
                    "file": code.co_filename, "line": frame.f_lineno})
        frame = frame.f_back
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("truth")
    ap.add_argument("--threads", type=int, default=50)
    ap.add_argument("--depth", type=int, default=1000)
    ap.add_argument("--no-subinterpreter", action="store_true")
    ap.add_argument("--load-libpython", metavar="PATH",
                    help="map a libpython a second time, as ctypes users do")
    args = ap.parse_args()
    with open(args.truth + ".pid", "w") as f:  # for shells in debuggers
        f.write("%d\n" % os.getpid())
    if args.load_libpython:
        import ctypes
        ctypes.CDLL(args.load_libpython)  # its own, never initialised runtime
    sys.setrecursionlimit(args.depth + 500)

    shapes = [lambda: recurse(args.depth), Outer.Inner().method,
              make_closure(), decorated, lambda_caller, comprehension,
              list_comprehension, exec_code, eval_code, drive_generator,
              drive_coroutine, handle_exception,
              drive_generator_handling_exception, generator_inside_except,
              busy, unicode_name, emoji_file]
    shapes += [(lambda i=i: numbered(i, i % 7)) for i in range(args.threads)]
    threads = [threading.Thread(target=s, daemon=True) for s in shapes]
    sub = {} if args.no_subinterpreter else {"wanted": True}
    sub_truth = args.truth + ".sub"
    if os.path.exists(sub_truth):  # (an earlier run's: not this one's)
        os.unlink(sub_truth)
    if not args.no_subinterpreter:
        made = threading.Event()
        sub_thread = threading.Thread(target=run_subinterpreter,
                                      args=(sub_truth, sub, made),
                                      daemon=True)
        sub_thread.start()
        made.wait()
    for t in threads:
        t.start()
    if not args.no_subinterpreter:
        threads.append(sub_thread)

    def record():
        for _ in range(len(threads) + 1):  # every thread, and main, parked
            parked.acquire()
        me = threading.get_ident()
        # parked threads are inside (or entering) their blocking call: wait
        # until two snapshots agree so no thread is between instructions,
        # and each thread in park() or busy() is at the line it stays on
        # (a thread a loaded machine keeps off the CPU for longer than the
        # snapshots' interval may still be on the line before)
        rest = {park.__code__: last_line(park),
                busy.__code__: last_line(busy)}
        prev = None
        for _ in range(4800):
            time.sleep(0.05)
            frames = sys._current_frames()
            snap = {ident: describe(f) for ident, f in frames.items()
                    if ident != me}
            still = all(rest.get(f.f_code, f.f_lineno) == f.f_lineno
                        for ident, f in frames.items() if ident != me)
            del frames
            if snap == prev and still:
                break
            prev = snap
        # sys._current_frames() may list other interpreters' threads too:
        # keep this interpreter's
        native = {t.ident: t.native_id for t in threading.enumerate()}
        names = {t.ident: t.name for t in threading.enumerate()}
        snap = {i: f for i, f in snap.items() if i in native}
        if sub:  # now the subinterpreter: it records itself
            sub_go.set()
            for _ in range(600):
                if os.path.exists(sub_truth):
                    break
                time.sleep(0.05)
            snap[sub["ident"]] = sub["outer"]
        truth = {
            "pid": os.getpid(),
            "version": sys.version.split()[0],
            "main_ident": threading.main_thread().ident,
            "roles": dict(roles),
            "exceptions": dict(exceptions),
            # the recorder itself, for tests that stop it in checkpoint()
            "recorder": {"ident": me, "native_id": threading.get_native_id()},
            "threads": {"0:%d" % ident: {"native_id": native.get(ident),
                                         "name": names.get(ident),
                                         "frames": frames}
                        for ident, frames in snap.items()},
        }
        if sub:
            with open(sub_truth, encoding="utf-8") as f:
                for ident, t in json.load(f).items():
                    truth["threads"]["%d:%s" % (sub["id"], ident)] = t
            # the subinterpreter's threads describe themselves at the line
            # of the sleep they park in, then go there: wait until each is
            # in it (a thread a loaded machine keeps off the CPU between
            # its truth and its sleep was dumped in write(): 8 tests of
            # one process failed so)
            for _ in range(1200):
                if all(asleep(t["native_id"])
                       for key, t in truth["threads"].items()
                       if key.startswith("%d:" % sub["id"])):
                    break
                time.sleep(0.05)
        tmp = args.truth + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(truth, f, ensure_ascii=False, indent=1)
        os.replace(tmp, args.truth)
        print("ready", flush=True)
        checkpoint()

    # the recorder is not part of the stacks: it ends after "ready" (and a
    # stop in checkpoint())
    threading.Thread(target=record).start()
    park("main")


if __name__ == "__main__":
    main()
