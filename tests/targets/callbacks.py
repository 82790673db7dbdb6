"""A target whose Python stack goes through ctypes callbacks twice:
<module> -> outer -> libc's qsort (C, through libffi) -> compare (a
CFUNCTYPE, called back through a libffi closure) -> callback_twice ->
callback_apply (C without unwind tables, ext/callback.c) -> inner -> a
blocking pause().

    callbacks.py OUT LIBCALLBACK

Writes OUT (JSON: its Python frames innermost first, as the traceback
module sees them, and its thread id) and prints "ready" just before
the pause."""
import ctypes
import ctypes.util
import json
import os
import signal
import sys
import threading
import traceback

OUT, LIB = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(ctypes.util.find_library("c"))
lib = ctypes.CDLL(LIB)
INT_P = ctypes.POINTER(ctypes.c_int)
COMPARE = ctypes.CFUNCTYPE(ctypes.c_int, INT_P, INT_P)
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)


def record():
    frames = [{"function": f.name, "line": f.lineno}
              for f in reversed(traceback.extract_stack()[:-1])]
    with open(OUT + ".tmp", "w") as fh:
        json.dump({"frames": frames, "native_id": threading.get_native_id(),
                   "ident": threading.get_ident(),
                   "version": "%d.%d.%d" % sys.version_info[:3]}, fh)
    os.replace(OUT + ".tmp", OUT)


def inner(x):
    record()
    print("ready", flush=True)
    signal.pause()
    return x


def compare(a, b):
    lib.callback_twice(on_callback, a[0])
    return a[0] - b[0]


on_callback = CALLBACK(inner)
on_compare = COMPARE(compare)


def outer():
    items = (ctypes.c_int * 2)(2, 1)
    libc.qsort(items, 2, ctypes.sizeof(ctypes.c_int), on_compare)


outer()
