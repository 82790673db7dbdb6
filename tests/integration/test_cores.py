"""Cores as users have them: compressed by systemd-coredump (zstd) or by
hand (xz, lz4, gzip), told apart by their content whatever their name;
cut off or damaged on the way.  The stacks read from a compressed core are
the target's own record of them."""

import json
import os
import random
import re
import shutil
import signal
import subprocess
import tempfile

import pytest

from conftest import (ROOT, Target, allow_core, assert_matches_truth,
                      dump_json, interpreters, kernel_cores_land_here,
                      labelled, matrix, pyunwind, wait_threads)
from test_bad_input import assert_no_crash, assert_one_line_error

# (the dumps equal the targets' own records on every build of a
# version, conftest.OTHER_BUILDS)
pytestmark = pytest.mark.builds
PYTHONS = interpreters()
# (the compressor's command, writing the file named last)
COMPRESSORS = {
    "zstd": lambda src, dst: ["zstd", "-q", "-f", src, "-o", dst],
    "xz": lambda src, dst: ["sh", "-c", 'xz -T1 -c "$0" > "$1"', src, dst],
    "lz4": lambda src, dst: ["lz4", "-q", "-f", src, dst],
    "gzip": lambda src, dst: ["sh", "-c", 'gzip -c "$0" > "$1"', src, dst],
}


def kernel_core(label, *args):
    """A kernel core of the stacks target on interpreter `label` (a
    generator for a fixture: {path, truth, dir, python}, removed after)."""
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    d = tempfile.mkdtemp(prefix="pyu-cores-")
    python = labelled(PYTHONS, label)
    t = Target(python, "stacks.py", d, list(args))
    path = t.abort()
    assert path, "the kernel wrote no core file"
    yield {"path": path, "truth": t.truth, "dir": d, "python": python}
    shutil.rmtree(d)


@pytest.fixture(scope="module")
def core():
    """A kernel core of the stacks target on the stripped Debian 3.15, and
    its truth."""
    yield from kernel_core("3.15.2-debian", "--threads", "3", "--depth",
                           "12")


def compress(kind, src, dst):
    """dst: a copy of src compressed by the tool `kind`, which compresses
    each source once (kept beside it, removed with it)."""
    once = "%s.compressed.%s" % (src, kind)
    if not os.path.exists(once):
        tool = COMPRESSORS[kind](src, once + ".part")
        if not shutil.which(tool[0] if tool[0] != "sh" else kind):
            pytest.fail("%s is not installed (scripts/setup --asan "
                        "installs it)" % kind)
        subprocess.run(tool, check=True, timeout=300)
        os.rename(once + ".part", once)
    shutil.copyfile(once, dst)
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


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True,
                         text=True, check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


@pytest.fixture(scope="module")
def pie_core():
    """A kernel core of the stacks target on a CPython built from source
    (a PIE whose first page, which the kernel keeps in every core, holds
    its build-id note): the free-threaded 3.14, or 3.13's when PYU_ONLY
    left that."""
    have = dict(PYTHONS)
    label = next((lab for lab in (matrix("3.14t"), matrix("3.13t"))
                  if lab in have), None)
    if not label:
        pytest.skip("no free-threaded 3.14 or 3.13 among the selected "
                    "interpreters (PYU_ONLY)")
    for core in kernel_core(label, "--threads", "2", "--depth", "6"):
        core["label"] = label
        yield core


def test_exe_of_another_build(pie_core):
    """--exe naming another build of the interpreter (another one of the
    same minor version: Debian's, or pyenv's with a shared libpython):
    refused in one line naming both build-ids, as readelf gives them,
    never a wrong stack; the right --exe reads."""
    version = re.match(r"3\.\d+\.", pie_core["label"]).group(0)  # "3.14."
    others = [path for lab, path in PYTHONS if lab != pie_core["label"]
              and lab.startswith(version)]
    if not others:
        pytest.skip("no other build of %s among the selected interpreters "
                    "(PYU_ONLY)" % version)
    other = others[0]
    r = pyunwind("dump", "--core", pie_core["path"], "--exe", other)
    assert_one_line_error(r, 3, "is not the file the process ran",
                          "its build-id is %s" % build_id(other),
                          "the core's is %s" % build_id(pie_core["python"]),
                          "--exe")
    dump = dump_json("--core", pie_core["path"], "--exe",
                     pie_core["python"])
    assert_matches_truth(dump, pie_core["truth"])


@pytest.fixture(scope="module")
def container(tmp_path_factory):
    """A target in a container-style root: the Debian 3.15 interpreter tree
    and the test targets copied to a directory R and run chrooted there
    through the tree's own loader, so that every file it maps is named by
    its path inside R (/usr/bin/python3.15, /usr/lib/..., /app/stacks.py),
    which on this machine is another file or none."""
    root = str(tmp_path_factory.mktemp("container") / "R")
    tree = os.path.dirname(os.path.dirname(os.path.dirname(
        labelled(PYTHONS, "3.15.2-debian"))))
    if subprocess.run(["cp", "-al", tree, root]).returncode != 0:
        subprocess.run(["cp", "-a", tree, root], check=True)
    app = os.path.join(root, "app")
    shutil.copytree(os.path.join(ROOT, "tests", "targets"), app)
    proc = subprocess.Popen(
        ["chroot", root, "/usr/lib64/ld-linux-x86-64.so.2", "--library-path",
         "/usr/lib/x86_64-linux-gnu", "/usr/bin/python3.15",
         "/app/stacks.py", "/app/truth.json", "--threads", "2", "--depth",
         "5"], env=dict(os.environ, PYTHONHOME="/usr"),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=allow_core)
    try:
        assert proc.stdout.readline().strip() == "ready", \
            proc.stderr.read()
        with open(os.path.join(app, "truth.json")) as f:
            truth = json.load(f)
        # (the recorder threads end: waited for, as Target does)
        wait_threads(proc.pid, len({t["native_id"] for t in
                                    truth["threads"].values()}))
        yield {"root": root, "proc": proc, "truth": truth}
    finally:
        proc.kill()
        proc.wait()


def test_container_live_and_core(container):
    """Live: the stacks are the target's own, and the source lines come
    from the container's files (through /proc/PID/root).  Its kernel core:
    without --sysroot the loader on this machine is not the one the
    process ran, which the build-ids tell (one line); with --sysroot R the
    stacks are the target's and the source lines the container's."""
    root, proc, truth = container["root"], container["proc"], \
        container["truth"]
    with open(os.path.join(root, "app", "stacks.py")) as f:
        lines = f.read().splitlines()
    dump = dump_json(str(proc.pid))
    assert_matches_truth(dump, truth)
    text = pyunwind("dump", str(proc.pid)).stdout
    main = dump["threads"][0]["frames"][-1]  # <module>
    assert '  File "/app/stacks.py", line %d, in <module>\n    %s\n' % (
        main["line"], lines[main["line"] - 1].strip()) in text, text[:800]
    if not kernel_cores_land_here():
        pytest.skip("core_pattern sends cores elsewhere")
    os.kill(proc.pid, signal.SIGABRT)
    proc.wait()
    core = os.path.join(root, "core")
    assert os.path.exists(core), os.listdir(root)
    r = pyunwind("dump", "--core", core)
    assert_one_line_error(r, 3, "is not the file the process ran",
                          "--sysroot")
    dump = dump_json("--core", core, "--sysroot", root)
    assert_matches_truth(dump, truth)
    text = pyunwind("dump", "--core", core, "--sysroot", root).stdout
    assert "    %s\n" % lines[main["line"] - 1].strip() in text, text[:800]
