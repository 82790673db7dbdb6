"""The Debian package (scripts/deb), unpacked into a clean root: everything
runs from the installed files only: the CLI, py-dump in gdb and in lldb
(the plugins as installed), a program built against the library with
pkg-config, and the man pages through man(1)."""

import json
import os
import subprocess

import pytest

from conftest import (ROOT, TIMEOUT, Target, assert_matches_truth,
                      interpreters, py315)

# (the package is built from the sources, release: an ASan run has nothing
# of its own to test here, and two runs at once would share build-deb/)
pytestmark = pytest.mark.release


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    r = subprocess.run([os.path.join(ROOT, "scripts", "deb")],
                       capture_output=True, text=True, timeout=1800)
    assert r.returncode == 0, r.stderr
    deb = r.stdout.split()[-1]
    root = str(tmp_path_factory.mktemp("pkg") / "root")
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    return root


@pytest.fixture(scope="module")
def target(tmp_path_factory):
    python = py315(interpreters())
    t = Target(python, "stacks.py", str(tmp_path_factory.mktemp("t")),
               ["--threads", "2", "--depth", "5"])
    yield t
    t.close()


def test_installed_cli(root, target):
    exe = os.path.join(root, "usr", "bin", "pyunwind")
    r = subprocess.run([exe, "dump", "--json", str(target.pid)],
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert_matches_truth(json.loads(r.stdout), target.truth)
    # (the package names what it needs: nothing else here is used)
    libs = subprocess.run(["ldd", exe], capture_output=True,
                          text=True).stdout
    assert "/work/" not in libs and "build" not in libs, libs


@pytest.mark.debugger
def test_installed_gdb_plugin(root, target, tmp_path):
    """The gdbinit.d loader names the installed script; sourced from the
    root, the plugin reads the target."""
    with open(os.path.join(root, "etc", "gdb", "gdbinit.d",
                           "pyunwind.py")) as f:
        assert "source /usr/share/pyunwind/pyunwind-gdb.py" in f.read()
    out = tmp_path / "gdb.json"
    r = subprocess.run(
        ["gdb", "-nx", "-batch", "-ex",
         "source %s/usr/share/pyunwind/pyunwind-gdb.py" % root,
         "-p", str(target.pid), "-ex", "py-dump --json -o %s" % out,
         "-ex", "detach"], capture_output=True, text=True, timeout=TIMEOUT)
    assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    assert_matches_truth(json.loads(out.read_text()), target.truth)


@pytest.mark.debugger
def test_installed_lldb_plugin(root, target, tmp_path):
    from debuggers import LLDB
    out = tmp_path / "lldb.json"
    r = subprocess.run(
        [LLDB, "-b", "-o", "plugin load %s/usr/lib/pyunwind/"
         "libpyunwind-lldb.so" % root, "-p", str(target.pid),
         "-o", "py-dump --json -o %s" % out, "-o", "process detach"],
        capture_output=True, text=True, timeout=TIMEOUT,
        stdin=subprocess.DEVNULL)
    assert out.exists(), r.stdout[-2000:] + r.stderr[-2000:]
    assert_matches_truth(json.loads(out.read_text()), target.truth)


def test_library_through_pkg_config(root, target, tmp_path):
    """A C program built with the installed header and library, found by
    pkg-config in the root, dumps the target."""
    src = tmp_path / "count.c"
    src.write_text(
        "#include <stdio.h>\n#include <stdlib.h>\n"
        "#include <pyunwind/pyunwind.h>\n"
        "int main(int argc, char **argv) {\n"
        "    pyu_session *s = pyu_session_new();\n"
        "    pyu_dump *d;\n"
        "    if (pyu_open_pid(s, atoi(argv[1]), 0) < 0 ||\n"
        "        pyu_dump_take(s, 0, &d) < 0) {\n"
        "        fprintf(stderr, \"%s\\n\", pyu_errmsg(s));\n"
        "        return 1;\n"
        "    }\n"
        "    printf(\"%zu %s\\n\", d->nthreads, d->process.python);\n"
        "    pyu_dump_free(d);\n    pyu_session_free(s);\n    return 0;\n}\n")
    libdir = os.path.join(root, "usr", "lib", "x86_64-linux-gnu")
    env = dict(os.environ, PKG_CONFIG_SYSROOT_DIR=root,
               PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "pyunwind"],
                           capture_output=True, text=True, env=env,
                           check=True).stdout.split()
    exe = str(tmp_path / "count")
    subprocess.run(["cc", str(src), "-o", exe, *flags], check=True)
    r = subprocess.run([exe, str(target.pid)], capture_output=True,
                       text=True, env=dict(os.environ,
                                           LD_LIBRARY_PATH=libdir))
    assert r.returncode == 0, r.stderr
    n, version = r.stdout.split()
    assert int(n) == len(target.truth["threads"])
    assert version == target.truth["version"]


def test_man_pages(root):
    for page in ("man1/pyunwind-dump.1", "man1/pyunwind-sample.1",
                 "man1/pyunwind-tasks.1", "man1/pyunwind-serve.1",
                 "man5/pyunwind-formats.5",
                 "man7/pyunwind-gdb.7"):
        r = subprocess.run(["man", "-l", os.path.join(
            root, "usr", "share", "man", page)], capture_output=True,
            text=True, env=dict(os.environ, MANWIDTH="100"))
        assert r.returncode == 0, r.stderr
        text = r.stdout
        assert "NAME" in text and "pyunwind" in text, text[:500]
        assert "\\f" not in text and "```" not in text, text[:2000]
    dump = subprocess.run(["man", "-l", os.path.join(
        root, "usr", "share", "man", "man1", "pyunwind-dump.1")],
        capture_output=True, text=True).stdout
    assert "--sysroot DIR" in dump and "SYNOPSIS" in dump
