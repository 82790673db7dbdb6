"""pyunwind inside gdb: the `py-dump`, `py-tasks` and `py-sample`
commands and a scripting API.

    (gdb) source /path/to/pyunwind-gdb.py      # or `import pyunwind_gdb`
    (gdb) py-dump [--json] [-o FILE] [--thread TID] [--no-source] [--async]
                  [--locals] [--native | --native-last] [--subprocesses]
                  [--verbose]
    (gdb) py-tasks [--tree] [--json] [-o FILE] [--subprocesses] [--verbose]
    (gdb) py-sample [-d SECONDS] [-r RATE] [--mode MODE] [--format FORMAT]
                    [-o FILE] ...   (py-sample --help)

    python
    import pyunwind_gdb
    d = pyunwind_gdb.dump()          # what `py-dump --json` prints, as objects
    for t in d["threads"]: print(t["native_thread_id"], t["frames"][0])
    end

Everything that reads the target is pyunwind's C core (the _pyunwind
extension module); this file only decides where the target's memory comes
from:

- a live local process (gdb's native target): read directly by pid, as
  `pyunwind dump PID` does;
- a core file: pyunwind's own core reader, as `pyunwind dump --core` does;
  if that fails (a core pyunwind cannot open), gdb's memory of the core;
- anything else, such as `target remote` to a gdbserver: gdb's memory
  (Inferior.read_memory) and mappings (`info proc mappings`), because the
  process may run on another machine.

PYUNWIND_MEMORY=debugger in gdb's environment (or dump(through_gdb=True))
asks for gdb's memory always.
"""

import json
import os
import re
import socket
import time

import gdb

from . import _pyunwind
from . import pyunwind_shared

__all__ = ["dump", "tasks", "sample", "Profile", "Error", "memory_source",
           "formats"]


class Error(gdb.GdbError):
    """A pyunwind failure, with a one-line message; .code is the exit code
    `pyunwind dump` would give (docs/exit-codes.md)."""

    def __init__(self, message, code=1):
        super().__init__(message)
        self.code = code


_last_source = None


def formats():
    """The profile formats, {name: {"summary", "binary",
    "keeps_instructions"}} in the order py-sample --help lists them: what
    py-sample --format and Profile.write() take."""
    return pyunwind_shared.formats(_pyunwind.formats())


def memory_source():
    """How the last dump read the target, in a few words (or None)."""
    return _last_source


def _execute(command):
    try:
        return gdb.execute(command, to_string=True)
    except gdb.error:
        return ""


def _core_file():
    """The core file gdb has loaded, from `info target`."""
    m = re.search(r"Local core dump file:\s*`(.*)', file type",
                  _execute("info target"))
    return m.group(1) if m else None


def _runtime_hint():
    """The address of _PyRuntime as gdb knows it (0 when it does not): the
    .PyRuntime section of a loaded object (present in stripped builds),
    else the _PyRuntime symbol."""
    for line in _execute("info files").splitlines():
        m = re.match(r"\s*(0x[0-9a-f]+) - 0x[0-9a-f]+ is \.PyRuntime\b", line)
        if m:
            return int(m.group(1), 16)
    try:
        return int(gdb.parse_and_eval("(unsigned long)&_PyRuntime"))
    except (gdb.error, RuntimeError):
        return 0


_PERMS = re.compile(r"^[r-][w-][x-][ps]$")


def _mappings():
    """The target's mappings from `info proc mappings` (works for live,
    core and gdbserver targets), as (start, end, offset, prot, path)."""
    maps = []
    for line in _execute("info proc mappings").splitlines():
        f = line.split(None, 5)
        if len(f) < 4 or not f[0].startswith("0x"):
            continue
        try:
            start, end, offset = int(f[0], 16), int(f[1], 16), int(f[3], 16)
        except ValueError:
            continue
        prot, rest = 1 | 2, f[4:]  # no permissions column: assume rw
        if rest and _PERMS.match(rest[0]):
            p = rest[0]
            prot = (1 if p[0] == "r" else 0) | (2 if p[1] == "w" else 0) | \
                   (4 if p[2] == "x" else 0)
            rest = rest[1:]
        path = " ".join(rest).strip() or None
        if path and path.startswith("["):  # [heap], [stack], [vdso]
            path = None
        maps.append((start, end, offset, prot, path))
    return maps


def _fatal_signal(inferior):
    """(signo, native thread id) of a core's fatal signal, or None."""
    try:
        signo = int(gdb.parse_and_eval("$_siginfo.si_signo"))
    except (gdb.error, RuntimeError):
        return None
    for t in inferior.threads():
        if t.num == 1:
            return (signo, t.ptid[1])
    return None


_SYMBOL = re.compile(r"^(.+?)(?: \+ (\d+))? in section \S+(?: of (.+))?$")


def _symbol(pc):
    """gdb's (name, offset) for pc from its minimal symbols (also on
    stripped binaries: .dynsym), or (None, 0)."""
    try:
        text = gdb.execute("info symbol 0x%x" % pc, to_string=True).strip()
    except gdb.error:
        return None, 0
    m = _SYMBOL.match(text.splitlines()[0]) if text else None
    if not m:
        return None, 0
    return m.group(1), int(m.group(2) or 0)


def _module(pc):
    name = gdb.solib_name(pc)
    if name:
        return name
    objfile = gdb.current_progspace().filename
    return objfile or None


def _native_frames(tid):
    """The native stack of thread tid (the kernel's id) as gdb's unwinder
    finds it: [(pc, sp, name, offset, module)], innermost first, physical
    frames only (an inlined call is part of its frame); or why not, as
    one line.  gdb's selected thread and frame are left as they were."""
    inf = gdb.selected_inferior()
    thread = next((t for t in inf.threads() if t.ptid[1] == tid), None)
    if thread is None:
        return "gdb knows no thread with LWP %d" % tid
    if thread.is_running():
        return "gdb's thread %d is running (stop it first)" % thread.num
    try:
        was_thread = gdb.selected_thread()
        was_frame = gdb.selected_frame() if was_thread else None
    except gdb.error:
        was_thread, was_frame = None, None
    frames = []
    # the whole stack, as the CLI shows it: past main() and the entry point
    # (put back as they were afterwards)
    settings = {}
    for name in ("backtrace past-main", "backtrace past-entry"):
        try:
            settings[name] = gdb.parameter(name)
            if not settings[name]:
                gdb.execute("set %s on" % name, to_string=True)
        except gdb.error:
            pass
    try:
        thread.switch()
        f = gdb.newest_frame()
        while f is not None and len(frames) < 1024:
            if f.type() != gdb.INLINE_FRAME:
                pc = f.pc()
                sp = int(f.read_register("rsp"))
                # a caller's pc is its return address: name the call
                caller = f.type() == gdb.NORMAL_FRAME and f.level() > 0 and \
                    f.newer() is not None and \
                    f.newer().type() != gdb.SIGTRAMP_FRAME
                name, off = _symbol(pc - 1 if caller and pc else pc)
                frames.append((pc, sp & 0xffffffffffffffff, name,
                               off + (1 if caller and name else 0),
                               _module(pc)))
            try:
                f = f.older()
            except gdb.error:
                break
    except gdb.error as e:
        if not frames:
            return "gdb's unwinder: %s" % e
    finally:
        for name, value in settings.items():
            if not value:
                try:
                    gdb.execute("set %s off" % name, to_string=True)
                except gdb.error:
                    pass
        try:
            if was_thread is not None and was_thread.is_valid():
                was_thread.switch()
                if was_frame is not None and was_frame.is_valid():
                    was_frame.select()
        except gdb.error:
            pass
    return frames


def _source_time(where, pid, core):
    """(seconds, core) after which a source file may differ from what the
    target runs, as pyunwind's own sources say it (a local process's
    start, a core file's time); None when unknown (a remote target)."""
    try:
        if where == "core" and core:
            return (int(os.stat(core).st_mtime), True)
        if where == "local":
            with open("/proc/%d/stat" % pid) as f:
                ticks = int(f.read().rsplit(")", 1)[1].split()[19])
            start = (time.time() - time.clock_gettime(time.CLOCK_BOOTTIME) +
                     ticks / os.sysconf("SC_CLK_TCK"))
            return (int(start), False)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _open(through_gdb=False):
    """A session for the selected inferior: (session, retry_torn, source).
    through_gdb: read gdb's memory even when pyunwind could read the
    process or core itself.  How the target is read is decided by the
    routine both debugger plugins share (frontend/target.c)."""
    inf = gdb.selected_inferior()
    conn = inf.connection
    kind = conn.type if conn is not None else None
    if kind is None or inf.pid <= 0:
        raise Error("no process: attach to a Python process (attach PID), "
                    "run one, or load a core file (gdb PYTHON CORE)", 3)
    forced = through_gdb or os.environ.get("PYUNWIND_MEMORY") == "debugger"
    where = {"native": "local", "core": "core"}.get(kind, "other")
    core = exe = sysroot = None
    if where == "core":
        core = _core_file()
        sysroot = gdb.parameter("sysroot") or ""
        if sysroot.startswith("target:"):
            sysroot = sysroot[len("target:"):]
        sysroot = sysroot or None
        exe = gdb.current_progspace().filename

    def memory(with_signal):
        return (inf.read_memory, _runtime_hint(), _mappings(),
                _fatal_signal(inf) if with_signal else None,
                _source_time(where, inf.pid, core))

    s = _pyunwind.Session()
    retry, source = s.open_target(where, kind, inf.pid, core, exe, sysroot,
                                  forced, memory)
    s.set_native(_native_frames)  # py-dump --native: gdb's own unwinder
    return s, retry, source


def _session(through_gdb, use):
    """Opens a session, remembers how it reads the target, runs
    use(session, retry_torn, source), closes the session; pyunwind's
    errors become Error."""
    global _last_source
    try:
        session, retry, source = _open(through_gdb)
        try:
            _last_source = source
            return use(session, retry, source)
        finally:
            session.close()
    except _pyunwind.Error as e:
        raise Error(str(e), getattr(e, "code", 1)) from None


def _run(command, argv, through_gdb=False):
    """Runs py-dump ("dump") or py-tasks ("tasks") with argv: (output bytes,
    diagnostics bytes)."""
    try:
        opts = _pyunwind.parse(command, argv)
    except _pyunwind.Error as e:
        raise Error(str(e), getattr(e, "code", 1)) from None
    if opts["help"]:
        return _pyunwind.help(command).encode(), b""
    code, out, diag, msg = _session(
        through_gdb, lambda s, retry, source: s.run(command, argv, retry,
                                                    source))
    if code == 6:  # py-tasks --tree: the cycle is printed, then the error
        gdb.write(out.decode("utf-8", "backslashreplace"))
    if code not in (0, 5):
        raise Error(msg, code)
    if code == 5:  # some stacks are incomplete: say how many and why
        diag += ("pyunwind: warning: %s\n" % msg).encode()
    return out, diag


def dump(thread=None, through_gdb=False, async_stacks=False, locals=False):
    """The dump of the selected inferior as Python objects: what
    `py-dump --json` prints (docs/json.md), built directly from pyunwind's
    walk of the target.

    thread: a native thread id or Python ident, to get that one thread.
    through_gdb: read the target's memory through gdb (as for remote
    targets) even when pyunwind could read the process or core file itself.
    async_stacks: as py-dump --async (CPython 3.14+).
    locals: as py-dump --locals: each frame also has "locals" (its
    arguments and variables, each a dict of name, kind, type, value (a
    bounded repr) and address) and "locals_error".
    Raises Error (a gdb.GdbError) when the target cannot be read."""
    only = int(thread) if thread is not None else 0
    if thread is not None and only <= 0:
        raise Error("'%s' is not a thread id (give the native id shown as "
                    "LWP, or the Python ident)" % thread, 2)
    return _session(through_gdb, lambda s, retry, source: s.dump(
        only, bool(async_stacks), retry, bool(locals)))


def tasks(through_gdb=False):
    """The asyncio tasks of the selected inferior as Python objects: what
    `py-tasks --json` prints (docs/json.md), built directly.  Raises
    Error."""
    return _session(through_gdb, lambda s, retry, source: s.tasks(retry))


# ------------------------------------------------------------- sampling


class Profile:
    """A profile: stacks with sample counts per thread, from
    pyunwind_gdb.sample() or fed one sample at a time with add_sample()
    while the inferior is stopped (say, from a gdb.Breakpoint's stop()).

        p = pyunwind_gdb.Profile()
        class Counter(gdb.Breakpoint):
            def stop(self):
                p.add_sample()      # the thread that hit it
                return False        # and go on
        Counter("write")
        gdb.execute("continue")
        p.write("writes.txt")       # collapsed stacks: who calls write()
    """

    def __init__(self):
        self._p = _pyunwind.Profile()
        self._session = None  # (session, (inferior num, pid))
        self.diagnostics = ""  # the summary line(s) of a sampling window
        self.ended = None      # why a window ended early, or None

    def add_sample(self, thread=None):
        """Adds one sample of the stopped inferior: the stack of `thread`
        (a native thread id; default: gdb's selected thread; 0: every
        thread).  Returns the number of stacks recorded."""
        inf = gdb.selected_inferior()
        if thread is None:
            th = gdb.selected_thread()
            thread = th.ptid[1] if th is not None else 0
        key = (inf.num, inf.pid)
        if self._session is None or self._session[1] != key:
            self.close()
            try:
                session, _, _ = _open()
            except _pyunwind.Error as e:
                raise Error(str(e), getattr(e, "code", 1)) from None
            self._session = (session, key)
        try:
            return self._p.add_sample(self._session[0], int(thread))
        except _pyunwind.Error as e:
            raise Error(str(e), getattr(e, "code", 1)) from None

    def close(self):
        """Lets go of the target add_sample reads (also done when the
        inferior changes)."""
        if self._session is not None:
            self._p.forget_session()
            self._session[0].close()
            self._session = None

    def write(self, path=None, format="collapsed", sort="self", limit=40):
        """The profile as `format` (what py-sample --format writes; the
        names: formats()) into the file `path`, or returned as str (a
        binary format only into a file)."""
        if path is None and formats().get(format, {}).get("binary"):
            raise Error("--format %s is binary: write it to a file "
                        "(write(path, %r))" % (format, format), 2)
        try:
            data = self._p.write(format, sort, limit)
        except _pyunwind.Error as e:
            raise Error(str(e), getattr(e, "code", 1)) from None
        if path is None:
            return data.decode("utf-8", "surrogateescape")
        with open(path, "wb") as f:
            f.write(data)
        return None

    def data(self):
        """The whole profile as objects: what --format json writes
        (docs/json.md)."""
        return json.loads(self._p.write("json"))

    def stacks(self):
        """[(native thread id, [(function, file, line), ...] outermost
        first, count)]: one entry per thread and stack, as collapsed has
        them (the statuses and, with opcodes, the instructions summed)."""
        return pyunwind_shared.stacks(self.data())


def _signal_handling(name):
    """(stop, pass) for a signal, from `info signals`."""
    for line in _execute("info signals %s" % name).splitlines():
        f = line.split()
        if f and f[0] == name and len(f) >= 4:
            return f[1] == "Yes", f[3] == "Yes"
    return True, False


class _Quiet:
    """While the inferior runs for py-sample, gdb's own lines about the
    stops the sampler makes ("Thread 1 received signal SIGINT" and the
    frame) go nowhere: they are not news.  gdb prints them through its
    top-level interpreter, past gdb.execute(to_string=True) and, inside a
    command, past `set logging redirect`; so gdb's standard output is
    pointed at /dev/null meanwhile (its errors still show)."""

    def __enter__(self):
        self.saved = None
        try:
            gdb.flush()
            null = os.open(os.devnull, os.O_WRONLY)
            try:
                self.saved = os.dup(1)
                os.dup2(null, 1)
            finally:
                os.close(null)
        except OSError:
            pass  # (then the lines show)
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            try:
                gdb.flush()
            finally:
                os.dup2(self.saved, 1)
                os.close(self.saved)
        return False


def _ended(last, timed_out):
    """Why a window ended early, from the last stop or exit event (None:
    it ended as it should)."""
    if isinstance(last, gdb.ExitedEvent):
        return "the inferior exited"
    if isinstance(last, gdb.BreakpointEvent):
        return "stopped at breakpoint %s" % ", ".join(
            str(b.number) for b in last.breakpoints)
    if isinstance(last, gdb.SignalEvent) and not (
            timed_out and last.stop_signal == "SIGINT"):
        return "stopped by %s" % last.stop_signal
    if last is not None and not timed_out:
        return "the inferior stopped"
    return None


def _run_window(prof, inf, argv, events):
    """The window of a local inferior: pyunwind's thread reads the process
    directly while gdb runs it, and stops it at the end.  Returns (code,
    profile bytes, diagnostics, message, ended)."""
    try:
        prof._p.window_start(inf.pid, argv)
    except _pyunwind.Error as e:
        raise Error(str(e), getattr(e, "code", 1)) from None
    try:
        with _Quiet():
            gdb.execute("continue")
    except gdb.error:
        pass  # (the inferior exited: reported below)
    finally:
        code, out, diag, msg, timed_out = prof._p.window_end()
    return code, out, diag, msg, _ended(events[-1] if events else None,
                                        timed_out)


def _run_ticks(prof, inf, argv, events, stopper=None):
    """--blocking, and any remote target: gdb stops the inferior at each
    tick (a thread of the extension sends SIGINT at the tick's time, or
    the remote target's interrupt: see _remote_stopper), one sample of
    the stopped process is read, and it runs on until the next
    (frontend/ticks.c).  Returns what _run_window does."""
    pid, fd = stopper if stopper is not None else (inf.pid, -1)

    def run():
        del events[:]
        try:
            gdb.execute("continue")
        except gdb.error:
            pass  # (the inferior exited: why() says so)

    def why(fired):
        last = events[-1] if events else None
        if last is None:
            return "the inferior stopped"
        return _ended(last, fired)

    session, _, _ = _open()
    try:
        with _Quiet():
            out, diag, ended = prof._p.ticks(session, argv, pid, fd,
                                             stopper is not None, run, why)
    except _pyunwind.Error as e:
        raise Error(str(e), getattr(e, "code", 1)) from None
    finally:
        session.close()
    return 0, out, diag, "", ended


def _proc_stat(text):
    """(process group, start time) from `info proc stat` or the fields of
    a /proc/PID/stat line; None when they are not there."""
    if text.startswith("process ") or "\nProcess group:" in text:
        fields = dict(line.split(":", 1) for line in text.splitlines()
                      if ":" in line)
        group = fields.get("Process group", "").strip()
        started = fields.get("start time (jiffies since system boot)",
                             "").strip()
    else:
        rest = text[text.rfind(")") + 1:].split()
        group, started = (rest[2], rest[19]) if len(rest) > 19 else ("", "")
    if not (group.isdigit() and started.isdigit()):
        return None
    return int(group), int(started)


def _remote_stopper(inf, conn):
    """How the ticks stop a remote target: (pid, fd) for ticks_start.
    gdbserver stops the process when gdb's connection carries the
    interrupt byte (fd), by a SIGINT to the process's group: that works
    when the process leads its group (gdbserver started it, or a shell's
    job control did), and silently does nothing otherwise (sourceware
    bug 18945).  A process that does not lead its group is stopped by a
    SIGINT from here (pid) when it is this machine's own process (the
    same group and start time in this machine's /proc); otherwise Error,
    as nothing could stop it."""
    pid = inf.pid
    try:
        remote = _proc_stat(gdb.execute("info proc stat", to_string=True))
    except gdb.error:
        remote = None
    if remote is None:
        raise Error("cannot read /proc/%d/stat through the '%s' target, so "
                    "cannot tell whether gdb can stop the process at each "
                    "tick: run pyunwind sample on the target's machine"
                    % (pid, conn.type), 3)
    if remote[0] == pid:
        return -1, _connection_fd(conn)
    try:
        with open("/proc/%d/stat" % pid) as f:
            local = _proc_stat(f.read())
    except OSError:
        local = None
    if local == remote:
        return pid, -1
    raise Error("gdbserver cannot interrupt process %d: it does not lead "
                "its process group (%d) and gdbserver's interrupt signals "
                "the group (sourceware bug 18945: gdb's Ctrl-C cannot stop "
                "it either); start the program under gdbserver or with "
                "setsid, or run pyunwind sample on the target's machine"
                % (pid, remote[0]), 3)


def _connection_fd(conn):
    """gdb's own socket to a remote target (gdbserver): the file
    descriptor of this process connected to the address of conn.details
    ("HOST:PORT", "tcp:HOST:PORT", ...).  Raises Error when there is not
    exactly one."""
    kind = conn.type
    details = (getattr(conn, "details", None) or "").strip()
    where = details
    for prefix in ("tcp:", "tcp4:", "tcp6:"):
        if where.startswith(prefix):
            where = where[len(prefix):]
    host, _, port = where.rpartition(":")
    host = host.strip("[]") or "localhost"
    if not port.isdigit() or where.startswith("|"):
        raise Error("over a '%s' target connected by '%s' gdb cannot be made "
                    "to stop the process at each tick: connect to gdbserver "
                    "over TCP (target remote HOST:PORT), or run pyunwind "
                    "sample on the target's machine" % (kind, details), 3)
    try:
        peers = {(info[4][0], info[4][1]) for info in
                 socket.getaddrinfo(host, int(port), 0, socket.SOCK_STREAM)}
    except OSError as e:
        raise Error("cannot resolve '%s' of the remote target: %s"
                    % (host, e), 3) from None
    found = []
    try:
        names = os.listdir("/proc/self/fd")
    except OSError:
        names = []
    for name in names:
        try:
            dup = os.dup(int(name))
        except (OSError, ValueError):
            continue
        try:
            s = socket.socket(fileno=dup)
        except OSError:
            os.close(dup)
            continue
        try:
            peer = s.getpeername()
            if s.type == socket.SOCK_STREAM and (peer[0], peer[1]) in peers:
                found.append(int(name))
        except (OSError, IndexError, TypeError):
            pass
        finally:
            s.close()
    if len(found) != 1:
        raise Error("gdb's connection to the remote target %s was %s: "
                    "py-sample stops the process at each tick through it"
                    % (details, "not found" if not found
                       else "found more than once"), 3)
    return found[0]


def _window(argv):
    """Runs the selected live inferior for a sampling window with the
    options of py-sample: (Profile, profile bytes, diagnostics, reason the
    window ended early or None).  Raises Error."""
    try:
        opts = _pyunwind.parse("sample", argv)
    except _pyunwind.Error as e:
        raise Error(str(e), getattr(e, "code", 1)) from None
    inf = gdb.selected_inferior()
    conn = inf.connection
    kind = conn.type if conn is not None else None
    if kind == "core":
        raise Error("a core file holds one moment of the process, there is "
                    "nothing to sample: py-dump reads it", 2)
    if kind is None or inf.pid <= 0:
        raise Error("no process: start or attach to a Python process to "
                    "sample it", 3)
    stopper = None
    if kind != "native":
        # pyunwind cannot read that process itself: gdb stops it at each
        # tick
        stopper = _remote_stopper(inf, conn)
    th = gdb.selected_thread()
    if th is not None and th.is_running():
        raise Error("the inferior is running: stop it first (interrupt)", 2)
    thread_num = th.num if th is not None else None
    try:
        level = gdb.selected_frame().level()
    except (gdb.error, RuntimeError, AttributeError):
        level = None
    prof = Profile()
    stop_sigint, pass_sigint = _signal_handling("SIGINT")
    events = []

    def on_event(ev):
        events.append(ev)

    if not stop_sigint or pass_sigint:
        _execute("handle SIGINT stop nopass")
    quiet = gdb.parameter("suppress-cli-notifications")
    _execute("set suppress-cli-notifications on")
    gdb.events.stop.connect(on_event)
    gdb.events.exited.connect(on_event)
    try:
        if not opts["blocking"] and stopper is None:
            code, out, diag, msg, ended = _run_window(prof, inf, argv,
                                                      events)
        else:
            code, out, diag, msg, ended = _run_ticks(prof, inf, argv, events,
                                                     stopper)
    finally:
        gdb.events.stop.disconnect(on_event)
        gdb.events.exited.disconnect(on_event)
        if not quiet:
            _execute("set suppress-cli-notifications off")
        if not stop_sigint or pass_sigint:
            _execute("handle SIGINT %s %s" % ("stop" if stop_sigint
                                              else "nostop",
                                              "pass" if pass_sigint
                                              else "nopass"))
    if inf.pid > 0 and thread_num is not None:
        _execute("thread %d" % thread_num)
        if level is not None:
            _execute("frame %d" % level)
    prof.diagnostics = diag.decode("utf-8", "backslashreplace")
    prof.ended = ended
    if code not in (0,):
        raise Error(msg, code)
    return prof, out, opts, ended


def sample(duration=None, rate=None, mode=None, thread=None, gc=False,
           native=False, async_stacks=False, read_only=False,
           no_cache=False, blocking=False, opcodes=False,
           subprocesses=False):
    """Runs the selected live inferior for a sampling window (duration
    seconds; None: until it stops or Ctrl-C) and returns the Profile:
    py-sample's options as keywords.  The inferior is stopped again at the
    end, with the selected thread and frame as they were."""
    argv = pyunwind_shared.sample_argv(
        duration, rate, mode, thread, gc, native, async_stacks, read_only,
        no_cache, blocking, opcodes, subprocesses)
    return _window(argv)[0]


def _paths(word):
    """File names starting with word, directories with a trailing slash."""
    head, tail = os.path.split(word)
    try:
        names = sorted(os.listdir(os.path.expanduser(head) or "."))
    except OSError:
        return []
    out = []
    for name in names:
        if name.startswith(tail) and (tail.startswith(".") or
                                      not name.startswith(".")):
            path = os.path.join(head, name)
            out.append(path + "/" if os.path.isdir(os.path.expanduser(path))
                       else path)
    return out


class _Command(gdb.Command):
    """A pyunwind command; `command` is its name in the C layer."""
    command = None

    def __init__(self):
        super().__init__("py-" + self.command, gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        self.dont_repeat()
        name = "py-" + self.command
        try:
            argv = gdb.string_to_argv(arg)
            out, diag = _run(self.command, argv)
        except gdb.GdbError as e:
            raise gdb.GdbError("%s: %s" % (name, e)) from None
        except KeyboardInterrupt:
            raise
        except Exception as e:  # never a traceback inside gdb
            raise gdb.GdbError("%s: internal error: %s: %s"
                               % (name, type(e).__name__, e)) from None
        if diag:
            gdb.write(diag.decode("utf-8", "backslashreplace"), gdb.STDERR)
        if out:
            gdb.write(out.decode("utf-8", "backslashreplace"))

    def complete(self, text, word):
        # gdb calls this twice: with word None to learn the word-break
        # characters (a COMPLETE_* constant), then with the word after the
        # last break character ("j" of "--j"): completions replace that.
        tokens = text.split(" ")
        current, before = tokens[-1], [t for t in tokens[:-1] if t]
        if before and before[-1] in ("-o", "--output"):
            # gdb's own filename completer gives up after "-o": list here
            return gdb.COMPLETE_FILENAME if word is None else _paths(word)
        if before and before[-1] == "--thread":
            return gdb.COMPLETE_NONE
        if word is None:
            return []
        cut = len(current) - len(word)
        return [o[cut:] for o in _pyunwind.options(self.command)
                if o.startswith(current)]


class PyDump(_Command):
    command = "dump"


class PySample(_Command):
    command = "sample"

    def invoke(self, arg, from_tty):
        self.dont_repeat()
        try:
            argv = gdb.string_to_argv(arg)
            opts = _pyunwind.parse("sample", argv)
            if opts["help"]:
                gdb.write(_pyunwind.help("sample"))
                return
            prof, out, opts, ended = _window(argv)
        except gdb.GdbError as e:
            raise gdb.GdbError("py-sample: %s" % e) from None
        except _pyunwind.Error as e:
            raise gdb.GdbError("py-sample: %s" % e) from None
        except KeyboardInterrupt:
            raise
        except Exception as e:  # never a traceback inside gdb
            raise gdb.GdbError("py-sample: internal error: %s: %s"
                               % (type(e).__name__, e)) from None
        if ended:
            gdb.write("py-sample: the window ended early: %s\n" % ended,
                      gdb.STDERR)
        if prof.diagnostics:
            gdb.write(prof.diagnostics, gdb.STDERR)
        if out is None:
            pass  # (a capture, streamed to -o while it sampled)
        elif opts["output"]:
            try:
                with open(opts["output"], "wb") as f:
                    f.write(out)
            except OSError as e:
                raise gdb.GdbError("py-sample: cannot write %s: %s"
                                   % (opts["output"], e.strerror)) from None
        else:
            gdb.write(out.decode("utf-8", "backslashreplace"))


class PyTasks(_Command):
    command = "tasks"


PyDump.__doc__ = _pyunwind.help("dump")
PyTasks.__doc__ = _pyunwind.help("tasks")
PySample.__doc__ = _pyunwind.help("sample")
PyDump()
PyTasks()
PySample()


# ------------------------------------------------ Python frames in `bt`

from gdb.FrameDecorator import FrameDecorator  # noqa: E402

_LAST_FRAME_SPAN = 65536  # stack bytes the outermost frame is taken to own
# (before 3.11: no entry frames; each Python frame runs in a call of the
# eval function of its own, matched by name, innermost first)
_BY_NAME = 1
_EVAL = "_PyEval_EvalFrameDefault"


def _is_eval(frame):
    """Whether gdb's frame is a call of the eval function."""
    try:
        return frame.name() == _EVAL
    except Exception:
        return False


class _PythonFrame(FrameDecorator):
    """A Python frame, shown under the eval-loop frame that runs it."""

    def __init__(self, base, frame):
        super().__init__(base)
        self._frame = frame

    def function(self):
        return "[Python] " + self._frame["function"]

    def filename(self):
        return self._frame["file"]

    def line(self):
        return self._frame["line"]

    def address(self):
        return None

    def frame_args(self):
        return None

    def frame_locals(self):
        return None

    def elided(self):
        return None


class _NativeFrame(FrameDecorator):
    """A native frame as gdb's own decorator gives it, with "??" for a
    function without a name (as a plain `bt` prints it)."""

    def function(self):
        name = super().function()
        try:  # (gdb's decorator gives the pc when there is no name)
            if not isinstance(name, str) and \
                    self.inferior_frame().name() is None:
                return "??"
        except gdb.error:
            pass
        return name


class _EvalFrame(_NativeFrame):
    """An eval-loop frame with the Python frames it runs as its elided
    frames (innermost first), the way gdb prints inlined helpers."""

    def __init__(self, base, frames):
        super().__init__(base)
        self._python = frames

    def elided(self):
        return iter([_PythonFrame(self, f) for f in self._python])


class PythonFrameFilter:
    """gdb's `bt` with each thread's Python frames under the native frames
    of the eval loop that run them: an eval-loop call's entry frame lives
    on its native stack, between its stack pointer and its caller's.
    `bt -no-filters` (or `disable frame-filter global pyunwind`) shows the
    raw view.  Anything that is not a CPython pyunwind reads leaves the
    backtrace as it is, silently."""

    name = "pyunwind"
    priority = 100

    def __init__(self):
        self._enabled = True
        self._python = {}  # progspace filename -> a CPython is loaded
        gdb.frame_filters[self.name] = self

    @property
    def enabled(self):
        """On for processes that load CPython only: gdb prints every other
        backtrace without filters, exactly as before."""
        return self._enabled and self._is_python()

    @enabled.setter
    def enabled(self, value):  # (enable/disable frame-filter)
        self._enabled = bool(value)

    def _is_python(self):
        try:
            space = gdb.current_progspace()
            key = (space.filename, len(space.objfiles()))
            if key not in self._python:
                self._python[key] = any(
                    "python3" in os.path.basename(o.filename or "")
                    for o in space.objfiles())
            return self._python[key]
        except Exception:
            return False

    def filter(self, frames):
        try:
            tid = gdb.selected_thread().ptid[1]
            groups = _session(False, lambda s, retry, source:
                              s.entries(tid))
        except Exception:  # not a Python process, no process, ...
            return frames
        if not groups:
            return frames
        return self._decorate(frames, groups)

    @staticmethod
    def _decorate(frames, groups):
        by_name = [python for addr, python in groups if addr == _BY_NAME]
        for fd in frames:
            mine = []
            try:
                f = fd.inferior_frame()
                if by_name:
                    if f.type() != gdb.INLINE_FRAME and _is_eval(f):
                        mine = by_name.pop(0)
                elif f.type() != gdb.INLINE_FRAME:
                    lo = int(f.read_register("rsp"))
                    older = f.older()
                    hi = (int(older.read_register("rsp")) if older is not None
                          else lo + _LAST_FRAME_SPAN)
                    mine = [frame for addr, python in groups
                            if lo <= addr < hi for frame in python]
            except Exception:
                mine = []
            yield _EvalFrame(fd, mine) if mine else _NativeFrame(fd)


PythonFrameFilter()


# ------------------------------------ py-bt, py-up, py-list, ... (pyframes)

from .pyframes import selected_frame  # noqa: E402
__all__.append("selected_frame")
