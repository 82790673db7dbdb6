"""A target for py-print's lookups: <module> -> main -> walk (a generator)
-> step (a coroutine, run by send()) -> leaf, which blocks, holding
objects of every kind py-print reads.

    pyprint.py OUT

Once leaf() sleeps, a thread of its own evaluates each expression of
VALUES in the frame it names (0: leaf, 1: the coroutine, 2: the
generator), as Python
does, and writes OUT (JSON): "values", [frame, expr, scope, repr] each,
the repr made the way pyunwind makes it (Python's for plain values,
"<TypeName at 0xADDR>" for the program's own objects); "errors", [frame,
expr, why] for the expressions that Python could only answer by running
code or that fail, why checked here too; "attributes", the attribute
names py-print completes after "p." (p's own and its class's); "dir"
and "int_dir", what dir() has of p and of p.x; and "native_id"; then prints "ready" and ends."""
import json
import os
import sys
import threading
import time

OUT = sys.argv[1]
LIMIT = 42
TABLE = {"alpha": 1, "beta": [10, 20, 30], 7: "seven",
         "nested": {"deep": (1, 2)}}


class Point:
    """A plain class: its instances' attributes are inline values (3.13+)
    or a split table (3.11)."""
    kind = "point"

    def __init__(self, x, y):
        self.x = x
        self.y = y

    @property
    def norm(self):
        return (self.x ** 2 + self.y ** 2) ** 0.5

    def moved(self, dx):
        return Point(self.x + dx, self.y)


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self):
        self.a = "first"


class Wide:
    """More attributes than a shared-keys table takes: a combined dict."""

    def __init__(self):
        for i in range(200):
            setattr(self, "f%d" % i, i)


# (expressions in leaf's frame, 0, the coroutine's, 1, the generator's, 2)
VALUES = [
    (0, "p"), (0, "p.x"), (0, "p.y"), (0, "p.kind"), (0, "Point.kind"),
    (0, "m.y"), (0, "s.a"), (0, "w.f150"), (0, "err.code"),
    (0, "items"), (0, "items[0]"), (0, "items[-1]"), (0, "items[0].x"),
    (0, "pair[1]"), (0, "d['k']"), (0, 'd["n"][1][0]'), (0, "d[3]"),
    (0, "TABLE['beta'][2]"), (0, "TABLE[7]"), (0, "TABLE['nested']['deep']"),
    (0, "LIMIT"), (0, "len"), (0, "os.sep"), (0, "captured"), (0, "count"),
    (1, "label"), (1, "numbers[1]"),
    (2, "total"), (2, "x"), (2, "numbers"), (2, "LIMIT"),
]
ERRORS = [
    (0, "p.norm", "property"),      # a property: code to run
    (0, "s.b", "empty"),            # an empty slot
    (0, "p.nope", "attribute"),     # no such attribute
    (0, "items[9]", "range"),       # out of range
    (0, "d['zz']", "key"),          # no such key
    (0, "count[0]", "subscript"),   # not subscriptable by py-print
    (0, "nosuch", "not found"),     # no such name
    (0, "p..x", "form"),            # not an expression py-print reads
]
SIMPLE = (type(None), bool, int, float, str)


def shown(v):
    """v's repr as pyunwind makes it (short containers only)."""
    if type(v) in SIMPLE:
        return repr(v)
    if type(v) is list:
        return "[%s]" % ", ".join(map(shown, v))
    if type(v) is tuple:
        return "(%s%s)" % (", ".join(map(shown, v)), "," * (len(v) == 1))
    if type(v) is dict:
        return "{%s}" % ", ".join("%s: %s" % (shown(k), shown(x))
                                  for k, x in v.items())
    return "<%s at 0x%x>" % (type(v).__name__, id(v))


def scope(f, name):
    code = f.f_code
    if name in code.co_varnames + code.co_cellvars + code.co_freevars:
        return "local"
    return "global" if name in f.f_globals else "builtin"


def check_error(f, expr, why):
    """Python's own answer to expr, as the reason says it should be."""
    try:
        eval(expr, f.f_globals, f.f_locals)
    except AttributeError:
        assert why in ("attribute", "empty"), expr
    except IndexError:
        assert why == "range", expr
    except KeyError:
        assert why == "key", expr
    except TypeError:
        assert why == "subscript", expr
    except NameError:
        assert why == "not found", expr
    except SyntaxError:
        assert why == "form", expr
    else:
        assert why == "property", expr


def record(ident, native_id):
    try:
        write_truth(ident, native_id)
    except BaseException as e:  # (the test stops waiting for "ready")
        print("failed: %r" % e, flush=True)
        raise


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


def write_truth(ident, native_id):
    asleep_in(ident, leaf, "time.sleep(3600)")
    frames = [sys._current_frames()[ident]]
    frames.append(frames[0].f_back)
    frames.append(frames[1].f_back)
    values = []
    for k, expr in VALUES:
        f = frames[k]
        v = eval(expr, f.f_globals, f.f_locals)
        name = expr.split(".")[0].split("[")[0]
        values.append([k, expr, scope(f, name), shown(v)])
    for k, expr, why in ERRORS:
        check_error(frames[k], expr, why)
    p = frames[0].f_locals["p"]
    with open(OUT + ".tmp", "w") as fh:
        json.dump({"values": values,
                   "errors": [list(e) for e in ERRORS],
                   "attributes": sorted(set(vars(p)) | set(vars(Point))),
                   "dir": dir(p), "int_dir": dir(p.x),
                   "native_id": native_id}, fh)
    os.replace(OUT + ".tmp", OUT)
    print("ready", flush=True)


def leaf(numbers):
    p = Point(3, 4)
    m = Point(5, 6)
    m.__dict__  # (a dict of its own now, no longer only inline values)
    s = Slotted()
    w = Wide()
    err = ValueError("bad")
    err.code = 5  # (an exception's dict: at tp_dictoffset)
    items = [Point(1, 2), "two", 3]
    pair = ("a", -7)
    d = {"k": p, "n": [1, (2, 3)], 3: "three"}
    count = 12
    captured = "cell"
    threading.Thread(target=record, args=(threading.get_ident(),
                                          threading.get_native_id())).start()
    while True:
        time.sleep(3600)
    return lambda: captured, p, m, s, w, err, items, pair, d, count


async def step(numbers):
    label = "step %d" % len(numbers)
    return leaf(numbers)


def walk(numbers):
    total = 0
    for x in numbers:
        total += x
        yield step(numbers).send(None)


def main():
    return list(walk([4, 5, 6]))


main()
