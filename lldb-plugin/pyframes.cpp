// The commands a user of CPython's python-gdb.py types by habit, in lldb:
// py-bt [--all], py-bt-full, py-up [N], py-down [N], py-list [LINE |
// START,END], py-locals [--json], py-print EXPR.  Their text is the one
// gdb's plugin prints (frontend/pyframes.c writes it for both); this file
// keeps the selected Python frame and moves lldb's selected frame with it,
// as gdb-plugin/pyunwind_gdb/pyframes.py does in gdb.
//
// The selection is per (process, thread index id).  It starts at the
// innermost Python frame; py-up / py-down move it and select in lldb the
// native frame of the eval loop that runs it: the physical frame whose
// stack, [its sp, its caller's sp), holds the entry frame that follows
// the Python frame.  When lldb's own selection moved (`frame select N`,
// `up`, `down`) since the last of these commands, the selected Python
// frame becomes the innermost one that native frame runs (else the
// innermost one an older frame runs, else the outermost).  When the
// process's stop id changes (it ran), the selection starts again.

#include "plugin.h"
#include "pyframes.h"

#include <cerrno>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

// Stack bytes the outermost native frame is taken to own (as gdb's plugin).
constexpr uint64_t LAST_FRAME_SPAN = 65536;

enum Kind { BT, BT_FULL, UP, DOWN, LIST, LOCALS, PRINT };

struct Selection {
    size_t index;     // among the thread's Python frames
    uint32_t frame;   // lldb's selected frame it belongs to
    uint32_t stop_id; // the process's stop when it was made
};

// (SBProcess::GetUniqueID, SBThread::GetIndexID) -> the selection
std::map<std::pair<uint32_t, uint32_t>, Selection> selections;

// A failure: the one-line message, shown as it is (or, from Stack, to be
// headed by the command's name).
struct Failure {
    std::string msg;
};

// One dump of the target with its variables, and the session that took
// it (kept open for the entry frames, read when needed).
struct Target {
    lldb::SBProcess process;
    pyu_session *s = nullptr; // owned
    pyu_dump *d = nullptr;    // owned

    Target() = default;
    Target(const Target &) = delete;
    Target &operator=(const Target &) = delete;
    ~Target()
    {
        pyu_dump_free(d);
        pyu_session_free(s);
    }

    // Opens lldb's selected target and takes the dump; false with the
    // message in msg.
    bool open(lldb::SBDebugger &debugger, std::string *msg)
    {
        bool retry = false;
        std::string source;
        int ex;
        if (pyu_lldb::open_target(debugger, &s, &retry, &source, msg, &ex) <
            0)
            return false;
        process = debugger.GetSelectedTarget().GetProcess();
        int rc = pyu_cmd_take_dump(s, PYU_WALK_LOCALS, retry, &d);
        if (rc < 0) {
            const char *m = pyu_errmsg(s);
            *msg = m && *m ? m : pyu_strerror(-rc);
            return false;
        }
        return true;
    }
};

// A physical native frame (lldb's frame index) and the Python frames the
// eval-loop call in it runs (indices, innermost first).
struct Native {
    uint32_t frame;
    std::vector<size_t> python;
};

// One thread's Python frames and where they run among lldb's frames.
class Stack {
  public:
    Stack(Target &target, lldb::SBThread thread) : tg_(target), th_(thread)
    {
        uint64_t tid = thread.GetThreadID();
        char msg[1024];
        // (python: tid is one of the interpreters' threads; otherwise
        // view_ holds the whole dump, whose first thread is another's)
        bool python = pyu_cmd_dump_thread(tg_.d, tid, &view_, msg,
                                          sizeof msg) == PYU_EXIT_OK &&
                      view_.nthreads == 1;
        if (!python || view_.threads[0].nframes == 0) {
            const char *why = !python ? "it is not a Python thread "
                                        "(py-bt --all shows those that are)"
                                      : view_.threads[0].error;
            snprintf(msg, sizeof msg, "no Python frames in thread #%u "
                     "(tid %" PRIu64 ")%s%s", thread.GetIndexID(), tid,
                     why ? ": " : "", why ? why : "");
            throw Failure{msg};
        }
        t_ = &view_.threads[0];
        key_ = {tg_.process.GetUniqueID(), thread.GetIndexID()};
    }

    const pyu_thread *thread() const { return t_; }
    size_t count() const { return t_->nframes; }

    // The selected Python frame's index (see the file's comment).
    size_t selected()
    {
        uint32_t here = th_.GetSelectedFrame().GetFrameID();
        uint32_t stop = tg_.process.GetStopID();
        auto it = selections.find(key_);
        if (it != selections.end() && it->second.stop_id == stop &&
            it->second.index < count() && it->second.frame == here)
            return it->second.index;
        size_t index = index_for(here);
        selections[key_] = Selection{index, here, stop};
        return index;
    }

    // Makes Python frame index the selected one, and lldb's selected frame
    // the native frame that runs it (when it is known).
    void select(size_t index)
    {
        for (const Native &n : natives())
            for (size_t k : n.python)
                if (k == index)
                    th_.SetSelectedFrame(n.frame);
        selections[key_] = Selection{index,
                                     th_.GetSelectedFrame().GetFrameID(),
                                     tg_.process.GetStopID()};
    }

  private:
    Target &tg_;
    lldb::SBThread th_;
    pyu_dump view_{};
    const pyu_thread *t_ = nullptr; // points into tg_.d
    std::pair<uint32_t, uint32_t> key_;
    std::vector<Native> natives_;
    bool have_natives_ = false;

    // The first physical frame at or after frame i; false when none.
    bool physical(uint32_t i, uint32_t *at, lldb::SBFrame *fr)
    {
        for (uint32_t n = 0; n < 4096; n++, i++) {
            lldb::SBFrame f = th_.GetFrameAtIndex(i);
            if (!f.IsValid())
                return false;
            if (!f.IsInlined()) {
                *at = i;
                *fr = f;
                return true;
            }
        }
        return false;
    }

    // lldb's physical frames of the thread, innermost first, as far as the
    // outermost Python frame's: an eval-loop call's entry frame lies
    // between its native frame's stack pointer and its caller's (before
    // 3.11, PYU_ENTRY_BY_NAME: each Python frame in a call of the eval
    // function of its own, innermost first).
    const std::vector<Native> &natives()
    {
        if (have_natives_)
            return natives_;
        have_natives_ = true;
        std::vector<uint64_t> entry(count());
        if (pyu_pyframes_entries(tg_.s, th_.GetThreadID(), entry.data(),
                                 entry.size()) != 0)
            return natives_; // (the native frames are left as they are)
        size_t left = 0;
        bool by_name = false;
        for (uint64_t a : entry) {
            left += a != 0;
            by_name |= a == PYU_ENTRY_BY_NAME;
        }
        uint32_t i, older_i;
        lldb::SBFrame f, older;
        if (!physical(0, &i, &f))
            return natives_;
        while (left && natives_.size() < 65536) {
            uint64_t lo = f.GetSP(), hi;
            bool more = physical(i + 1, &older_i, &older);
            if (lo == LLDB_INVALID_ADDRESS)
                break;
            hi = more && older.GetSP() != LLDB_INVALID_ADDRESS
                     ? older.GetSP()
                     : lo + LAST_FRAME_SPAN;
            Native n{i, {}};
            const char *fn = by_name ? f.GetFunctionName() : nullptr;
            bool eval = fn && strcmp(fn, "_PyEval_EvalFrameDefault") == 0;
            for (size_t k = 0; k < entry.size(); k++)
                if (entry[k] == PYU_ENTRY_BY_NAME) {
                    if (eval) {
                        n.python.push_back(k);
                        entry[k] = 0;
                        left--;
                        break;
                    }
                } else if (entry[k] && lo <= entry[k] && entry[k] < hi) {
                    n.python.push_back(k);
                    entry[k] = 0;
                    left--;
                }
            natives_.push_back(std::move(n));
            if (!more)
                break;
            i = older_i;
            f = older;
        }
        return natives_;
    }

    // The Python frame for lldb's selected frame `here`.
    size_t index_for(uint32_t here)
    {
        if (here == 0)
            return 0;
        uint32_t phys;
        lldb::SBFrame f;
        if (!physical(here, &phys, &f))
            return count() - 1;
        bool seen = false;
        for (const Native &n : natives()) {
            seen = seen || n.frame == phys;
            if (seen && !n.python.empty())
                return n.python[0];
        }
        return count() - 1;
    }
};

// ------------------------------------------------------------ arguments

std::string strip(const std::string &s)
{
    size_t a = s.find_first_not_of(" \t\r\n\f\v");
    if (a == std::string::npos)
        return "";
    size_t b = s.find_last_not_of(" \t\r\n\f\v");
    return s.substr(a, b - a + 1);
}

// A whole decimal (or, with base 0, also 0x.. / 0..) number.
bool number(const std::string &text, int base, long long *v)
{
    std::string s = strip(text);
    if (s.empty())
        return false;
    char *end;
    errno = 0;
    *v = strtoll(s.c_str(), &end, base);
    return errno == 0 && *end == '\0';
}

// py-list's argument: (first, last), (0, 0) for around the frame's line.
std::pair<int, int> lines_of(const std::string &arg)
{
    if (arg.empty())
        return {0, 0};
    long long a, b;
    size_t comma = arg.find(',');
    if (comma == std::string::npos) {
        if (number(arg, 10, &a) && a > -1000000000 && a < 1000000000)
            return {static_cast<int>(a), static_cast<int>(a) + 10};
    } else if (arg.find(',', comma + 1) == std::string::npos &&
               number(arg.substr(0, comma), 10, &a) &&
               number(arg.substr(comma + 1), 10, &b) && a > -1000000000 &&
               a < 1000000000 && b > -1000000000 && b < 1000000000) {
        return {static_cast<int>(a), static_cast<int>(b)};
    }
    throw Failure{"py-list: '" + arg + "': give a line (py-list LINE) or a "
                  "range (py-list START,END)"};
}

// ------------------------------------------------------------ JSON

// A sink that passes everything on to another and adds "index" to the
// outermost object (pyunwind_lldb.selected_frame()).
struct IndexSink {
    const pyu_json_sink *inner;
    int depth;
    size_t index;
};

int ix_open(void *a, char kind, unsigned layout)
{
    auto *x = static_cast<IndexSink *>(a);
    x->depth++;
    return x->inner->open(x->inner->arg, kind, layout);
}

int ix_close(void *a, char kind)
{
    auto *x = static_cast<IndexSink *>(a);
    if (--x->depth == 0 && kind == '{') {
        if (int rc = x->inner->key(x->inner->arg, "index"))
            return rc;
        if (int rc = x->inner->unsigned_integer(x->inner->arg, x->index))
            return rc;
    }
    return x->inner->close(x->inner->arg, kind);
}

int ix_key(void *a, const char *k)
{
    auto *x = static_cast<IndexSink *>(a);
    return x->inner->key(x->inner->arg, k);
}

int ix_string(void *a, const char *v)
{
    auto *x = static_cast<IndexSink *>(a);
    return x->inner->string(x->inner->arg, v);
}

int ix_integer(void *a, int64_t v)
{
    auto *x = static_cast<IndexSink *>(a);
    return x->inner->integer(x->inner->arg, v);
}

int ix_unsigned(void *a, uint64_t v)
{
    auto *x = static_cast<IndexSink *>(a);
    return x->inner->unsigned_integer(x->inner->arg, v);
}

int ix_boolean(void *a, int v)
{
    auto *x = static_cast<IndexSink *>(a);
    return x->inner->boolean(x->inner->arg, v);
}

int ix_null(void *a)
{
    auto *x = static_cast<IndexSink *>(a);
    return x->inner->null(x->inner->arg);
}

// Frame k of stack as py-dump --locals --json has it, with its "index".
void frame_json(FILE *out, const Stack &stack, size_t k)
{
    pyu_json_sink *text = pyu_json_text_new(out);
    if (!text)
        throw Failure{"py-locals: out of memory"};
    IndexSink x{text, 0, k};
    pyu_json_sink sink{&x,          ix_open,     ix_close,
                       ix_key,      ix_string,   ix_integer,
                       ix_unsigned, ix_boolean,  ix_null};
    int rc = pyu_frame_emit(&stack.thread()->frames[k], 1, &sink);
    pyu_json_text_free(text);
    fputc('\n', out);
    if (rc < 0)
        throw Failure{std::string("py-locals: ") + pyu_strerror(-rc)};
}

// ------------------------------------------------------------ commands

class PyFramesCommand : public lldb::SBCommandPluginInterface {
  public:
    PyFramesCommand(Kind kind, const char *name) : kind_(kind), name_(name)
    {
    }

    bool DoExecute(lldb::SBDebugger debugger, char **command,
                   lldb::SBCommandReturnObject &result) override
    {
        std::string arg;
        for (char **p = command; p && *p; p++)
            arg += (arg.empty() ? "" : " ") + std::string(*p);
        arg = strip(arg);
        char *buf = nullptr;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        if (!out) {
            result.SetError((std::string(name_) + ": out of memory").c_str());
            result.SetStatus(lldb::eReturnStatusFailed);
            return false;
        }
        std::string failed;
        try {
            run(debugger, arg, out);
        } catch (const Failure &f) {
            failed = f.msg;
        } catch (const std::exception &e) { // never an exception into lldb
            failed = std::string(name_) + ": internal error: " + e.what();
        }
        std::string text = pyu_lldb::take(out, buf, len);
        if (!failed.empty()) {
            result.SetError(failed.c_str());
            result.SetStatus(lldb::eReturnStatusFailed);
            return false;
        }
        if (!text.empty())
            result.Printf("%s", text.c_str());
        result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
        return true;
    }

  private:
    Kind kind_;
    const char *name_;

    Failure error(const std::string &msg) const
    {
        return Failure{std::string(name_) + ": " + msg};
    }

    void no_argument(const std::string &arg) const
    {
        if (!arg.empty())
            throw error("takes no argument ('" + arg + "' given)");
    }

    // (its failure is a plain message: Stack's caller names the command)
    static lldb::SBThread selected_thread(Target &tg)
    {
        lldb::SBThread thread = tg.process.GetSelectedThread();
        if (!thread.IsValid() && tg.process.GetNumThreads() == 0)
            throw Failure{"no thread selected: lldb knows no thread of the "
                          "process (a core cut off before its notes?)"};
        if (!thread.IsValid())
            throw Failure{"no thread selected"};
        return thread;
    }

    // Opens the target; the thread's stack is read by the caller.
    void open(lldb::SBDebugger &debugger, Target &tg) const
    {
        std::string why;
        if (!tg.open(debugger, &why))
            throw error(why);
    }

    void run(lldb::SBDebugger &debugger, const std::string &arg, FILE *out)
    {
        Target tg;
        char msg[1024] = "";
        int ex = PYU_EXIT_OK;
        if (kind_ == BT && arg == "--all") {
            open(debugger, tg);
            bt_all(tg, out);
            return;
        }
        switch (kind_) {
        case BT:
        case BT_FULL:
        case LOCALS:
            if (!(kind_ == LOCALS && arg == "--json"))
                no_argument(arg);
            break;
        case PRINT:
            if (arg.empty())
                throw error("give the name of a variable (py-print NAME)");
            break;
        default:
            break;
        }
        long long n = 1;
        bool given = !arg.empty();
        if ((kind_ == UP || kind_ == DOWN) && given && !number(arg, 0, &n))
            throw error("'" + arg + "' is not a number of frames");
        std::pair<int, int> lines{0, 0};
        if (kind_ == LIST)
            lines = lines_of(arg);
        // (a count past any stack: the end of it, without overflowing)
        n = n > (1 << 30) ? (1 << 30) : n < -(1 << 30) ? -(1 << 30) : n;
        open(debugger, tg);
        std::unique_ptr<Stack> stack_of;
        try {
            stack_of.reset(new Stack(tg, selected_thread(tg)));
        } catch (const Failure &f) {
            throw error(f.msg);
        }
        Stack &stack = *stack_of;
        const pyu_thread *t = stack.thread();
        size_t k = stack.selected();
        switch (kind_) {
        case BT:
        case BT_FULL:
            pyu_pyframes_bt(out, tg.d, t, k, kind_ == BT_FULL);
            return;
        case UP:
        case DOWN: {
            long long want = static_cast<long long>(k) +
                             (kind_ == UP ? n : -n);
            long long last = static_cast<long long>(stack.count()) - 1;
            // lldb's own words and ways for up and down at the ends
            if (kind_ == UP && want > last && static_cast<long long>(k) ==
                                                  last)
                throw Failure{"Already at the top of the stack."};
            if (kind_ == DOWN && want < 0 && k == 0)
                throw Failure{"Already at the bottom of the stack."};
            size_t now = static_cast<size_t>(want < 0 ? 0
                                             : want > last ? last : want);
            stack.select(now);
            pyu_pyframes_frame(out, tg.d, t, now);
            return;
        }
        case LIST:
            ex = pyu_pyframes_list(out, tg.d, t, k, lines.first, lines.second,
                                   msg, sizeof msg);
            break;
        case LOCALS:
            if (arg == "--json") {
                frame_json(out, stack, k);
                return;
            }
            ex = pyu_pyframes_locals(out, tg.d, t, k, msg, sizeof msg);
            break;
        case PRINT:
            ex = pyu_pyframes_print(out, tg.s, tg.d, t, k, arg.c_str(), msg,
                                    sizeof msg);
            break;
        }
        if (ex != PYU_EXIT_OK)
            throw Failure{msg};
    }

    // py-bt --all: each thread lldb knows that has Python frames, headed
    // as lldb heads it, its selected frame marked.
    void bt_all(Target &tg, FILE *out)
    {
        bool any = false;
        for (uint32_t i = 0, n = tg.process.GetNumThreads(); i < n; i++) {
            lldb::SBThread thread = tg.process.GetThreadAtIndex(i);
            std::unique_ptr<Stack> stack;
            try {
                stack.reset(new Stack(tg, thread));
            } catch (const Failure &) {
                continue; // (no Python frames)
            }
            fprintf(out, "%sthread #%u, tid = %" PRIu64 "\n", any ? "\n" : "",
                    thread.GetIndexID(), thread.GetThreadID());
            pyu_pyframes_bt(out, tg.d, stack->thread(), stack->selected(),
                            0);
            any = true;
        }
        if (!any)
            throw error("no Python frames in any thread");
    }
};

const struct {
    Kind kind;
    const char *name, *summary, *syntax, *help;
} commands[] = {
    {BT, "py-bt",
     "Print the selected thread's Python frames, innermost first.",
     "py-bt [--all]",
     "As a traceback: \"  File \"x.py\", line 12, in func\" and the source\n"
     "line under it (when the file can be read).  The selected Python frame\n"
     "(py-up, py-down, or lldb's selected frame) is marked: its line starts\n"
     "with \"* \" instead of two spaces.  Works without CPython's debug\n"
     "symbols, live and on core files.  --all: every thread that has Python\n"
     "frames, each headed \"thread #N, tid = TID\".  See also py-bt-full.\n"},
    {BT_FULL, "py-bt-full",
     "Print the selected thread's Python frames with their variables.",
     "py-bt-full",
     "Innermost first, numbered: \"#K File \"x.py\", line 12, in func\" (K: "
     "the\nframe's index among the thread's Python frames, 0 = the "
     "innermost;\npy-up and py-down print the same), the source line, and "
     "the frame's\nvariables as `py-dump --locals` shows them.\n"},
    {UP, "py-up", "Select and print the Python frame that called this one.",
     "py-up [N]",
     "Selects the Python frame N (default 1) older than the selected one\n"
     "among the selected thread's Python frames, and in lldb the native\n"
     "frame of the eval loop that runs it; prints it as \"#K File \"x.py\",\n"
     "line 12, in func\" and its source line.  As with lldb's `up`: at the\n"
     "outermost frame it is an error, past it `py-up N` stops there.\n"},
    {DOWN, "py-down", "Select and print the Python frame called by this one.",
     "py-down [N]",
     "Selects the Python frame N (default 1) newer than the selected one\n"
     "among the selected thread's Python frames, and in lldb the native\n"
     "frame of the eval loop that runs it; prints it as py-up does.  As\n"
     "with lldb's `down`: at the innermost frame it is an error, past it\n"
     "`py-down N` stops there.\n"},
    {LIST, "py-list", "List the source of the selected Python frame.",
     "py-list [START | START,END]",
     "Without an argument: five lines before the frame's line to five after\n"
     "it, the line marked with \">\".\n"
     "    py-list START          lines START to START+10\n"
     "    py-list START,END      lines START to END\n"
     "The file is read as py-dump reads it (below /proc/PID/root first for\n"
     "a live process); a file changed after the process started (or the\n"
     "core was written) is not listed.\n"},
    {LOCALS, "py-locals", "Print the variables of the selected Python frame.",
     "py-locals [--json]",
     "One \"name = value\" a line, the arguments first; values as py-dump\n"
     "--locals shows them (a bounded repr made from memory: no code runs in\n"
     "the inferior).  --json: the frame as a frame of py-dump --locals\n"
     "--json, with its \"index\" among the thread's Python frames (what\n"
     "pyunwind_lldb.selected_frame() returns).\n"},
    {PRINT, "py-print",
     "Print a name, an attribute or an item as the selected Python frame "
     "sees it.",
     "py-print NAME[.ATTR | [INDEX] | ['KEY']]...",
     "NAME is looked up as Python does: the frame's variables, then its\n"
     "globals, then builtins; prints \"local 'NAME' = value\" (or global,\n"
     "builtin), the value as py-dump --locals shows it, or \"'NAME' not\n"
     "found\" as an error.  Then .ATTR reads an object's own dict, a\n"
     "__slots__ entry, a module's or a class's attribute; [INDEX] an item\n"
     "of a list or tuple; ['KEY'] or [INT] an entry of a dict.  All of it\n"
     "is read from memory: nothing runs in the inferior, so a property is\n"
     "not evaluated (it says so).  lldb takes the quotes off arguments:\n"
     "write py-print \"d['key']\", or d[key] (a key that is not an int is\n"
     "taken as a str).\n"},
};

} // namespace

bool pyu_lldb::add_pyframes_commands(lldb::SBCommandInterpreter &interp)
{
    for (const auto &c : commands) {
        auto *impl = new PyFramesCommand(c.kind, c.name);
        // (Enter repeats py-up and py-down, as lldb's up and down; the
        // others read the whole target again: not repeated)
        bool moves = c.kind == UP || c.kind == DOWN;
        lldb::SBCommand cmd = interp.AddCommand(c.name, impl, c.summary,
                                                c.syntax,
                                                moves ? nullptr : "");
        if (!cmd.IsValid())
            return false;
        cmd.SetHelpLong(c.help);
    }
    return true;
}
