"""A target for the debugger commands over Python frames (py-bt, py-up,
py-list, py-locals, py-print): <module> -> main -> Pipeline.run ->
sorted() (C) calling key_of -> leaf, which blocks.  key_of is called from
C code, so on CPython 3.11+ it runs in an eval-loop call of its own:
two eval-loop calls, each with its own native frame.

    pyframes.py OUT [--native-thread]

--native-thread: beside it, a thread that never ran Python, started by
pthread_create (through ctypes) on libc's pause(), every signal blocked
(a signal sent to the process, SIGABRT for a kernel core, reaches the
main thread).  Once leaf() sleeps, a thread of its own writes OUT
(JSON): the main thread's "frames", innermost first, as
sys._current_frames() has them (so the innermost line is the sleep's),
each with its function (co_qualname), file, line and its variables'
reprs (those whose repr is short and made the way pyunwind makes it:
None, bool, int, float, str, small tuples, lists and dicts),
"native_id", and "native_only": the native thread id of the thread
without Python (or null); then prints "ready" and ends."""
import ctypes
import json
import os
import signal
import sys
import threading
import time

OUT = sys.argv[1]
SIMPLE = (type(None), bool, int, float, str)


def simple(v):
    if type(v) in SIMPLE:
        return True
    if type(v) in (tuple, list):
        return len(v) <= 10 and all(type(x) in SIMPLE for x in v)
    if type(v) is dict:
        return len(v) <= 10 and all(type(k) in SIMPLE and type(x) in SIMPLE
                                    for k, x in v.items())
    return False


def native_only():
    """Starts a thread that runs libc's pause() and nothing else; returns
    its native thread id."""
    libc = ctypes.CDLL(None)
    libc.pthread_create.argtypes = [ctypes.POINTER(ctypes.c_ulong),
                                    ctypes.c_void_p, ctypes.c_void_p,
                                    ctypes.c_void_p]
    before = set(os.listdir("/proc/self/task"))
    handle = ctypes.c_ulong()
    # (the new thread inherits the mask: every signal blocked)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        rc = libc.pthread_create(ctypes.byref(handle), None,
                                 ctypes.cast(libc.pause, ctypes.c_void_p),
                                 None)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert rc == 0, os.strerror(rc)
    new, = set(os.listdir("/proc/self/task")) - before
    return int(new)


NATIVE_ONLY = native_only() if "--native-thread" in sys.argv[2:] else None


def asleep_in(ident, func, call):
    """Until thread ident is in func at its line that makes `call` (its
    sleep): a fixed wait was too short on a loaded machine."""
    import linecache
    code = func.__code__
    while True:
        f = sys._current_frames()[ident]
        if f.f_code is code and \
                call in linecache.getline(code.co_filename, f.f_lineno):
            return
        time.sleep(0.01)


def record(ident, native_id):
    asleep_in(ident, leaf, "time.sleep(3600)")
    frames = []
    f = sys._current_frames()[ident]
    while f is not None:
        names = f.f_code.co_varnames + f.f_code.co_cellvars
        frames.append({
            "function": getattr(f.f_code, "co_qualname", f.f_code.co_name),
            "file": f.f_code.co_filename,
            "line": f.f_lineno,
            "locals": {k: repr(v) for k, v in f.f_locals.items()
                       if k in names and simple(v)},
        })
        f = f.f_back
    with open(OUT + ".tmp", "w") as fh:
        json.dump({"frames": frames, "native_id": native_id,
                   "native_only": NATIVE_ONLY}, fh)
    os.replace(OUT + ".tmp", OUT)
    print("ready", flush=True)


def leaf(depth, label):
    ratio = 0.25
    flags = [True, None, 3]
    threading.Thread(target=record, args=(threading.get_ident(),
                                          threading.get_native_id())).start()
    while True:
        try:
            time.sleep(3600)
        except OSError:
            # (python-gdb.py calls pthread_getspecific() in the process
            # to find a 3.14 thread state that sleeps: the kernel's
            # restart of the interrupted sleep is then lost, errno 514)
            pass
    return depth, label, ratio, flags


def key_of(word):
    weight = len(word) * 7
    return leaf(weight, "key:" + word)


class Pipeline:
    def __init__(self, words):
        self.words = words

    def run(self, limit):
        table = {"a": 1, "b": 2}
        return sorted(self.words[:limit], key=key_of), table


def main():
    count = 42
    name = "pyframes"
    return Pipeline(["spam", "eggs"]).run(count), name


main()
