"""The commands a user of CPython's python-gdb.py types by habit: py-bt,
py-bt-full, py-up, py-down, py-list, py-locals, py-print, over pyunwind's
reading of the target, so that they work on stripped interpreters, live
and on core files.  Their text comes from the C layer every front end
shares (frontend/pyframes.c); this file keeps the selected Python frame
and moves gdb's selected frame with it.

The selection is per (inferior, thread).  It starts at the innermost
Python frame; py-up / py-down move it and select in gdb the native frame
of the eval loop that runs it (the frame under which `bt` shows it).
When gdb's own selection moved (`frame N`, `up`, `down`) since the last
of these commands, the selected Python frame becomes the innermost one
that native frame runs (else the innermost one an older frame runs, else
the outermost).  Whenever the inferior runs, the selection starts again.
"""

import gdb

from . import (Error, _BY_NAME, _LAST_FRAME_SPAN, _is_eval, _pyunwind,
               _session)

__all__ = ["selected_frame"]

_generation = 0   # bumped whenever the stacks may have changed
_selections = {}  # (inferior num, thread global num) -> _Selection


class _Selection:
    def __init__(self, index, frame, generation):
        self.index = index            # among the thread's Python frames
        self.frame = frame            # the gdb.Frame it belongs to
        self.generation = generation


def _stacks_changed(event=None):
    global _generation
    _generation += 1
    _selections.clear()


for _event in ("cont", "exited", "new_objfile", "clear_objfiles",
               "inferior_deleted"):
    _registry = getattr(gdb.events, _event, None)
    if _registry is not None:
        _registry.connect(_stacks_changed)


class _Verbatim(gdb.GdbError):
    """An error whose text is shown as it is (it names its command, or
    copies the text gdb or python-gdb.py gives)."""


def _physical(frame):
    """frame, or the frame an inlined frame is part of."""
    while frame is not None and frame.type() == gdb.INLINE_FRAME:
        frame = frame.older()
    return frame


class _Stack:
    """The selected thread's Python frames (a PyFrames of the C layer)
    and where they run among gdb's frames."""

    def __init__(self, then=None):
        """then(stack), when given, runs while the session that read the
        frames is open (py-print reads the target through it); its value
        is self.result."""
        inf = gdb.selected_inferior()
        thread = gdb.selected_thread()
        if thread is None or inf.pid <= 0:
            # (opening says why: no process, ...)
            _session(False, lambda s, retry, source: None)
            raise Error("no thread selected")
        if thread.is_running():
            raise Error("thread %d is running: stop it first (interrupt)"
                        % thread.num)
        tid = thread.ptid[1] or thread.ptid[2] or inf.pid
        where = "no Python frames in thread %d (LWP %d)" % (thread.num, tid)

        def use(s, retry, source):
            try:
                self.frames = s.pyframes(tid, retry)
            except _pyunwind.Error as e:
                if getattr(e, "code", 1) != 2:  # (2: not a Python thread)
                    raise
                raise Error(where + ": it is not a Python thread (`thread "
                            "apply all -s py-bt` shows those that are)") \
                    from None
            self.count = self.frames.count
            if self.count == 0:
                why = self.frames.error
                raise Error(where + (": " + why if why else ""))
            # the entry frame's address after each Python frame (innermost
            # first; 0 where none follows)
            self._entry = s.entry_frames(tid, self.count)
            self.key = (inf.num, thread.global_num)
            self._native = None
            return then(self) if then is not None else None

        self.result = _session(False, use)

    def natives(self):
        """[(gdb.Frame, [Python frame indices it runs])] for gdb's physical
        frames of the thread, innermost first, as far as the outermost
        Python frame's: an eval-loop call's entry frame lies between its
        native frame's stack pointer and its caller's (as `bt` places
        them)."""
        if self._native is not None:
            return self._native
        self._native = []
        left = {k for k, addr in enumerate(self._entry) if addr}
        by_name = sorted(k for k, addr in enumerate(self._entry)
                         if addr == _BY_NAME)
        if by_name:
            left = set()
        try:
            f = _physical(gdb.newest_frame())
            while f is not None and by_name:  # (before 3.11)
                self._native.append((f, by_name[:1] if _is_eval(f) else []))
                if _is_eval(f):
                    by_name.pop(0)
                f = _physical(f.older())
            while f is not None and left:
                older = _physical(f.older())
                lo = int(f.read_register("rsp"))
                hi = (int(older.read_register("rsp")) if older is not None
                      else lo + _LAST_FRAME_SPAN)
                mine = sorted(k for k in left if lo <= self._entry[k] < hi)
                left.difference_update(mine)
                self._native.append((f, mine))
                f = older
        except gdb.error:
            pass  # (as far as gdb could unwind)
        return self._native

    def native_of(self, index):
        """The gdb frame running Python frame index, or None."""
        for frame, python in self.natives():
            if index in python:
                return frame
        return None

    def selected(self):
        """The selected Python frame's index (see the module's doc)."""
        sel = _selections.get(self.key)
        try:
            here = gdb.selected_frame()
        except gdb.error:
            here = None
        if sel is not None and sel.generation == _generation and \
                sel.index < self.count and sel.frame is not None and \
                here is not None and sel.frame.is_valid() and \
                sel.frame == here:
            return sel.index
        index = self._index_for(here)
        _selections[self.key] = _Selection(index, here, _generation)
        return index

    def _index_for(self, here):
        """The Python frame for gdb's selected frame `here`."""
        if here is None or here.level() == 0:
            return 0
        here = _physical(here)
        seen = False
        for frame, python in self.natives():
            seen = seen or frame == here
            if seen and python:
                return python[0]
        return self.count - 1

    def select(self, index):
        """Makes Python frame index the selected one, and gdb's selected
        frame the native frame that runs it (when it is known)."""
        frame = self.native_of(index)
        if frame is not None:
            frame.select()
        try:
            here = gdb.selected_frame()
        except gdb.error:
            here = None
        _selections[self.key] = _Selection(index, here, _generation)

    def text(self, what, index, arg=None):
        try:
            return self.frames.text(what, index, arg).decode(
                "utf-8", "backslashreplace")
        except _pyunwind.Error as e:
            raise _Verbatim(str(e)) from None


# The end of each command's help: what `help py-bt` says, and how
# _reclaim() knows that a command is pyunwind's.
_REPLACES = """

This is pyunwind's %s.  CPython's python-gdb.py
(Tools/gdb/libpython.py, which Debian's python3.X-dbg makes gdb load with
the interpreter) has a command of that name: with pyunwind loaded,
pyunwind's is the one that runs, whichever of the two gdb loads first."""


class _Command(gdb.Command):
    """A command over the selected thread's Python frames: errors are one
    line, never a traceback."""

    command = None
    repeats = False

    def __init__(self):
        # (gdb takes the help from the instance's __doc__)
        self.__doc__ = type(self).__doc__ + _REPLACES % self.command
        if hasattr(self, "complete"):  # (its own completion)
            super().__init__(self.command, gdb.COMMAND_STACK)
        else:
            super().__init__(self.command, gdb.COMMAND_STACK,
                             gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        if not self.repeats:
            self.dont_repeat()
        try:
            out = self.run(arg.strip())
        except _Verbatim as e:
            raise gdb.GdbError(str(e)) from None
        except gdb.GdbError as e:
            raise gdb.GdbError("%s: %s" % (self.command, e)) from None
        except _pyunwind.Error as e:
            raise gdb.GdbError("%s: %s" % (self.command, e)) from None
        except KeyboardInterrupt:
            raise
        except Exception as e:  # never a traceback inside gdb
            raise gdb.GdbError("%s: internal error: %s: %s"
                               % (self.command, type(e).__name__, e)) \
                from None
        if out:
            gdb.write(out)

    def run(self, arg):
        raise NotImplementedError

    @staticmethod
    def no_argument(arg):
        if arg:
            raise Error("takes no argument ('%s' given)" % arg)


class PyBt(_Command):
    """Print the selected thread's Python frames, innermost first.
Usage: py-bt

As a traceback: "  File "x.py", line 12, in func" and the source line
under it (when the file can be read).  The selected Python frame (py-up,
py-down, or gdb's selected frame) is marked: its line starts with "* "
instead of two spaces.  Works without CPython's debug symbols, live and
on core files.  See also py-bt-full."""

    command = "py-bt"

    def run(self, arg):
        self.no_argument(arg)
        stack = _Stack()
        return stack.text("bt", stack.selected())


class PyBtFull(_Command):
    """Print the selected thread's Python frames with their variables.
Usage: py-bt-full

Innermost first, numbered: "#K File "x.py", line 12, in func" (K: the
frame's index among the thread's Python frames, 0 = the innermost; py-up
and py-down print the same), the source line, and the frame's variables
as `py-dump --locals` shows them."""

    command = "py-bt-full"

    def run(self, arg):
        self.no_argument(arg)
        stack = _Stack()
        return stack.text("bt-full", stack.selected())


def _count(arg):
    """py-up / py-down's argument: (N, given)."""
    if not arg:
        return 1, False
    try:
        return int(arg, 0), True
    except ValueError:
        raise Error("'%s' is not a number of frames" % arg) from None


class _Move(_Command):
    repeats = True  # (as gdb's up and down: Enter moves again)
    older = None

    def run(self, arg):
        n, given = _count(arg)
        stack = _Stack()
        index = stack.selected()
        want = index + (n if self.older else -n)
        new = max(0, min(stack.count - 1, want))
        if new != want and not given:
            # gdb's own words for up and down at the ends
            raise _Verbatim(
                "Initial frame selected; you cannot go up." if self.older
                else "Bottom (innermost) frame selected; you cannot go "
                     "down.")
        stack.select(new)
        return stack.text("frame", new)


class PyUp(_Move):
    """Select and print the Python frame that called this one.
Usage: py-up [N]

Selects the Python frame N (default 1) older than the selected one among
the selected thread's Python frames, and in gdb the native frame of the
eval loop that runs it (the frame `bt` shows it under); prints it as
"#K File "x.py", line 12, in func" and its source line.  As with gdb's
`up`: at the outermost frame `py-up` is an error, `py-up N` stops
there."""

    command = "py-up"
    older = True


class PyDown(_Move):
    """Select and print the Python frame called by this one.
Usage: py-down [N]

Selects the Python frame N (default 1) newer than the selected one among
the selected thread's Python frames, and in gdb the native frame of the
eval loop that runs it; prints it as py-up does.  As with gdb's `down`:
at the innermost frame `py-down` is an error, `py-down N` stops
there."""

    command = "py-down"
    older = False


def _lines(arg):
    """py-list's argument: (first, last), (0, 0) for around the line."""
    if not arg:
        return 0, 0
    parts = [p.strip() for p in arg.split(",")]
    try:
        if len(parts) == 1:
            first = int(parts[0])
            return first, first + 10
        if len(parts) == 2:
            return int(parts[0]), int(parts[1])
    except ValueError:
        pass
    raise Error("'%s': give a line (py-list LINE) or a range "
                "(py-list START,END)" % arg)


class PyList(_Command):
    """List the source of the selected Python frame.
Usage: py-list [START | START,END]

Without an argument: five lines before the frame's line to five after
it, the line marked with ">".
    py-list START          lines START to START+10
    py-list START,END      lines START to END
The file is read as py-dump reads it (below /proc/PID/root first for a
live process, below gdb's sysroot for a core); a file changed after the
process started (or the core was written) is not listed."""

    command = "py-list"

    def run(self, arg):
        first, last = _lines(arg)
        stack = _Stack()
        return stack.text("list", stack.selected(), (first, last))


class PyLocals(_Command):
    """Print the variables of the selected Python frame.
Usage: py-locals

One "name = value" a line, the arguments first; values as py-dump
--locals shows them (a bounded repr made from memory: no code runs in
the inferior)."""

    command = "py-locals"

    def run(self, arg):
        self.no_argument(arg)
        stack = _Stack()
        return stack.text("locals", stack.selected())


class PyPrint(_Command):
    """Print a name, an attribute or an item as the selected Python frame
sees it.
Usage: py-print NAME[.ATTR | [INDEX] | ['KEY']]...

NAME is looked up as Python does: the frame's variables, then its
globals, then builtins; prints "local 'NAME' = value" (or global,
builtin), the value as py-dump --locals shows it, or "'NAME' not found"
as an error.  Then .ATTR reads an object's own dict, a __slots__ entry,
a module's or a class's attribute; [INDEX] an item of a list or tuple;
['KEY'] or [INT] an entry of a dict.  All of it is read from memory:
nothing runs in the target, so a property is not evaluated (it says so).
Tab completes names and attributes."""

    command = "py-print"

    def run(self, arg):
        if not arg:
            raise Error("give the name of a variable (py-print NAME)")
        return _Stack(lambda st: st.text("print", st.selected(), arg)).result

    def complete(self, text, word):
        """Names the frame sees; after "EXPR.", EXPR's attributes."""
        expr, dot, prefix = text.rpartition(".")
        if not dot:
            expr, prefix = "", text
        if "[" in prefix or "]" in prefix or " " in text.strip():
            return []
        word = word or ""
        try:
            names = _Stack(lambda st: st.frames.names(st.selected(),
                                                      expr)).result
        except Exception:  # (completion never fails: nothing offered)
            return []
        keep = len(prefix) - len(word)
        if keep < 0 or not prefix.endswith(word):
            return []
        return sorted(n[keep:] for n in names if n.startswith(prefix))


def selected_frame():
    """The selected Python frame of gdb's selected thread (py-up / py-down
    / gdb's selected frame, as py-bt marks it): a dict as a frame of
    `py-dump --locals --json` (function, name, file, line, ..., locals,
    locals_error) with its index among the thread's Python frames (0 =
    the innermost).  Raises pyunwind_gdb.Error."""
    try:
        stack = _Stack()
        index = stack.selected()
        frame = stack.frames.frame(index)
    except _pyunwind.Error as e:
        raise Error(str(e), getattr(e, "code", 1)) from None
    except gdb.error as e:
        raise Error(str(e)) from None
    frame["index"] = index
    return frame


# python-gdb.py defines the same names.  gdb runs an objfile's auto-loaded
# scripts (python-gdb.py among them: `python3.11-gdb.py` beside
# /usr/bin/python3.11 in the auto-load directory) when it reads the
# objfile, before it tells Python of it with gdb.events.new_objfile; so
# at that event, a python-gdb.py loaded with the objfile has defined its
# commands, and pyunwind's are defined again over them.  When pyunwind is
# loaded after python-gdb.py, defining them replaces its commands anyway.
# python-gdb.py's pretty-printers and the rest of it are left alone.
_COMMANDS = (PyBt, PyBtFull, PyUp, PyDown, PyList, PyLocals, PyPrint)
_defined = {}  # command name -> pyunwind's instance (gdb holds it too)


def _is_ours(name):
    try:
        text = gdb.execute("help " + name, to_string=True)
    except gdb.error:
        return False
    return (_REPLACES % name).strip() in text


def _reclaim(event=None):
    """Defines again each of pyunwind's commands that something else
    (python-gdb.py) has defined since."""
    try:
        for cls in _COMMANDS:
            if not _is_ours(cls.command):
                _defined[cls.command] = cls()
    except Exception as e:  # never a traceback inside gdb
        gdb.write("pyunwind: could not define %s again: %s: %s\n"
                  % (cls.command, type(e).__name__, e), gdb.STDERR)


for _cls in _COMMANDS:
    _defined[_cls.command] = _cls()
gdb.events.new_objfile.connect(_reclaim)
