"""How far apart two sampled profiles are: the distances bench/accuracy-run
prints and tests/integration/test_accuracy.py bounds.

Profiles are collapsed files (pyunwind's `--format collapsed`, CPython's
`profiling.sampling --collapsed`): `tid:N;FILE:FUNC:LINE;... COUNT`.  A
function is FILE:FUNC (the line dropped); synthetic frames (<unknown>,
<GC>, <native>) are themselves.

    python3 accuracy.py REFERENCE OTHER...    prints the distances

- self distribution: the share of samples in which each function was the
  innermost frame;
- total distribution: each function's samples anywhere on the stack
  (counted once per sample), normalised to sum to 1;
- distance: the total-variation distance between two distributions,
  half the sum of the absolute differences (0: identical, 1: disjoint).
"""
import collections
import sys


def function_of(frame):
    parts = frame.rsplit(":", 1)
    if len(parts) == 2 and parts[1].isdigit():
        return parts[0]
    return frame


def read(path):
    """(self counts, total counts, samples) of a collapsed file."""
    own = collections.Counter()
    total = collections.Counter()
    n = 0
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            stack, _, count = line.rpartition(" ")
            try:
                c = int(count)
            except ValueError:
                continue
            frames = [x for x in stack.split(";") if x]
            if frames and frames[0].startswith(("tid:", "pid:")):
                frames = frames[1:]
            while frames and frames[0].startswith("tid:"):
                frames = frames[1:]
            if not frames:
                continue
            funcs = [function_of(x) for x in frames]
            own[funcs[-1]] += c
            for fn in set(funcs):
                total[fn] += c
            n += c
    return own, total, n


def normalised(counter):
    s = sum(counter.values())
    return {k: v / s for k, v in counter.items()} if s else {}


def tvd(a, b):
    keys = set(a) | set(b)
    return 0.5 * sum(abs(a.get(k, 0.0) - b.get(k, 0.0)) for k in keys)


def distances(ref_path, path):
    """(self distance, total distance, samples of path)."""
    rs, rt, _ = read(ref_path)
    s, t, n = read(path)
    return (tvd(normalised(rs), normalised(s)),
            tvd(normalised(rt), normalised(t)), n)


def shares(path):
    """{function: (self share, total share)} over the samples of path."""
    own, total, n = read(path)
    return {k: (own.get(k, 0) / n, total.get(k, 0) / n)
            for k in set(own) | set(total)} if n else {}


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: accuracy.py REFERENCE OTHER...")
    for p in argv[2:]:
        ds, dt, n = distances(argv[1], p)
        print("%s: self %.4f total %.4f (%d samples)" % (p, ds, dt, n))


if __name__ == "__main__":
    main(sys.argv)
