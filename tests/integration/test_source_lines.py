"""pyu_source_lines (core/src/writers/source_lines.c) against each
version's own traceback module: for every instruction position of a
corpus of tricky expressions, of a few odd files (CRLF and CR newlines, a
BOM, a Latin-1 cookie, bytes that are not UTF-8) and of a few real
standard-library modules of that interpreter, the target formats a
FrameSummary with those positions (StackSummary.format(), no colour) and
tests/helpers/source_lines_driver must write the same text below the
'  File ...' line.  One interpreter per minor version."""

import json
import os
import re
import subprocess

import pytest

from conftest import PYUNWIND, another_build, interpreters

DRIVER = os.path.join(os.path.dirname(PYUNWIND), "source_lines_driver")

# Standard-library modules of the target, and how many of their positions
# to compare (evenly spread); the corpora are compared whole.
STDLIB = ("json.decoder", "difflib", "argparse")
STDLIB_CAP = 2500


def one_per_version():
    """(label, path, minor) of one interpreter of each minor version, and
    of each micro version of 3.11 and 3.12, whose tracebacks changed
    within them (3.11.7 and 3.12.1 count columns and moved their
    anchors)."""
    seen, out = set(), []
    for label, path in interpreters():
        if another_build(label):
            continue
        version = tuple(int(x) for x in label.split("-")[0].rstrip("t")
                        .split(".")[:3])
        key = version if version[1] <= 12 else version[:2]
        if version[1] < 11:
            continue  # (no positions, no carets: test_linetable's lines)
        if key not in seen:
            seen.add(key)
            out.append((label, path, version[1]))
    return out


PYTHONS = one_per_version()

# Expressions of every shape whose anchors CPython computes, and the
# statements around them.  Valid Python 3.11 (compiled, never run).
CORPUS = r'''# -*- coding: utf-8 -*-
import os, sys
from os import path as p, sep


def binops(a, b, c, d, e):
    x = a + b
    x = a+b
    x = a  +  b
    x = (a) + (b)
    x = (a + b) * (c - d)
    x = ((a)) + ((b))
    x = a ** b ** c
    x = a**-b
    x = a // b % c @ d
    x = a << b >> c | d & a ^ b
    x = -a + ~b - +c
    x = a + b  # a comment + c
    x = a if b else c + d
    x = a+b if c else d*e
    x = [a + b for a in c if a - d]
    x = a[b] + c[d]
    x = a[b][c][d]
    x = a[b:c] + a[::2] + a[1:-1:2] + a[b, c] + a[b:c, ::d]
    x = a[(b)] + (a)[b] + a[ b ] + a [b] + a[b,] + a[:]
    x = a.b.c.d(e).f[g].h()
    x = f(a)(b)(c)
    x = f(a, b=c, *d, **e)
    x = f(*a, *b, c=d, **e)
    x = f(i for i in a)
    x = f (a) + g ()
    x = (f)(a)
    x = a.b (c) [d]
    x = a *b* c
    x = a		+	b
    x = a is not b and c not in d or not e
    x = a < b <= c != d
    x = lambda q, *r, s=1, **t: q + s
    x = (y := a + b) * 2
    x = [*a, *b] + [a, *b]
    x = {**a, 'k': b} | {c: d for c in e}
    x = {a, b} - {c for c in d}
    x = (a, b) + (c,) + ()
    x = 1 + 2.5 - 3j * 0x1F // 0o17 % 0b101 + 1_000_000 + 1e10 + .5
    x = ... if a else None
    x = True + False
    return a + b


def strings(a, b):
    x = 'str' + "str" + @@@t@@@ + """t""" + r'\'' + b'x'.decode()
    x = "a + b" + 'c[d]' + "f(x)" + a
    x = "%s %d" % (a, b)
    x = "a" "b" 'c' + a
    x = f"{a + b} {b[a]!r:>{a}} {a(b)=}" + f'{a}' + a
    x = f"{a!r}" + rf"{b}\n" + a[b]
    x = a['key'] + a["#"] + a['\\'] + a["]"]
    x = a(')') + a('(') + a(',') + a('\'')
    x = """multi
line""" + a
    x = a + """
    + b
    """
    return "done" + a


def unicode_lines(a, b):
    x = "中文" + a + "字符"
    y = 中文 + 变量[索引] + 函数(参数)
    z = "😀😀" + a[b] + "👍"
    w = "ｆｕｌｌ" + a["ｗｉｄｅ"] + b
    v = "e\U00000301" + "é" + a["é"] + b
    u = "☰☱" + a + "䷀" + b
    t = "\U0000200b" + a + "\U0000200d" + b
    s = "👨‍👩‍👧" + a["한국어"] + b
    r = "\U0000001b[31m" + a[b] + "\U0000001b[0m" + "\U0000001a" + b
    q = "" + a[b]
    return 中文(x, y, z)


def calls(a, b, c):
    f(a)
    f(a, b)
    f()
    a.b(c)
    a.b.c(d)(e)
    a[b](c)
    a(b)[c]
    f(
        a,
        b,
    )
    f(a,
      b)
    x = f(a)
    x = a.f(b)
    x = f(
        a)
    x = y = f(a)
    x.y = f(a)
    x[0] = f(a)
    x, y = f(a)
    x: int = f(a)
    x += f(a)
    a[b] += c
    a.b += c
    del a[b]
    del a.b
    assert a(b), c[d]
    f(a)(b)(
        c
    )
    g(lambda: a + b)
    g(a, key=lambda k: k[0])
    return f(a)


def returns_a(a):
    return a.b(c)


def returns_b(a):
    return f(a) + g(a)


def returns_c(a):
    return (f(a))


def returns_d(a):
    return f(a,
             b)


def returns_e(a):
    return a[b]


def returns_f(a):
    return f(a); x = 1


def multiline(a, b, c):
    x = (
        a +
        b
    )
    x = (a
         *
         b)
    x = [
        a,
        b[
            c
        ],
    ]
    x = a[
        b
    ]
    x = f(
        a
    )(
        b
    )
    x = (
        a
        # comment
        + b
    )
    x = (a  # c
         + b)
    x = a(b)[
        c](d)
    x = {
        'a': a,
        'b': b,
    }
    x = (a +
         b +
         c +
         a +
         b +
         c)
    x = (f(a)
         .g(b)
         .h(c))
    x = f(a,
          b,
          c,
          a,
          b,
          c,
          a)
    if (a and
            b):
        pass
    for i in (a +
              b):
        pass
    return (a
            + b)


def statements(a, b):
    for i in a[b]:
        print(i + 1)
    while a < b:
        a += 1
    with open(a) as f, open(b) as g:
        f.write(g.read())
    try:
        a / b
    except (ValueError, TypeError) as e:
        raise RuntimeError(e) from e
    finally:
        b.close()
    if a: b(); c(); d = 1
    global G
    G = a[b] if a else b[a]
    match a:
        case [x, y]:
            print(x + y)
        case {"k": v}:
            print(v[0])
        case _:
            pass
    x = [i * j for i in a for j in b if i if j]
    y = {i: j for i, j in a.items()}
    z = (i for i in a)
    w = [i for i in (j for j in a)]
    print(*a, sep=b, **c)
    a, *b = c
    (a), b = c, d
    [a, b] = c
    return x, y, z, w


async def coroutines(a, b):
    x = await a + await b
    x = await a(b)
    x = (await a)[b]
    async for i in a:
        print(i)
    async with a as b:
        print(b)
    return [i async for i in a] + await a


def generators(a, b):
    yield a + b
    x = yield a[b]
    yield from a(b)
    x = (yield)


class Klass(Base, metaclass=Meta):
    attr = a + b
    other: int = a[b]

    @decorator(a + b)
    @property
    def method(self, a=f(b), *args, key=c[d], **kwargs):
        return self.a.b(c).d[e] + super().method(a)


	
def tabs(a, b):
	x = a + b
	if a:
		y = a[b] +	c
		z = f(a,
			b)
	return x


def continuations(a, b):
    x = a + \
        b
    x = a[b] \
        + c
    x = f(a) \
        (b)
    return a \
        [b]


def deep(a):
    return a[a[a[a[a[a[a[a[a[a[0]]]]]]]]]] + f(f(f(f(f(f(f(f(0))))))))


def noise(a, b):
    x = a + b ;
    x = a + b; y = c + d
    x = a + (  # (
        b)
    x = ((a) +  # )
         (b))
    x = a[b  # ]
          ]
    x = a  + (b) if c else (d)
    x = a  or  b
    x = not  a
    x = a  [  b  ]  [  c  ]
    x = a  (  b  )  (  c  )
    return x


def unpacking(*args, **kwargs):
    a, b, *c = args
    (x, y), z = args
    d = {**kwargs, **{'a': 1}}
    e = [*args, *kwargs]
    return a
'''

# PEP 701 f-strings (3.12 and later).
CORPUS_312 = r'''
def fstrings(a, b):
    x = f"{a["k"]}" + f"{b['k'] + a["j"]}"
    x = f"{f"{a}" + b}" + a[b]
    x = f"{a[b] + c:{d}}" + f"{a!r:{b}}{c}"
    x = f"""{
        a + b  # comment
    }""" + c
    x = f"{'\n'.join(a)}" + b
    return f"{a(b)}" + f"{a + b}"
'''

# t-strings and except without parentheses (3.14 and later).
CORPUS_314 = r'''
def tstrings(a, b):
    x = t"{a + b}" + t"{a}"
    y = f(t"{a[b]}")
    try:
        a + b
    except ValueError, TypeError:
        pass
    return x
'''

# Unpacking in comprehensions (3.15 and later).
CORPUS_315 = r'''
def comprehensions(a, b):
    x = [*i for i in a] + a[b]
    y = {**d for d in a} | b[a]
    return x, y
'''

# The newline kinds, a BOM, encoding cookies, form feeds and the other
# characters that str.splitlines() breaks lines at (but Python's
# tokenizer does not).
ODD = {
    "crlf.py": (b"def f(a, b):\r\n    x = a + b[a]\r\n    y = (a +\r\n"
                b"         b)\r\n    return f(a)(b)\r\n"),
    "cr.py": (b"def f(a, b):\r    x = a + b[a]\r    y = (a +\r"
              b"         b)\r    return f(a)(b)\r"),
    "mixed.py": (b"def f(a, b):\n    x = a + b[a]\r\n    y = (a +\r"
                 b"         b)\n    return f(a)(b)"),
    "bom.py": "\ufeffx = a + b[c]\ny = f(a)\n".encode("utf-8"),
    "latin1.py": (b"# -*- coding: latin-1 -*-\n"
                  b"x = '\xe9\xe8' + a['\xe0'] + b\n"
                  b"y = f('\xff', a)[b]\n"),
    "formfeed.py": (b"\x0cdef f(a, b):\n    x = a + b\n\x0c\n"
                    b"    y = (a +  # \x0c\n         b)\n"
                    b"    z = (a +  # \x1c\x0b\n         b['\xc2\x85'])\n"
                    b"    w = '\xe2\x80\xa8' + a[b] + (a +\n"
                    b"        b['\x1d'] - c)\n"
                    b"    return a[b]\x0c\n"),
    "trailing.py": b"def f(a, b):\n    x = a + b   \n    y = a[b]\t\n",
    "cookie2.py": (b"#!/usr/bin/env python\n"
                   b"# vim: set fileencoding=latin-1 :\n"
                   b"x = '\xe9' + a[b]\n"),
    "utf8cookie.py": b"# coding=utf8\nx = '\xc3\xa9' + a[b]\n",
    "ascii.py": b"# -*- coding: ascii -*-\nx = 'e' + a[b]\n",
}
# Shown in place of a compiled file: its positions, another file's text.
SHOWN_AS = {
    # (not UTF-8: linecache has no lines, nothing is written)
    "notutf8.py": ("crlf.py", b"def f(a, b):\n    x = a + b[a] # \xff\n"),
    # (a file shorter than the positions)
    "short.py": ("crlf.py", b"def f(a, b):\n"),
    # (a NUL in the first line: 3.14 and later have no lines)
    "nul.py": ("bom.py", b"x = a + b[c]  # \x00\ny = f(a)\n"),
    # (an encoding Python does not know; a BOM and a Latin-1 cookie)
    "unknown.py": ("utf8cookie.py", b"# coding: no-such-codec\nx = a[b]\n"),
    "bomlatin1.py": ("utf8cookie.py",
                     b"\xef\xbb\xbf# coding: latin-1\nx = a[b]\n"),
}

TARGET = r'''
import json, sys, traceback, types

def positions(code, out):
    out.update(code.co_positions())
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            positions(c, out)

def spread(ps, cap):
    if not cap or len(ps) <= cap:
        return ps
    step = len(ps) / cap
    return [ps[int(i * step)] for i in range(cap)]

def key(p):
    return tuple(-1 if x is None else x for x in p)

out = []
for src, shown, cap in json.load(sys.stdin):
    with open(src, "rb") as f:
        code = compile(f.read(), src, "exec")
    ps = set()
    positions(code, ps)
    ps = sorted((p for p in ps if p[0] is not None and p[0] > 0), key=key)
    ps += [(line, None, None, None) for line in sorted({p[0] for p in ps})]
    for line, end, col, end_col in spread(ps, cap):
        try:
            fs = traceback.FrameSummary(shown, line, "f", lookup_line=True,
                                        end_lineno=end, colno=col,
                                        end_colno=end_col)
            text = "".join(traceback.StackSummary.from_list([fs]).format())
            text = text.split("\n", 1)[1]
        except Exception:
            text = ""  # (pyunwind writes nothing where Python raises)
        out.append([line, end or 0, -1 if col is None else col,
                    -1 if end_col is None else end_col, shown, text])
json.dump(out, sys.stdout)
'''

STDLIB_PATHS = r'''
import importlib, json, sys
print(json.dumps([importlib.import_module(m).__file__ for m in sys.argv[1:]]))
'''


def literal_chars(text):
    """\\U0000XXXX in the corpora as the character itself."""
    return re.sub(r"\\U([0-9a-f]{8})", lambda m: chr(int(m.group(1), 16)),
                  text)


def write_files(directory, minor):
    """The corpus and odd files for a version: [(compiled, shown, cap)]."""
    corpus = CORPUS.replace("@@@", "'''")
    if minor >= 12:
        corpus += CORPUS_312
    if minor >= 14:
        corpus += CORPUS_314
    if minor >= 15:
        corpus += CORPUS_315
    files = dict(ODD, **{"corpus.py": literal_chars(corpus).encode("utf-8")})
    jobs = []
    for name, data in sorted(files.items()):
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(data)
        jobs.append([path, path, 0])
    for name, (compiled, data) in sorted(SHOWN_AS.items()):
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(data)
        jobs.append([os.path.join(directory, compiled), path, 0])
    return jobs


def expected(python, jobs):
    r = subprocess.run([python, "-c", TARGET], input=json.dumps(jobs),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def driven(version, records):
    """What pyu_source_lines writes for each record, for the target
    version (minor * 100 + micro)."""
    lines = "".join("%d %d %d %d %d %s\n" % (version, *rec[:5])
                    for rec in records)
    r = subprocess.run([DRIVER], input=lines.encode(), capture_output=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr.decode(errors="replace")
    out = r.stdout.decode("utf-8", errors="replace").split("\x1e\n")
    assert out[-1] == "" and len(out) == len(records) + 1
    return out[:-1]


@pytest.mark.parametrize("label,python,minor", PYTHONS,
                         ids=[p[0] for p in PYTHONS])
def test_source_lines_match_traceback(label, python, minor, tmp_path):
    if not os.path.exists(DRIVER):
        pytest.skip("source_lines_driver not built")
    jobs = write_files(str(tmp_path), minor)
    mods = json.loads(subprocess.run([python, "-c", STDLIB_PATHS, *STDLIB],
                                     capture_output=True, text=True,
                                     check=True).stdout)
    jobs += [[path, path, STDLIB_CAP] for path in mods]
    records = expected(python, jobs)
    assert len(records) > 3000
    micro = int(label.split("-")[0].rstrip("t").split(".")[2])
    got = driven(minor * 100 + micro, records)
    bad = [(rec, text) for rec, text in zip(records, got) if text != rec[5]]
    report = "".join(
        "\n%s %s:\n  python: %r\n  driver: %r" % (
            os.path.basename(rec[4]), tuple(rec[:4]), rec[5], text)
        for rec, text in bad[:8])
    assert not bad, "%d of %d positions differ:%s" % (len(bad), len(records),
                                                      report)
