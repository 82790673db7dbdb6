"""Cores as users have them: compressed by systemd-coredump (zstd) or by
hand (xz, lz4, gzip), told apart by their content whatever their name;
cut off or damaged on the way.  The stacks read from a compressed core are
the target's own record of them."""

import os
import random
import shutil
import subprocess
import tempfile

import pytest

from conftest import (Target, assert_matches_truth, dump_json, interpreters,
                      kernel_cores_land_here, pyunwind)
from test_bad_input import assert_no_crash, assert_one_line_error

PYTHONS = interpreters()
# (the compressor's command, writing the file named last)
COMPRESSORS = {
    "zstd": lambda src, dst: ["zstd", "-q", "-f", src, "-o", dst],
    "xz": lambda src, dst: ["sh", "-c", 'xz -T1 -c "$0" > "$1"', src, dst],
    "lz4": lambda src, dst: ["lz4", "-q", "-f", src, dst],
    "gzip": lambda src, dst: ["sh", "-c", 'gzip -c "$0" > "$1"', src, dst],
}


@pytest.fixture(scope="module")
def core():
    """A kernel core of the stacks target on the stripped Debian 3.15, and
    its truth."""
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    d = tempfile.mkdtemp(prefix="pyu-cores-")
    python = dict(PYTHONS)["3.15.2-debian"]
    t = Target(python, "stacks.py", d, ["--threads", "3", "--depth", "12"])
    path = t.abort()
    assert path, "the kernel wrote no core file"
    yield {"path": path, "truth": t.truth, "dir": d, "python": python}
    shutil.rmtree(d)


def compress(kind, src, dst):
    tool = COMPRESSORS[kind](src, dst)
    if not shutil.which(tool[0] if tool[0] != "sh" else kind):
        pytest.fail("%s is not installed (scripts/setup --asan installs "
                    "it)" % kind)
    subprocess.run(tool, check=True, timeout=300)
    return dst


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_compressed_core(core, kind):
    """A core compressed by the real tool reads as the plain core does:
    every thread's stack as the target recorded it, and the fatal signal;
    with the usual suffix or with none (the content tells)."""
    for name in ("core." + kind, "compressed-core"):
        path = compress(kind, core["path"], os.path.join(core["dir"], name))
        try:
            assert os.path.getsize(path) < os.path.getsize(core["path"])
            dump = dump_json("--core", path)
            assert_matches_truth(dump, core["truth"])
            assert dump["signal"]["number"] == 6
        finally:
            os.unlink(path)


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_cut_compressed_core(core, kind):
    """A compressed core cut short (a copy that stopped): one line that
    says the stream is cut off, exit 3."""
    path = compress(kind, core["path"], os.path.join(core["dir"], "cut"))
    try:
        for fraction in (0.5, 0.97):
            os.truncate(path, int(os.path.getsize(path) * fraction))
            r = pyunwind("dump", "--core", path)
            assert_one_line_error(r, 3, "stream is cut off")
            assert kind in r.stderr, r.stderr
    finally:
        os.unlink(path)


@pytest.mark.parametrize("kind", sorted(COMPRESSORS))
def test_damaged_compressed_core(core, kind):
    """Bytes changed inside a compressed core: never a crash; a stream
    whose checksum catches it is refused in one line."""
    src = compress(kind, core["path"], os.path.join(core["dir"], "good"))
    with open(src, "rb") as f:
        good = f.read()
    os.unlink(src)
    rng = random.Random(7)
    path = os.path.join(core["dir"], "damaged")
    refused = 0
    for _ in range(6):
        data = bytearray(good)
        for _ in range(4):
            data[rng.randrange(64, len(data) - 64)] ^= 1 + rng.randrange(255)
        with open(path, "wb") as f:
            f.write(data)
        r = pyunwind("dump", "--core", path, "--no-source", timeout=120)
        assert_no_crash(r)
        if r.returncode == 3:
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr
            refused += 1
    os.unlink(path)
    # (all four formats check their data: zstd, xz and lz4 as the tools
    # write them carry a checksum, gzip a CRC)
    assert refused >= 4, refused


def test_compressed_core_without_room(core, tmp_path):
    """No place for the decompressed copy: one line naming the directory
    and TMPDIR."""
    path = compress("zstd", core["path"], str(tmp_path / "core.zst"))
    env = dict(os.environ, TMPDIR=str(tmp_path / "missing"))
    r = pyunwind("dump", "--core", path, env=env)
    assert_one_line_error(r, 3, str(tmp_path / "missing"), "TMPDIR")
