"""A target whose frames hold locals of every kind pyunwind shows, and
that records them itself.

    locals.py OUT [--threads]

Calls outer() -> spread() (21 frames, with floats and ints of every
size) -> middle(...) -> via() (a closure) -> inner(...) and, at the
bottom, writes OUT (JSON): for each of these frames, innermost first, its
function name
and its variables as CPython sees them (f_locals of the live frame, which
holds arguments, locals, cells and free variables): name, type name,
repr, id.  Then it prints "ready" and sleeps in inner().  With
--threads, a second thread runs the same chain with other values.
"""
import json
import random
import sys
import threading
import time

if hasattr(sys, "set_int_max_str_digits"):  # (3.11+, and late 3.9 and 3.10)
    sys.set_int_max_str_digits(0)


class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y


class MyInt(int):
    pass


CHARS, ITEMS, DEPTH, TEXT = 100, 10, 3, 508


def shown(v, depth=1, open_=()):
    """What docs/dump.md says `--locals` shows for v, made with Python's
    own repr of the parts (before the cut of the whole text)."""
    t = type(v)
    if v is None or t in (bool, float):
        return repr(v)
    if t is int:
        bits = v.bit_length()
        if (bits + 29) // 30 > 700:
            return "<%sint of %d bits>" % ("negative " if v < 0 else "", bits)
        text = repr(v)
        if len(text) > 100:
            return text[:50] + "... (%d digits)" % len(text.lstrip("-"))
        return text
    if t is str:
        if len(v) > CHARS:
            return repr(v[:CHARS]) + "... (%d characters)" % len(v)
        return repr(v)
    if t is bytes:
        if len(v) > CHARS:
            return repr(v[:CHARS]) + "... (%d bytes)" % len(v)
        return repr(v)
    if t in (tuple, list, dict, set, frozenset):
        if depth > DEPTH or id(v) in open_:
            return {tuple: "(...)", list: "[...]"}.get(t, "{...}")
        inner = open_ + (id(v),)
        if t is dict:
            parts = ["%s: %s" % (shown(k, depth + 1, inner),
                                 shown(x, depth + 1, inner))
                     for k, x in list(v.items())[:ITEMS]]
        else:
            parts = [shown(x, depth + 1, inner) for x in list(v)[:ITEMS]]
        if len(v) > ITEMS:
            parts.append("...")
        body = ", ".join(parts)
        if t is tuple:
            return "(%s)" % (body + "," if len(v) == 1 else body)
        if t is list:
            return "[%s]" % body
        if t is dict:
            return "{%s}" % body
        if not v:
            return "%s()" % t.__name__
        return "{%s}" % body if t is set else "frozenset({%s})" % body
    return "<%s at %#x>" % (t.__name__, id(v))


def record(out, frames):
    result = []
    for f in frames:
        vs = {}
        for name, value in f.f_locals.items():
            vs[name] = {"type": type(value).__name__, "shown": shown(value),
                        "id": id(value)}
        result.append({"function": f.f_code.co_name,
                       "qualname": getattr(f.f_code, "co_qualname", f.f_code.co_name),
                       "cells": list(f.f_code.co_cellvars),
                       "free": list(f.f_code.co_freevars),
                       "args": list(f.f_code.co_varnames[
                           :f.f_code.co_argcount + f.f_code.co_kwonlyargcount
                           + bool(f.f_code.co_flags & 4)
                           + bool(f.f_code.co_flags & 8)]),
                       "locals": vs})
    with open(out + ".tmp", "w") as fh:
        json.dump(result, fh)
    import os
    os.replace(out + ".tmp", out)


def inner(out, number, text, *rest, flag=True, **options):
    nothing = None
    negative = -12345678901234567890123456789
    big = 7 ** 400
    huge = 3 ** 20000
    ratio = 0.1 + 0.2
    tiny = 1e-300
    whole = 2.0
    inf = float("-inf")
    nan = float("nan")
    minus_zero = -0.0
    edges = (1e16, 1e15, 0.0001, 1e-05, 123456789012345678.0, 5e-324,
             1.7976931348623157e308, 0.1, 100.0, 1.5)
    quote = "it's"
    both = "it's \"quoted\""
    unicode = "ñandú 😀 \t\n\x00\x7f\x85"
    long_text = "x" * 5000
    raw = b"\x00\x01abc'\xff"
    long_raw = bytes(range(256)) * 4
    pair = (1, "two")
    single = (number,)
    empty_tuple = ()
    items = [1, 2.5, "three", None, [4, [5, [6, [7]]]]]
    many = list(range(100))
    table = {"a": 1, 2: "b", (3, 4): [5]}
    empty_dict = {}
    point = Point(1, 2)
    attrs = point.__dict__
    numbers = {1, 2, 3}
    frozen = frozenset({"only"})
    empty_set = set()
    yes, no = True, False
    mine = MyInt(5)
    cyclic = [1]
    cyclic.append(cyclic)
    nested = {"d": cyclic}
    wide = ["y" * 90] * 10

    def closure():
        return text, number

    frames = [sys._getframe(0)]
    while frames[-1].f_code.co_name != "outer":
        frames.append(frames[-1].f_back)
    record(out, frames)
    done.set()
    while True:
        time.sleep(3600)


def middle(out, number, text, shared):
    captured = number * 2

    def uses():
        return captured + shared

    count = 0
    for count in range(3):
        pass

    def via():
        copy = captured
        inner(out, number, text, "extra", copy, flag=False, key="value")

    via()


def spread(n, out, number, text):
    """n frames, each with floats of every magnitude (and ints)."""
    rng = random.Random(n * 1000 + number)
    sample = tuple(rng.choice([
        lambda: rng.uniform(-1, 1) * 10 ** rng.randint(-330, 308),
        lambda: float(rng.randint(-10 ** 17, 10 ** 17)),
        lambda: rng.randint(-10 ** 6, 10 ** 6) / 10 ** rng.randint(0, 8),
        lambda: rng.random(),
    ])() for _ in range(10))
    ints = tuple(rng.randint(-2 ** 70, 2 ** 70) >> rng.randint(0, 70)
                 for _ in range(10))
    if n:
        spread(n - 1, out, number, text)
    else:
        middle(out, number, text, shared=[number])


def outer(out, number=42, text="hello"):
    spread(20, out, number, text)


done = threading.Event()


def main():
    out = sys.argv[1]
    if "--threads" in sys.argv[2:]:
        t = threading.Thread(target=outer, args=(out + ".thread", 7, "bye"),
                             daemon=True)
        t.start()
        done.wait()
        done.clear()
    threading.Thread(target=lambda: (done.wait(), print("ready", flush=True)),
                     daemon=True).start()
    outer(out)


main()
