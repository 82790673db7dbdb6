"""pyunwind's profiles in lldb's Python: a sampling window, or a profile
fed one sample at a time from breakpoint callbacks; and the dump, the
tasks and the selected Python frame (py-up, py-down) as Python objects.

    (lldb) command script import /usr/local/lib/pyunwind/pyunwind_lldb.py
    (lldb) script p = pyunwind_lldb.sample(duration=2)
    (lldb) script print(p.write(format="top", limit=5))

    import pyunwind_lldb
    profile = pyunwind_lldb.Profile()
    def on_hit(frame, bp_loc, extra_args, internal_dict):
        profile.add_sample()        # the stack of the stopped thread
        return False                # and go on

A thin layer over the plugin's `py-profile` command (libpyunwind-lldb.so,
loaded on import when lldb does not have it yet): each Profile is a
profile the plugin holds under a name of its own (`py-profile ... --name
NAME`), and every method is one `py-profile` command.  Reading the target,
sampling and writing every format are the plugin's (pyunwind's C core).
"""

import importlib.util
import json
import os
import uuid

import lldb

__all__ = ["dump", "tasks", "selected_frame", "Profile", "sample", "Error",
           "formats"]

PLUGIN = "libpyunwind-lldb.so"


class Error(Exception):
    """A pyunwind failure, with the plugin's one-line message."""


def _plugin_paths():
    """Where the plugin may be, relative to this file: next to it (the
    build tree; installed, both are in PREFIX/lib/pyunwind), then in
    ../lib/pyunwind and ../../lib/pyunwind (this file elsewhere under a
    prefix, say PREFIX/share/pyunwind).  PYUNWIND_LLDB_PLUGIN overrides."""
    here = os.path.dirname(os.path.realpath(__file__))
    paths = [os.path.join(here, PLUGIN),
             os.path.join(here, "..", "lib", "pyunwind", PLUGIN),
             os.path.join(here, "..", "..", "lib", "pyunwind", PLUGIN)]
    forced = os.environ.get("PYUNWIND_LLDB_PLUGIN")
    return [forced] if forced else [os.path.normpath(p) for p in paths]


_SHARED = None


def _shared():
    """What this module has in common with gdb's (frontend/
    pyunwind_shared.py), installed beside it or beside the plugin."""
    global _SHARED
    if _SHARED is None:
        dirs = [os.path.dirname(os.path.realpath(__file__))]
        dirs += [os.path.dirname(os.path.realpath(p))
                 for p in _plugin_paths() if os.path.exists(p)]
        for d in dirs:
            path = os.path.join(d, "pyunwind_shared.py")
            if os.path.exists(path):
                spec = importlib.util.spec_from_file_location(
                    "pyunwind_shared", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                _SHARED = mod
                break
        else:
            raise Error("cannot find pyunwind_shared.py (looked in %s)"
                        % ", ".join(dirs))
    return _SHARED


def _quote(arg):
    """An argument as lldb's command line reads it back (inside double
    quotes only \\ and " are special; backticks are kept as they are)."""
    return '"%s"' % str(arg).replace("\\", "\\\\").replace('"', '\\"')


def _has_plugin(debugger):
    ci = debugger.GetCommandInterpreter()
    return ci.UserCommandExists("py-profile") or ci.CommandExists("py-profile")


def _load_plugin(debugger):
    """Loads the plugin into debugger unless it has py-profile already.
    Raises Error when it cannot be found or loaded."""
    if _has_plugin(debugger):
        return
    paths = _plugin_paths()
    found = [p for p in paths if os.path.exists(p)]
    if not found:
        raise Error("cannot find %s (looked in %s); load it with `plugin "
                    "load PATH`" % (PLUGIN, ", ".join(
                        os.path.dirname(p) for p in paths)))
    result = lldb.SBCommandReturnObject()
    debugger.GetCommandInterpreter().HandleCommand(
        "plugin load " + _quote(found[0]), result)
    if not result.Succeeded() or not _has_plugin(debugger):
        msg = _message(result) or "it did not add py-profile"
        raise Error("cannot load %s: %s" % (found[0], msg))


def _message(result):
    """The first line of a command's error, without lldb's and the
    command's prefixes."""
    text = (result.GetError() or "").strip()
    line = text.splitlines()[0] if text else ""
    for prefix in ("error: ", "py-profile: "):
        if line.startswith(prefix):
            line = line[len(prefix):]
    return line


def _debugger(debugger):
    d = debugger if debugger is not None else lldb.debugger
    if d is None or not d.IsValid():
        raise Error("no debugger: pass the SBDebugger (in a breakpoint "
                    "callback, frame.GetThread().GetProcess().GetTarget()"
                    ".GetDebugger())")
    return d


def _run(debugger, argv):
    """Runs `py-profile ARGV...`: (output, result); raises Error with the
    plugin's message when it fails."""
    _load_plugin(debugger)
    result = lldb.SBCommandReturnObject()
    debugger.GetCommandInterpreter().HandleCommand(
        " ".join(["py-profile"] + [_quote(a) for a in argv]), result)
    if not result.Succeeded():
        raise Error(_message(result) or "py-profile failed")
    return result.GetOutput() or "", result


def _json_of(debugger, argv):
    """Runs a command that prints JSON (py-dump --json, py-tasks --json)
    and returns it as objects; a partial result (some thread or task not
    read whole: exit status 5) is returned all the same, with its errors
    inside.  Raises Error when nothing was printed."""
    d = _debugger(debugger)
    _load_plugin(d)
    result = lldb.SBCommandReturnObject()
    d.GetCommandInterpreter().HandleCommand(
        " ".join([argv[0]] + [_quote(a) for a in argv[1:]]), result)
    text = (result.GetOutput() or "").strip()
    if text.startswith("{"):
        return json.loads(text)
    raise Error(_message(result) or "%s failed" % argv[0])


def dump(debugger=None, thread=None, async_stacks=False, locals=False):
    """The dump of the selected process as Python objects: what `py-dump
    --json` prints (docs/json.md), as gdb's pyunwind_gdb.dump() gives it.
    thread: a native thread id or Python ident, to get that one thread;
    async_stacks, locals: as py-dump --async, --locals.  Raises Error when
    the process cannot be read."""
    argv = ["py-dump", "--json"]
    if thread is not None:
        argv += ["--thread", thread]
    if async_stacks:
        argv.append("--async")
    if locals:
        argv.append("--locals")
    return _json_of(debugger, argv)


def tasks(debugger=None):
    """The asyncio tasks of the selected process as Python objects: what
    `py-tasks --json` prints (docs/json.md).  Raises Error."""
    return _json_of(debugger, ["py-tasks", "--json"])


def selected_frame(debugger=None):
    """The selected Python frame of lldb's selected thread (py-up /
    py-down / lldb's selected frame, as py-bt marks it): a dict as a frame
    of `py-dump --locals --json` (function, name, file, line, ..., locals,
    locals_error) with its index among the thread's Python frames (0 = the
    innermost), as gdb's pyunwind_gdb.selected_frame() gives it: what
    `py-locals --json` prints.  Raises Error."""
    try:
        return _json_of(debugger, ["py-locals", "--json"])
    except Error as e:
        msg = str(e)
        if msg.startswith("py-locals: "):
            msg = msg[len("py-locals: "):]
        raise Error(msg) from None


def formats(debugger=None):
    """The profile formats, {name: {"summary", "binary",
    "keeps_instructions"}} in the order py-sample --help lists them: what
    py-sample --format and Profile.write() take (`py-profile formats`)."""
    rows = []
    for line in _run(_debugger(debugger), ["formats"])[0].splitlines():
        name, binary, keeps, summary = line.split("\t", 3)
        rows.append((name, summary, binary == "1", keeps == "1"))
    return _shared().formats(rows)


_ENDED = "py-sample: the window ended early: "


class Profile:
    """A profile the plugin holds (`py-profile --name NAME`): stacks with
    sample counts per thread, fed one sample at a time with add_sample()
    while the process is stopped (say, from a breakpoint callback), or by
    pyunwind_lldb.sample().

    debugger: the SBDebugger (default: lldb.debugger when used).  Each
    Profile has a name of its own (.name), so that `py-profile write --name
    NAME` also writes it."""

    def __init__(self, debugger=None):
        # (unique also when the module is imported again)
        self.name = "pyunwind_lldb-" + uuid.uuid4().hex[:16]
        self.diagnostics = ""  # the summary line(s) of a sampling window
        self.ended = None      # why a window ended early, or None
        self._debugger = debugger

    def _run(self, *argv):
        return _run(_debugger(self._debugger),
                    [argv[0], "--name", self.name, *argv[1:]])[0]

    def add_sample(self, thread=None):
        """Adds one sample of the stopped process: the stack of `thread`
        (a native thread id; default: lldb's selected thread; 0: every
        thread).  Returns the number of stacks recorded."""
        if thread is None:
            extra = []
        elif thread == 0:
            extra = ["--all"]
        else:
            extra = ["--thread", thread]
        return int(self._run("add", *extra).strip() or 0)

    def write(self, path=None, format="collapsed", sort="self", limit=40):
        """The profile as `format` (what py-sample --format writes; the
        names: formats()) into the file `path`, or returned as str (a
        binary format only into a file)."""
        argv = ["write", "--format", format, "--sort", sort,
                "--limit", limit]
        if path is not None:
            argv += ["-o", os.fspath(path)]
        out = self._run(*argv)
        return out if path is None else None

    def data(self):
        """The whole profile as objects: what --format json writes
        (docs/json.md)."""
        return json.loads(self._run("write", "--format", "json"))

    def stacks(self):
        """[(native thread id, [(function, file, line), ...] outermost
        first, count)]: one entry per thread and stack, as collapsed has
        them (the statuses and, with opcodes, the instructions summed)."""
        return _shared().stacks(self.data())

    def close(self):
        """Lets go of the target add_sample reads (also done when the
        process changes); the profile stays."""
        self._run("close")

    def clear(self):
        """Empties the profile (and lets go of the target)."""
        self._run("clear")
        self.diagnostics = ""
        self.ended = None


def sample(debugger=None, duration=None, rate=None, mode=None, thread=None,
           gc=False, native=False, async_stacks=False, read_only=False,
           no_cache=False, blocking=False, opcodes=False,
           subprocesses=False):
    """Runs the selected process for a sampling window, as py-sample does
    (duration seconds; None: until it stops by itself), and returns the
    Profile: py-sample's options as keywords.  The process is stopped
    again at the end, with the selected thread and frame as they were.
    .diagnostics holds the summary py-sample prints, .ended why the window
    ended early (a breakpoint, a signal, the exit) or None."""
    argv = _shared().sample_argv(
        duration, rate, mode, thread, gc, native, async_stacks, read_only,
        no_cache, blocking, opcodes, subprocesses)
    prof = Profile(debugger)
    try:
        out = prof._run("sample", *argv)
    except Error:
        try:
            prof.clear()  # (the plugin made the profile for the window)
        except Error:
            pass
        raise
    notes = []
    for line in out.splitlines(True):
        if line.startswith(_ENDED):
            prof.ended = line[len(_ENDED):].strip()
        else:
            notes.append(line)
    prof.diagnostics = "".join(notes)
    return prof


def __lldb_init_module(debugger, internal_dict):
    """`command script import pyunwind_lldb.py`: loads the plugin unless
    lldb has it already."""
    try:
        _load_plugin(debugger)
    except Error as e:
        print("error: pyunwind_lldb: %s" % e)
