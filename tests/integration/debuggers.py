"""Driving the real gdb and lldb with pyunwind's plugins loaded: one session
per call, a list of commands in, each command's output back."""

import json
import os
import shutil
import socket
import subprocess
import time

from conftest import DEADLINE, PYUNWIND, ROOT, TIMEOUT

PLUGINS = os.environ.get("PYUNWIND_PLUGINS", os.path.join(ROOT, "build"))
GDB_SCRIPT = os.path.join(PLUGINS, "pyunwind-gdb.py")
LLDB_PLUGIN = os.path.join(PLUGINS, "libpyunwind-lldb.so")
LLDB = shutil.which("lldb-19") or shutil.which("lldb")
LLDB_SERVER = next((p for p in ("/usr/lib/llvm-19/bin/lldb-server",
                                shutil.which("lldb-server") or "")
                    if p and os.path.exists(p)), None)
MARK = "@@pyunwind-test-mark "


class Transcript:
    """Output of a debugger session, split by command."""

    def __init__(self, proc, commands, outputs):
        self.proc = proc
        self.text = proc.stdout
        self.commands = commands
        self.outputs = outputs

    def __getitem__(self, command):
        """Output of the (first) command equal to / starting with command."""
        for c, out in zip(self.commands, self.outputs):
            if c == command:
                return out
        for c, out in zip(self.commands, self.outputs):
            if c.startswith(command):
                return out
        raise KeyError("%r not run; commands: %r" % (command, self.commands))


class Gdb:
    name = "gdb"
    error_prefix = "py-dump: "

    def run(self, commands, args=(), timeout=TIMEOUT, setup=(), env=None,
            plugin=True):
        """gdb -batch: `args` are gdb's arguments (-p PID, PYTHON CORE,
        --args ...); each command's output is framed by echoed marks.
        plugin: pyunwind's plugin sourced first (else gdb alone)."""
        argv = ["gdb", "-nx", "-batch", "-ex", "set pagination off",
                "-ex", "set confirm off", "-ex", "set width 0"]
        if plugin:
            argv += ["-ex", "source " + GDB_SCRIPT]
        for c in setup:
            argv += ["-ex", c]
        for i, c in enumerate(commands):
            argv += ["-ex", "echo \\n%s%d\\n" % (MARK, i), "-ex", c]
        argv += ["-ex", "echo \\n%s%d\\n" % (MARK, len(commands))]
        argv += list(args)
        p = subprocess.run(argv, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           text=True, errors="replace", timeout=timeout,
                           env=env)
        outputs = []
        for i in range(len(commands)):
            start = p.stdout.find("%s%d\n" % (MARK, i))
            end = p.stdout.find("\n%s%d\n" % (MARK, i + 1))
            outputs.append(p.stdout[start + len(MARK) + len(str(i)) + 1:end]
                           if start >= 0 and end >= 0 else None)
        return Transcript(p, list(commands), outputs)

    def shell(self, command):
        return "shell " + command

    def selection(self):
        return ("python print('selected', gdb.selected_thread().num, "
                "hex(gdb.selected_frame().pc()))")

    def attach(self, pid):
        return [], ["-p", str(pid)], ["detach"]

    def core(self, python, core):
        return [], [python, core], []

    def remote(self, port):
        return ["target remote 127.0.0.1:%d" % port], [], ["detach"]

    def launch(self, python, argv):
        return (["set breakpoint pending on", "break getppid", "run"],
                ["--args", python, *argv], ["kill"])


class Lldb:
    name = "lldb"
    error_prefix = "error: py-dump: "

    def run(self, commands, args=(), timeout=TIMEOUT, setup=(), env=None):
        """lldb: the setup commands (loading, attaching, launching) as -o
        commands, which lldb runs synchronously but stops at the first
        failing one; then the commands from a pipe, which lldb reads on
        whatever fails.  It echoes each command after its prompt."""
        first = ["settings set auto-confirm true",
                 "plugin load " + LLDB_PLUGIN, *setup]
        argv = [LLDB, "-x", "--no-use-colors", *args]
        for c in first:
            argv += ["-o", c]
        rest = [*commands, "quit"]
        p = subprocess.run(argv, input="\n".join(rest) + "\n",
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, errors="replace", timeout=timeout,
                           env=env)
        script = first + rest
        starts, pos = [], 0
        for c in script:
            pos = p.stdout.find("(lldb) " + c + "\n", pos)
            starts.append(pos)
            if pos < 0:
                break
            pos += len(c) + 8
        starts += [-1] * (len(script) + 1 - len(starts))
        texts = []
        for i in range(len(first), len(script) - 1):
            c, start, end = script[i], starts[i], starts[i + 1]
            texts.append(p.stdout[start + len(c) + 8:end]
                         if start >= 0 and end >= 0 else None)
        return Transcript(p, list(commands), texts)

    def shell(self, command):
        return "platform shell sh -c '%s'" % command

    def selection(self):
        return "frame info"

    def attach(self, pid):
        return ["process attach --pid %d" % pid], [], ["process detach"]

    def core(self, python, core):
        return ["target create %s --core %s" % (python, core)], [], []

    def remote(self, port):
        return ["gdb-remote 127.0.0.1:%d" % port], [], ["process detach"]

    def launch(self, python, argv):
        return (["target create " + python, "breakpoint set -n getppid",
                 "process launch -i /dev/null -- " + " ".join(argv)], [], ["process kill"])


DEBUGGERS = [Gdb(), Lldb()]


def require_plugin(dbg):
    """dbg, once its plugin is known to be built (else the test fails:
    scripts/setup builds both)."""
    import pytest
    built = os.path.exists(GDB_SCRIPT) if dbg.name == "gdb" else \
        bool(LLDB and os.path.exists(LLDB_PLUGIN))
    if not built:
        pytest.fail("the %s plugin is not built (scripts/setup builds it)"
                    % dbg.name)
    return dbg


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """gdbserver or lldb-server attached to pid, on a loopback port."""

    def __init__(self, debugger, pid):
        self.port = free_port()
        if debugger.name == "gdb":
            argv = ["gdbserver", "--once", "127.0.0.1:%d" % self.port,
                    "--attach", str(pid)]
        else:
            argv = [LLDB_SERVER, "gdbserver", "127.0.0.1:%d" % self.port,
                    "--attach", str(pid)]
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        # it listens once it has attached; it takes a single connection, so
        # look in /proc/net/tcp rather than connecting (the test fails at
        # its first command if it never does)
        deadline = time.time() + DEADLINE
        while time.time() < deadline and not listening(self.port):
            time.sleep(0.1)

    def close(self):
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class ForeignServer:
    """A target program and a gdbserver attached to it, both in a pid
    namespace of their own (unshare, as root): as seen from gdb the
    process is on another machine, its pid means nothing here and no
    signal from here can reach it.  leader: the program leads its
    process group (started with setsid), as gdbserver's interrupt
    needs."""

    def __init__(self, python, script, workdir, leader):
        self.port = free_port()
        truth = os.path.join(workdir, "truth.json")
        out = os.path.join(workdir, "target.out")
        script = (
            '%s%s %s %s > %s 2>&1 & pid=$!; i=0; '
            'until grep -q ready %s; do i=$((i+1)); '
            '[ $i -gt 4800 ] && exit 1; sleep 0.05; done; '
            'exec gdbserver --once 127.0.0.1:%d --attach $pid'
            % ("setsid " if leader else "", python,
               os.path.join(ROOT, "tests", "targets", script), truth, out,
               out, self.port))
        self.proc = subprocess.Popen(
            ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
             "sh", "-c",
             script], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        deadline = time.time() + DEADLINE
        while (time.time() < deadline and self.proc.poll() is None and
               not listening(self.port)):
            time.sleep(0.1)
        if not listening(self.port):
            err = self.proc.stderr.read() if self.proc.poll() is not None \
                else ""
            self.close()
            raise RuntimeError("no gdbserver in a pid namespace (unshare "
                               "needs root): %s" % err.strip())
        with open(truth, encoding="utf-8") as f:
            self.truth = json.load(f)

    def close(self):
        # gdbserver is the namespace's first process: when it ends, the
        # kernel ends the target too
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def listening(port):
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if int(local.split(":")[1], 16) == port and state == "0A":
                return True
    return False


def cli_command(args, out):
    """The shell command that runs pyunwind's CLI into a file."""
    return "%s dump %s > %s" % (PYUNWIND, args, out)


def process_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]
