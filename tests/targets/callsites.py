"""Calls by name, and what each call really calls (CPython 3.9, 3.10).

Runs each function below once under sys.setprofile, recording for every
call made the caller's code, the code unit of its instruction (f_lasti)
and the name of what it called: a Python function's code name (a 'call'
event, its caller one frame down) or a C function's (a 'c_call' event).
It runs them again under sys.settrace, recording the instructions each
run of a frame ran, in order.  dis, CPython's own, lists each code
object's call instructions.  Prints one JSON line with all of it and the
addresses of the code objects and of their names' strings, then sleeps
until killed:
tests/integration/test_call_sites.py reads the same code objects with
pyunwind (tests/helpers/call_sites_driver) and holds the names it finds
to what was called."""
import dis
import json
import os
import sys
import time


def leaf(*a, **k):
    return 0


def other(*a, **k):
    return 1


class Box:
    def meth(self, *a):
        return leaf()

    def __call__(self):
        return 2


box = Box()


# -- the forms whose callable a load by name pushed


def plain():
    return leaf()


def nested():
    return leaf(1, other(2), 3)


def keywords():
    return leaf(1, x=other(), y=2)


def starred():
    a, k = (1, 2), {"z": 1}
    return leaf(*a, **k) + other(*a)


def method():
    return box.meth(1)


def attribute():
    return os.path.join("a", "b")


def builtin():
    return len([leaf()])


def looped():
    n = 0
    for i in range(3):
        n += leaf(i)
        other(i)
    while n < 2:
        n += 1 + other()
    return n


def formatted():
    return f"{leaf()}{other()!r:>3}"


def mapping():
    return {"a": leaf(), **{"b": other()}}


def unpacked():
    a, b = leaf(), other()
    return a, b


def sliced():
    return [1, 2, 3][leaf():other()]


def compared():
    return leaf() < other() is not None


def lambdas():
    return sorted([3, 1], key=lambda x: -x)


def guarded():
    try:
        leaf()
        raise ValueError
    except ValueError:
        other()
    return 1


class Quiet:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


def managed():
    with Quiet():
        leaf()
        raise ValueError
    return other()


def pick(k=1):
    return leaf(k) if k else other(k)


# -- forms the bytecode does not name (pyunwind must not either)


def conditional(c=True):
    return leaf(other() if c else 2)


def chosen(c=True):
    return (leaf if c else other)()


def indexed():
    return [leaf][0]()


def local(f=leaf):
    other  # (co_names[0]: what LOAD_FAST 0 would name, wrongly)
    return f()


def twice():
    return Box()()


# a function with more names than one byte counts: its late names are
# loaded with EXTENDED_ARG
_o = type("O", (), {})()
for _i in range(300):
    setattr(_o, "a%d" % _i, _i)
exec("def extended():\n"
     + "".join("    _o.a%d\n" % i for i in range(300))
     + "    return leaf(other())\n")

FUNCS = [plain, nested, keywords, starred, method, attribute, builtin,
         looped, formatted, mapping, unpacked, sliced, compared, lambdas,
         guarded, managed, pick, conditional, chosen, indexed, local, twice,
         extended]  # noqa: F821
UNNAMED = ["conditional", "chosen", "indexed", "local", "twice"]


def main():
    codes = {f.__name__: f.__code__ for f in FUNCS}
    codes["Box.meth"] = Box.meth.__code__
    ids = {id(c): name for name, c in codes.items()}
    calls = []

    def hook(frame, event, arg):
        if event == "call" and frame.f_back and id(frame.f_back.f_code) in ids:
            back = frame.f_back
            calls.append([id(back.f_code), back.f_lasti // 2,
                          frame.f_code.co_name])
        elif event == "c_call" and id(frame.f_code) in ids:
            calls.append([id(frame.f_code), frame.f_lasti // 2,
                          getattr(arg, "__name__", "?")])

    sys.setprofile(hook)
    for f in FUNCS:
        f()
    sys.setprofile(None)
    # each run of a frame: the code units of the instructions it ran, in
    # order (3.9: f_lasti counts bytes, 3.10's frame object too)
    runs = []

    def trace(frame, event, arg):
        if event != "call" or id(frame.f_code) not in ids:
            return None
        frame.f_trace_opcodes = True
        run = [id(frame.f_code)]
        runs.append(run)

        def each(frame, event, arg):
            if event == "opcode":
                run.append(frame.f_lasti // 2)
            return each
        return each

    sys.settrace(trace)
    for f in FUNCS:
        f()
    sys.settrace(None)
    out = {"codes": {}, "names": {}, "calls": calls, "runs": runs}
    for name, c in codes.items():
        ins = list(dis.get_instructions(c))
        out["codes"][name] = {
            "addr": id(c),
            "calls": [i.offset // 2 for i in ins
                      if i.opname.startswith("CALL_")],
        }
        for s in c.co_names:
            out["names"][str(id(s))] = s
    out["unnamed"] = [id(codes[n]) for n in UNNAMED]
    print(json.dumps(out), flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    main()
