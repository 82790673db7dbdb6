// pyunwind inside lldb: `plugin load libpyunwind-lldb.so` adds `py-dump`,
// `py-tasks`, `py-sample` and `py-profile` (which pyunwind_lldb.py, the
// module for lldb's Python, drives), and python-gdb.py's py-bt, py-up,
// py-list... (pyframes.cpp).
//
// A thin shim over the SB API: it describes lldb's target to the routine
// both plugins share (frontend/target.h), which decides where the memory
// comes from, and hands the session to the shared command layer
// (frontend/command.h), which parses the options and renders the dump, so
// the output is byte for byte what `pyunwind dump` prints.
//
// - a core file (process plugin "elf-core"): pyunwind's own core reader on
//   SBProcess::GetCoreFile(); if it cannot open the core, lldb's memory;
// - a live process on this machine, debugged by this lldb (the tracer is
//   this lldb or the lldb-server it started): read directly by pid;
// - any other process, such as one behind `gdb-remote` to an lldb-server
//   somewhere: SBProcess::ReadMemory and GetMemoryRegions, and the address
//   of _PyRuntime from the target's module list.
// PYUNWIND_MEMORY=debugger in the environment asks for the last way always.

#include "plugin.h"

#include "command.h"
#include "pyunwind/pyunwind.h"
#include "target.h"
#include "ticks.h"
#include "window.h"

#include <lldb/API/LLDB.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>
#include <unistd.h>

#define PYU_PLUGIN_EXPORT __attribute__((visibility("default")))

namespace lldb {
PYU_PLUGIN_EXPORT bool PluginInitialize(lldb::SBDebugger debugger);
}

using pyu_lldb::open_target;
using pyu_lldb::take;

namespace {

// ------------------------------------------------ memory through the SB API

struct SBMemory {
    lldb::SBProcess process;
    std::vector<pyu_mapping> maps;
    std::vector<std::string> paths;
    int signo = 0;
    uint64_t signal_tid = 0;
};

int sb_read(void *ctx, const pyu_range *r, size_t n)
{
    auto *m = static_cast<SBMemory *>(ctx);
    for (size_t i = 0; i < n; i++) {
        lldb::SBError err;
        size_t got = m->process.ReadMemory(r[i].addr, r[i].buf, r[i].len, err);
        if (err.Fail() || got != r[i].len)
            return -PYU_E_FAULT;
    }
    return 0;
}

int sb_mappings(void *ctx, pyu_mapping_fn fn, void *arg)
{
    auto *m = static_cast<SBMemory *>(ctx);
    for (const pyu_mapping &mp : m->maps)
        if (int rc = fn(arg, &mp))
            return rc;
    return 0;
}

int sb_signal(void *ctx, int *signo, uint64_t *tid)
{
    auto *m = static_cast<SBMemory *>(ctx);
    *signo = m->signo;
    *tid = m->signal_tid;
    return 0;
}

void sb_destroy(void *ctx) { delete static_cast<SBMemory *>(ctx); }

const pyu_memory_ops sb_ops = {
    sb_read, sb_mappings, nullptr, nullptr, nullptr, nullptr, sb_signal,
    sb_destroy, nullptr, nullptr, nullptr, nullptr, nullptr,
};

// The process's memory regions (lldb gives no file offsets: the core
// relies on the runtime address from the module list first).
void fill_mappings(SBMemory *m)
{
    lldb::SBMemoryRegionInfoList list = m->process.GetMemoryRegions();
    uint32_t n = list.GetSize();
    m->paths.reserve(n);
    for (uint32_t i = 0; i < n; i++) {
        lldb::SBMemoryRegionInfo info;
        if (!list.GetMemoryRegionAtIndex(i, info) || !info.IsMapped())
            continue;
        pyu_mapping mp{};
        mp.start = info.GetRegionBase();
        mp.end = info.GetRegionEnd();
        mp.prot = (info.IsReadable() ? PYU_PROT_READ : 0u) |
                  (info.IsWritable() ? PYU_PROT_WRITE : 0u) |
                  (info.IsExecutable() ? PYU_PROT_EXEC : 0u);
        const char *name = info.GetName();
        m->paths.push_back(name && name[0] == '/' ? name : "");
        m->maps.push_back(mp);
    }
    for (size_t i = 0; i < m->maps.size(); i++)
        m->maps[i].path = m->paths[i].empty() ? nullptr : m->paths[i].c_str();
}

// _PyRuntime as lldb knows it: the .PyRuntime section of a module (kept in
// stripped builds), else the _PyRuntime symbol; 0 when neither is known.
uint64_t runtime_hint(lldb::SBTarget &target)
{
    for (uint32_t i = 0, n = target.GetNumModules(); i < n; i++) {
        lldb::SBSection sec = target.GetModuleAtIndex(i).FindSection(".PyRuntime");
        if (sec.IsValid()) {
            lldb::addr_t a = sec.GetLoadAddress(target);
            if (a != LLDB_INVALID_ADDRESS)
                return a;
        }
    }
    for (uint32_t i = 0, n = target.GetNumModules(); i < n; i++) {
        lldb::SBSymbol sym = target.GetModuleAtIndex(i).FindSymbol("_PyRuntime");
        if (sym.IsValid()) {
            lldb::addr_t a = sym.GetStartAddress().GetLoadAddress(target);
            if (a != LLDB_INVALID_ADDRESS)
                return a;
        }
    }
    return 0;
}

// Py_Version (PY_VERSION_HEX) as lldb reads it, for a CPython without
// debug offsets (3.9-3.12): from the process, else from the module's file
// (a core leaves read-only data out); 0 when unknown.
uint64_t version_hint(lldb::SBTarget &target, lldb::SBProcess &process)
{
    for (uint32_t i = 0, n = target.GetNumModules(); i < n; i++) {
        lldb::SBSymbol sym = target.GetModuleAtIndex(i).FindSymbol("Py_Version");
        if (!sym.IsValid())
            continue;
        lldb::SBAddress at = sym.GetStartAddress();
        lldb::addr_t a = at.GetLoadAddress(target);
        uint64_t v = 0;
        lldb::SBError err;
        if (a != LLDB_INVALID_ADDRESS &&
            process.ReadMemory(a, &v, 8, err) == 8 && err.Success() && v)
            return v;
        err.Clear();
        if (target.ReadMemory(at, &v, 8, err) == 8 && err.Success())
            return v;
    }
    // (3.9 and 3.10 have no Py_Version: the file of the module that holds
    // the runtime says it)
    for (uint32_t i = 0, n = target.GetNumModules(); i < n; i++) {
        lldb::SBModule mod = target.GetModuleAtIndex(i);
        if (!mod.FindSection(".PyRuntime").IsValid() &&
            !mod.FindSymbol("_PyRuntime").IsValid())
            continue;
        char path[4096];
        uint64_t v = 0;
        if (mod.GetFileSpec().GetPath(path, sizeof path) > 0 &&
            pyu_file_python_version(path, &v) == 0)
            return v;
    }
    return 0;
}

struct SBTargetRef {
    lldb::SBTarget target;
    lldb::SBProcess process;
};

int open_sb_memory(void *arg, pyu_session *s, bool with_signal)
{
    lldb::SBTarget &target = static_cast<SBTargetRef *>(arg)->target;
    lldb::SBProcess &process = static_cast<SBTargetRef *>(arg)->process;
    auto *m = new SBMemory;
    m->process = process;
    fill_mappings(m);
    if (with_signal) { // a core: the thread the kernel stopped first
        lldb::SBThread t = process.GetThreadAtIndex(0);
        if (t.IsValid() && t.GetStopReason() == lldb::eStopReasonSignal &&
            t.GetStopReasonDataCount() > 0) {
            m->signo = static_cast<int>(t.GetStopReasonDataAtIndex(0));
            m->signal_tid = t.GetThreadID();
        }
    }
    int pid = static_cast<int>(process.GetProcessID());
    pyu_set_version_hint(s, version_hint(target, process));
    return pyu_open_memory(s, &sb_ops, m, pid, runtime_hint(target));
}

// ----------------------------------------------------- where memory is

long status_field(long pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long v = -1;
    size_t len = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            v = strtol(line + len + 1, nullptr, 10);
            break;
        }
    fclose(f);
    return v;
}

// Is pid a process on this machine that this lldb debugs?  lldb on Linux
// debugs through an lldb-server it starts itself; a remote lldb-server
// (even on loopback) was not started by us.
bool debugged_here(long pid)
{
    long tracer = status_field(pid, "TracerPid");
    if (tracer <= 0)
        return false;
    long me = static_cast<long>(getpid());
    return tracer == me || status_field(tracer, "PPid") == me;
}

std::string path_of(lldb::SBFileSpec spec)
{
    char buf[4096];
    if (!spec.IsValid() || spec.GetPath(buf, sizeof buf) == 0)
        return "";
    return buf;
}

} // namespace

int pyu_lldb::open_target(lldb::SBDebugger &debugger, pyu_session **out,
                          bool *retry, std::string *source, std::string *msg,
                          int *exitcode, pyu_cmd_opts *o)
{
    lldb::SBTarget target = debugger.GetSelectedTarget();
    lldb::SBProcess process = target.IsValid() ? target.GetProcess()
                                               : lldb::SBProcess();
    lldb::StateType state = process.IsValid() ? process.GetState()
                                              : lldb::eStateInvalid;
    *exitcode = PYU_EXIT_TARGET;
    if (!process.IsValid() || state == lldb::eStateInvalid ||
        state == lldb::eStateUnloaded || state == lldb::eStateDetached ||
        state == lldb::eStateExited || state == lldb::eStateConnected) {
        *msg = "no process: attach to a Python process (process attach "
               "--pid PID), launch one, or load a core file (target create "
               "PYTHON --core CORE)";
        return -1;
    }
    if (state == lldb::eStateRunning || state == lldb::eStateStepping ||
        state == lldb::eStateLaunching || state == lldb::eStateAttaching) {
        *msg = "the process is running: stop it first (process interrupt)";
        return -1;
    }
    long pid = static_cast<long>(process.GetProcessID());
    const char *plugin = process.GetPluginName();
    const char *want = getenv("PYUNWIND_MEMORY");
    std::string core_path = path_of(process.GetCoreFile());
    std::string exe = path_of(target.GetExecutable());
    SBTargetRef ref{target, process};
    pyu_dbg_target t{};
    t.debugger = "lldb";
    t.conn = plugin ? plugin : "?";
    t.conn_noun = "process";
    t.local_why = "debugged by this lldb";
    t.pid = static_cast<int>(pid);
    if (plugin && strcmp(plugin, "elf-core") == 0)
        t.where = PYU_DBG_CORE;
    else if (pid > 0 && debugged_here(pid))
        t.where = PYU_DBG_LOCAL;
    else
        t.where = PYU_DBG_OTHER;
    t.core = core_path.empty() ? nullptr : core_path.c_str();
    t.exe = exe.empty() ? nullptr : exe.c_str();
    t.debugger_memory = want && strcmp(want, "debugger") == 0;
    t.open_memory = open_sb_memory;
    t.arg = &ref;
    if (o)
        pyu_cmd_tree_root(&t, o);
    char buf[1200], why[1024];
    *exitcode = pyu_cmd_open_target(&t, out, retry, buf, sizeof buf, why,
                                    sizeof why);
    if (*exitcode != PYU_EXIT_OK) {
        *msg = why;
        return -1;
    }
    *source = buf;
    return 0;
}

namespace {

// ------------------------------------------------------------ py-dump

// py-dump --native: the native stack of thread tid as lldb's unwinder
// finds it (the physical frames: an inlined call is part of its frame).
int lldb_native(void *arg, uint64_t tid, pyu_native_fn fn, void *fn_arg,
                char *why, size_t whylen)
{
    lldb::SBProcess &process = *static_cast<lldb::SBProcess *>(arg);
    lldb::SBThread thread = process.GetThreadByID(tid);
    if (!thread.IsValid()) {
        snprintf(why, whylen, "lldb knows no thread %" PRIu64, tid);
        return -PYU_E_STATE;
    }
    lldb::SBTarget target = process.GetTarget();
    uint32_t n = thread.GetNumFrames();
    if (n == 0) {
        snprintf(why, whylen, "lldb's unwinder found no frame");
        return -PYU_E_IO;
    }
    // (lldb shows an inlined call as a frame of its own, first, with the
    // real pc; the frame it is inlined in then shows the call site's
    // address: the physical frame's pc is its group's first)
    uint64_t group_pc = 0;
    bool in_group = false;
    for (uint32_t i = 0, seen = 0; i < n && seen < 1024; i++) {
        lldb::SBFrame fr = thread.GetFrameAtIndex(i);
        if (!fr.IsValid())
            continue;
        if (!in_group) {
            group_pc = fr.GetPC();
            in_group = true;
        }
        if (fr.IsInlined())
            continue;
        in_group = false;
        seen++;
        pyu_native_frame f{group_pc, fr.GetSP(), nullptr, 0, nullptr};
        std::string name, mod;
        lldb::SBSymbol sym = fr.GetSymbol();
        const char *sn = sym.IsValid() ? sym.GetName() : nullptr;
        // (lldb names what has no symbol ___lldb_unnamed_symbolN)
        if (sn && strncmp(sn, "___lldb_unnamed_symbol", 22) != 0) {
            name = sn;
            f.symbol = name.c_str();
            uint64_t start = sym.GetStartAddress().GetLoadAddress(target);
            if (start != LLDB_INVALID_ADDRESS && start <= f.pc)
                f.offset = f.pc - start;
        }
        lldb::SBModule m = fr.GetModule();
        if (m.IsValid() && !(mod = path_of(m.GetFileSpec())).empty())
            f.module = mod.c_str();
        if (int rc = fn(fn_arg, &f))
            return rc;
    }
    return 0;
}

} // namespace

std::string pyu_lldb::take(FILE *f, char *&buf, size_t &len)
{
    if (f)
        fclose(f);
    std::string s = buf ? std::string(buf, len) : std::string();
    free(buf);
    buf = nullptr;
    return s;
}

namespace {

// ------------------------------------------------------------ py-sample

// The profile as the options ask, into *text (or o.output); returns the
// exit code (a message in msg when not OK).
int profile_text(pyu_profile *p, const pyu_cmd_opts &o, std::string *text,
                 std::string *msg)
{
    char *buf = nullptr, why[1024];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    int ex = f ? pyu_cmd_write_profile(p, nullptr, &o, f, why, sizeof why)
               : PYU_EXIT_INTERNAL;
    if (f)
        fclose(f);
    *text = buf ? std::string(buf, len) : std::string();
    free(buf);
    if (ex != PYU_EXIT_OK)
        *msg = f ? why : "out of memory";
    return ex;
}

void interrupt_process(void *arg)
{
    static_cast<lldb::SBProcess *>(arg)->SendAsyncInterrupt();
}

// Why the inferior stopped before the window's end ("" when it did not).
std::string early_stop(lldb::SBProcess &process, bool timed_out)
{
    if (process.GetState() == lldb::eStateExited)
        return "the inferior exited";
    if (timed_out)
        return "";
    lldb::SBThread t = process.GetSelectedThread();
    char buf[128];
    switch (t.IsValid() ? t.GetStopReason() : lldb::eStopReasonInvalid) {
    case lldb::eStopReasonBreakpoint:
        snprintf(buf, sizeof buf, "stopped at breakpoint %" PRIu64,
                 t.GetStopReasonDataAtIndex(0));
        return buf;
    case lldb::eStopReasonSignal: {
        int sig = static_cast<int>(t.GetStopReasonDataAtIndex(0));
        const char *name = process.GetUnixSignals().GetSignalAsCString(sig);
        snprintf(buf, sizeof buf, "stopped by %s", name ? name : "a signal");
        return buf;
    }
    default:
        return "the inferior stopped";
    }
}

// lldb's part of the ticks (ticks.h).
struct LLDBTicks {
    lldb::SBProcess process;
    std::string why;
};

void ticks_stop(void *arg)
{
    static_cast<LLDBTicks *>(arg)->process.SendAsyncInterrupt();
}

const char *ticks_run(void *arg)
{
    static_cast<LLDBTicks *>(arg)->process.Continue();
    return nullptr;
}

const char *ticks_why(void *arg, bool fired)
{
    auto *k = static_cast<LLDBTicks *>(arg);
    if (k->process.GetState() == lldb::eStateStopped && fired)
        return nullptr;
    k->why = early_stop(k->process, false);
    return k->why.c_str();
}

// Over a process this lldb does not debug here (gdb-remote to an
// lldb-server): pyunwind cannot read it directly, so the window is a
// series of stops (frontend/ticks.c).  At each tick the process is
// stopped, one sample is taken through lldb's memory, and the process
// runs until the next tick, when the ticks' thread interrupts it.  As
// fast as the round trips allow.  *early: why the ticks ended early.
int sample_ticks(lldb::SBDebugger &debugger, const pyu_cmd_opts &o,
                 std::string *notes, std::string *early, pyu_profile *p,
                 std::string *msg)
{
    pyu_session *s = nullptr;
    bool retry = false;
    std::string source;
    int ex = PYU_EXIT_OK;
    if (open_target(debugger, &s, &retry, &source, msg, &ex) < 0)
        return ex;
    LLDBTicks k{debugger.GetSelectedTarget().GetProcess(), ""};
    pyu_cmd_ticks t{};
    t.debugger = "lldb";
    t.duration = o.duration > 0 ? o.duration : 5.0;
    t.again = 0.002; // (an interrupt sent before the process runs is lost)
    t.stop = ticks_stop;
    t.run = ticks_run;
    t.why = ticks_why;
    t.arg = &k;
    char *buf = nullptr, why[1024];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        pyu_session_free(s);
        *msg = "out of memory";
        return PYU_EXIT_INTERNAL;
    }
    bool was_async = debugger.GetAsync();
    debugger.SetAsync(false); // Continue() returns once it stopped again
    ex = pyu_cmd_ticks_run(s, &o, &t, p, f, why, sizeof why);
    debugger.SetAsync(was_async);
    pyu_session_free(s);
    *notes = take(f, buf, len);
    *early = t.early;
    if (ex != PYU_EXIT_OK)
        *msg = why;
    return ex;
}

// Runs the inferior for a sampling window, sampling it into p; the summary
// (after a line saying why the window ended early, if it did) goes to
// notes.  On failure the message is in msg and the exit code is returned.
// py-sample and `py-profile sample` both run their windows here.
// *streamed: the window wrote the profile itself (--format raw -o FILE,
// streamed to FILE while it sampled), nothing is left to write.
int run_window(lldb::SBDebugger &debugger, const pyu_cmd_opts &o,
               pyu_profile *p, std::string *notes, std::string *msg,
               bool *streamed)
{
    *streamed = false;
    lldb::SBTarget target = debugger.GetSelectedTarget();
    lldb::SBProcess process = target.IsValid() ? target.GetProcess()
                                               : lldb::SBProcess();
    lldb::StateType state = process.IsValid() ? process.GetState()
                                              : lldb::eStateInvalid;
    const char *plugin = process.IsValid() ? process.GetPluginName() : "";
    long pid = process.IsValid() ? static_cast<long>(process.GetProcessID())
                                 : 0;
    if (plugin && strcmp(plugin, "elf-core") == 0) {
        *msg = "a core file holds one moment of the process, there is "
               "nothing to sample: py-dump reads it";
        return PYU_EXIT_USAGE;
    }
    if (state != lldb::eStateStopped || pid <= 0) {
        *msg = state == lldb::eStateRunning
                   ? "the process is running: stop it first (process "
                     "interrupt)"
                   : "no process: launch or attach to a Python process to "
                     "sample it";
        return state == lldb::eStateRunning ? PYU_EXIT_USAGE
                                            : PYU_EXIT_TARGET;
    }
    lldb::SBThread thread = process.GetSelectedThread();
    lldb::tid_t tid = thread.IsValid() ? thread.GetThreadID() : 0;
    uint32_t frame = thread.IsValid() ? thread.GetSelectedFrame().GetFrameID()
                                      : 0;
    char why[1024];
    int ex;
    std::string early;
    if (!debugged_here(pid) || (o.sample_flags & PYU_SAMPLE_BLOCKING)) {
        /* (--blocking: lldb stops the process for each sample) */
        ex = sample_ticks(debugger, o, notes, &early, p, msg);
        if (ex != PYU_EXIT_OK)
            return ex;
    } else {
        pyu_cmd_window *w = nullptr;
        ex = pyu_cmd_window_start(static_cast<int>(pid), &o, p,
                                  interrupt_process, &process, &w, why,
                                  sizeof why);
        if (ex != PYU_EXIT_OK) {
            *msg = why;
            return ex;
        }
        bool was_async = debugger.GetAsync();
        debugger.SetAsync(false); // Continue() returns once it stopped again
        process.Continue();
        debugger.SetAsync(was_async);
        bool timed_out = false;
        ex = pyu_cmd_window_end(w, &timed_out, why, sizeof why);
        early = early_stop(process, timed_out);
        *notes = pyu_cmd_window_diag(w);
        *streamed = pyu_cmd_window_streamed(w);
        pyu_cmd_window_free(w);
        if (ex != PYU_EXIT_OK) {
            *msg = why;
            return ex;
        }
    }
    if (!early.empty())
        *notes = "py-sample: the window ended early: " + early + "\n" + *notes;
    if (process.GetState() == lldb::eStateStopped && tid) {
        process.SetSelectedThreadByID(tid);
        process.GetSelectedThread().SetSelectedFrame(frame);
    }
    return PYU_EXIT_OK;
}

// py-sample: a window, and its profile as the options ask into *text (or
// o.output); on failure the message is in msg and the exit code is
// returned.
int sample_window(lldb::SBDebugger &debugger, const pyu_cmd_opts &o,
                  std::string *text, std::string *notes, std::string *msg)
{
    pyu_profile *p = pyu_profile_new();
    if (!p) {
        *msg = "out of memory";
        return PYU_EXIT_INTERNAL;
    }
    bool streamed;
    int ex = run_window(debugger, o, p, notes, msg, &streamed);
    if (ex == PYU_EXIT_OK && !streamed)
        ex = profile_text(p, o, text, msg);
    pyu_profile_free(p);
    return ex;
}

// Parses a command's arguments (args[0]: its name) as the CLI would.
int parse_args(enum pyu_cmd_kind kind, std::vector<std::string> &args,
               pyu_cmd_opts *o, char *msg, size_t msglen)
{
    std::vector<char *> argv;
    for (std::string &a : args)
        argv.push_back(&a[0]);
    argv.push_back(nullptr);
    int ex = pyu_cmd_parse(o, kind, PYU_CMD_DEBUGGER,
                           static_cast<int>(args.size()), argv.data(), msg,
                           msglen);
    if (ex == PYU_EXIT_OK && *o->format_warning) // (as the CLI says it)
        fprintf(stderr, "pyunwind: warning: %s\n", o->format_warning);
    return ex;
}

class Command : public lldb::SBCommandPluginInterface {
  public:
    explicit Command(enum pyu_cmd_kind kind) : kind_(kind) {}

    bool DoExecute(lldb::SBDebugger debugger, char **command,
                   lldb::SBCommandReturnObject &result) override
    {
        std::vector<std::string> args{name()};
        for (char **p = command; p && *p; p++)
            args.push_back(*p);
        pyu_cmd_opts o;
        char msg[1024] = "";
        int ex = parse_args(kind_, args, &o, msg, sizeof msg);
        if (ex != PYU_EXIT_OK)
            return fail(result, msg);
        if (o.help) {
            result.Printf("%s", pyu_cmd_help(kind_, PYU_CMD_DEBUGGER));
            result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
            return true;
        }

        if (kind_ == PYU_CMD_SAMPLE) {
            std::string text, notes, why;
            ex = sample_window(debugger, o, &text, &notes, &why);
            if (!notes.empty())
                result.Printf("%s", notes.c_str());
            if (ex != PYU_EXIT_OK)
                return fail(result, why.c_str());
            if (!text.empty())
                result.Printf("%s", text.c_str());
            result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
            return true;
        }

        pyu_session *s = nullptr;
        bool retry = false;
        std::string source, why;
        if (open_target(debugger, &s, &retry, &source, &why, &ex, &o) < 0)
            return fail(result, why.c_str());
        lldb::SBProcess process = debugger.GetSelectedTarget().GetProcess();
        pyu_set_native_frames(s, lldb_native, &process);

        char *obuf = nullptr, *dbuf = nullptr;
        size_t olen = 0, dlen = 0;
        FILE *out = open_memstream(&obuf, &olen);
        FILE *diag = open_memstream(&dbuf, &dlen);
        if (!out || !diag) {
            take(out, obuf, olen);
            take(diag, dbuf, dlen);
            pyu_session_free(s);
            return fail(result, "out of memory");
        }
        ex = pyu_cmd_run(s, &o, retry, source.c_str(), out, diag, msg,
                         sizeof msg);
        pyu_session_free(s);
        std::string text = take(out, obuf, olen);
        std::string notes = take(diag, dbuf, dlen);
        if (!notes.empty())
            result.Printf("%s", notes.c_str());
        if (ex == PYU_EXIT_CYCLE && !text.empty()) /* the cycle, then why */
            result.Printf("%s", text.c_str());
        if (ex != PYU_EXIT_OK && ex != PYU_EXIT_PARTIAL)
            return fail(result, msg);
        if (!text.empty())
            result.Printf("%s", text.c_str());
        if (ex == PYU_EXIT_PARTIAL) /* how many stacks are incomplete, why */
            result.Printf("pyunwind: warning: %s\n", msg);
        result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
        return true;
    }

    const char *name() const
    {
        return kind_ == PYU_CMD_TASKS    ? "py-tasks"
               : kind_ == PYU_CMD_SAMPLE ? "py-sample"
                                         : "py-dump";
    }

  private:
    enum pyu_cmd_kind kind_;

    bool fail(lldb::SBCommandReturnObject &result, const char *msg) const
    {
        std::string line = std::string(name()) + ": " + msg;
        result.SetError(line.c_str());
        result.SetStatus(lldb::eReturnStatusFailed);
        return false;
    }
};

// ------------------------------------------------------------ py-profile

// Profiles fed one sample at a time while the process is stopped, for
// scripts (a breakpoint callback: "which Python code calls write()"), or
// by a sampling window:
//   py-profile add [--thread TID | --all]   one sample (default: the
//                                           selected thread)
//   py-profile sample [py-sample's options] a window, as py-sample
//   py-profile write [--format F] [-o FILE] [--sort KEY] [--limit N]
//   py-profile close                        lets go of the target
//   py-profile clear                        starts over
//   py-profile formats                      the formats, one a line
// Each takes --name NAME: every name is a profile of its own (each
// pyunwind_lldb.Profile has one); without it, the commands' own profile.
// The session a profile's `add` reads through is opened on its first
// `add` and again when the process changes.

// One profile, and the session and sampler its `add` reads through.
struct Slot {
    pyu_profile *profile = nullptr;
    pyu_session *session = nullptr;
    pyu_sampler *sampler = nullptr;
    lldb::pid_t pid = LLDB_INVALID_PROCESS_ID;
    uint64_t thread = 0;

    Slot() = default;
    Slot(const Slot &) = delete;
    Slot &operator=(const Slot &) = delete;
    ~Slot()
    {
        drop();
        pyu_profile_free(profile);
    }

    // Lets go of the target; the profile stays.
    void drop()
    {
        pyu_sampler_free(sampler);
        sampler = nullptr;
        pyu_session_free(session);
        session = nullptr;
        pid = LLDB_INVALID_PROCESS_ID;
    }
};

class ProfileCommand : public lldb::SBCommandPluginInterface {
  public:
    bool DoExecute(lldb::SBDebugger debugger, char **command,
                   lldb::SBCommandReturnObject &result) override
    {
        std::vector<std::string> args;
        for (char **p = command; p && *p; p++)
            args.push_back(*p);
        if (args.empty() || args[0] == "-h" || args[0] == "--help") {
            result.Printf("%s", help);
            result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
            return true;
        }
        const std::string &sub = args[0];
        if (sub == "formats") { // (one a line: name, binary, keeps
                                // instructions, summary; tab-separated)
            size_t n;
            const pyu_format *f = pyu_profile_formats(&n);
            for (size_t i = 0; i < n; i++)
                result.Printf("%s\t%d\t%d\t%s\n", f[i].name, f[i].binary,
                              f[i].keeps_instructions, f[i].summary);
            result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
            return true;
        }
        if (sub != "add" && sub != "sample" && sub != "write" &&
            sub != "close" && sub != "clear")
            return fail(result, ("unknown subcommand '" + sub +
                                 "' (add, sample, write, close, clear or "
                                 "formats; see py-profile --help)")
                                    .c_str());
        std::string name, why;
        if (!take_name(args, &name, &why))
            return fail(result, why.c_str());
        if (sub == "close" || sub == "clear") {
            if (args.size() > 1)
                return fail(result, ("unexpected argument '" + args[1] +
                                     "' (see py-profile --help)")
                                        .c_str());
            auto it = slots_.find(name);
            if (it != slots_.end()) {
                if (sub == "clear")
                    slots_.erase(it);
                else
                    it->second.drop();
            }
            result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
            return true;
        }
        Slot &slot = slots_[name];
        if (!slot.profile && !(slot.profile = pyu_profile_new()))
            return fail(result, "out of memory");
        if (sub == "add")
            return add(debugger, slot, args, result);
        if (sub == "sample")
            return sample(debugger, slot, args, result);
        return write(slot, args, result);
    }

    static constexpr const char *help =
        "usage: py-profile add [--name NAME] [--thread TID | --all]\n"
        "       py-profile sample [--name NAME] [-d SECONDS] [-r RATE] "
        "[--mode MODE] ... (py-sample's options)\n"
        "       py-profile write [--name NAME] "
        "[--format F] [-o FILE] "
        "[--sort self|total|name] [--limit N]\n"
        "       py-profile close [--name NAME]\n"
        "       py-profile clear [--name NAME]\n"
        "       py-profile formats\n"
        "\n"
        "A profile fed one sample at a time while the process is stopped,\n"
        "say from a breakpoint's callback: `add` reads the Python stack of\n"
        "the selected thread (or TID, or every thread) into it, `write`\n"
        "writes it as py-sample would, `clear` starts over.  `sample` runs\n"
        "a window as py-sample does and keeps its profile instead (what it\n"
        "held before is dropped); with -o it also writes it there.  `close`\n"
        "lets go of the target `add` reads (the profile stays).  `formats`\n"
        "lists the formats, one a line: name, binary (1/0), keeps\n"
        "instructions (1/0) and a summary, separated by tabs.\n"
        "\n"
        "--name NAME: every name is a profile of its own (pyunwind_lldb.py's\n"
        "Profile objects each use one); without it, the one profile of\n"
        "these commands.\n";

  private:
    std::map<std::string, Slot> slots_;

    // The session's message for a failure, else the code's.
    static const char *why_not(const pyu_session *s, int rc)
    {
        const char *m = pyu_errmsg(s);
        return m && *m ? m : pyu_strerror(-rc);
    }

    // Takes --name NAME (or --name=NAME) out of args[1...].
    static bool take_name(std::vector<std::string> &args, std::string *name,
                          std::string *msg)
    {
        for (size_t i = 1; i < args.size();) {
            if (args[i] == "--name" && i + 1 < args.size()) {
                *name = args[i + 1];
                args.erase(args.begin() + static_cast<long>(i),
                           args.begin() + static_cast<long>(i) + 2);
            } else if (args[i] == "--name") {
                *msg = "--name takes the name of a profile";
                return false;
            } else if (args[i].compare(0, 7, "--name=") == 0) {
                *name = args[i].substr(7);
                args.erase(args.begin() + static_cast<long>(i));
            } else {
                i++;
                continue;
            }
            if (name->empty()) {
                *msg = "--name takes the name of a profile";
                return false;
            }
        }
        return true;
    }

    bool add(lldb::SBDebugger &debugger, Slot &slot,
             const std::vector<std::string> &args,
             lldb::SBCommandReturnObject &result)
    {
        lldb::SBProcess process = debugger.GetSelectedTarget().GetProcess();
        uint64_t thread = 0;
        bool all = false;
        for (size_t i = 1; i < args.size(); i++) {
            if (args[i] == "--all") {
                all = true;
            } else if (args[i] == "--thread" && i + 1 < args.size()) {
                thread = strtoull(args[++i].c_str(), nullptr, 0);
                if (!thread)
                    return fail(result, "--thread takes a native thread id "
                                        "or a Python ident");
            } else {
                return fail(result, ("unexpected argument '" + args[i] +
                                     "' (see py-profile --help)")
                                        .c_str());
            }
        }
        if (!all && !thread && process.IsValid())
            thread = process.GetSelectedThread().GetThreadID();
        if (!process.IsValid() || process.GetProcessID() != slot.pid)
            slot.drop();
        if (!slot.session) {
            bool retry = false;
            std::string source, why;
            int ex;
            if (open_target(debugger, &slot.session, &retry, &source, &why,
                            &ex) < 0)
                return fail(result, why.c_str());
            slot.pid = process.GetProcessID();
        }
        if (!slot.sampler || thread != slot.thread) {
            pyu_sampler_free(slot.sampler);
            slot.sampler = nullptr;
            pyu_sampler_opts o = {PYU_MODE_WALL, 0, thread};
            int rc = pyu_sampler_new(slot.session, &o, slot.profile,
                                     &slot.sampler);
            if (rc < 0)
                return fail(result, why_not(slot.session, rc));
            slot.thread = thread;
        }
        int n = pyu_sampler_take(slot.sampler);
        if (n < 0)
            return fail(result, why_not(slot.session, n));
        result.Printf("%d\n", n);
        result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
        return true;
    }

    // A subcommand's arguments after its name (args[0]) parsed as
    // py-sample's options into o, whose strings (-o) point into *full;
    // false (the failure in result) when they are not options.
    bool sample_options(const std::vector<std::string> &args,
                        std::vector<std::string> *full, pyu_cmd_opts *o,
                        lldb::SBCommandReturnObject &result)
    {
        *full = {"py-sample"};
        for (size_t i = 1; i < args.size(); i++)
            full->push_back(args[i]);
        char msg[1024] = "";
        if (parse_args(PYU_CMD_SAMPLE, *full, o, msg, sizeof msg) !=
            PYU_EXIT_OK)
            return fail(result, msg);
        return true;
    }

    // A window as py-sample runs it (the same code), into a new profile
    // that replaces the slot's; the summary is printed as py-sample prints
    // it.
    bool sample(lldb::SBDebugger &debugger, Slot &slot,
                const std::vector<std::string> &args,
                lldb::SBCommandReturnObject &result)
    {
        std::vector<std::string> full;
        pyu_cmd_opts o;
        if (!sample_options(args, &full, &o, result))
            return false;
        if (o.help) {
            result.Printf("%s", help);
            result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
            return true;
        }
        pyu_profile *p = pyu_profile_new();
        if (!p)
            return fail(result, "out of memory");
        std::string notes, why;
        bool streamed;
        int ex = run_window(debugger, o, p, &notes, &why, &streamed);
        if (!notes.empty())
            result.Printf("%s", notes.c_str());
        if (ex != PYU_EXIT_OK) {
            pyu_profile_free(p);
            return fail(result, why.c_str());
        }
        slot.drop(); // (its sampler fed the profile replaced here)
        pyu_profile_free(slot.profile);
        slot.profile = p;
        if (o.output && !streamed) {
            std::string text;
            if (profile_text(p, o, &text, &why) != PYU_EXIT_OK)
                return fail(result, why.c_str());
        }
        result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
        return true;
    }

    bool write(Slot &slot, const std::vector<std::string> &args,
               lldb::SBCommandReturnObject &result)
    {
        // the options of py-sample that say how to write
        std::vector<std::string> full;
        pyu_cmd_opts o;
        if (!sample_options(args, &full, &o, result))
            return false;
        std::string text, why;
        if (profile_text(slot.profile, o, &text, &why) != PYU_EXIT_OK)
            return fail(result, why.c_str());
        if (!text.empty())
            result.Printf("%s", text.c_str());
        result.SetStatus(lldb::eReturnStatusSuccessFinishResult);
        return true;
    }

    bool fail(lldb::SBCommandReturnObject &result, const char *msg)
    {
        std::string line = std::string("py-profile: ") + msg;
        result.SetError(line.c_str());
        result.SetStatus(lldb::eReturnStatusFailed);
        return false;
    }
};

} // namespace

bool lldb::PluginInitialize(lldb::SBDebugger debugger)
{
    // A plugin must run in the liblldb it was built against: another major
    // version's liblldb would be loaded next to the running one.
    const char *running = lldb::SBDebugger::GetVersionString();
    char want[32];
    snprintf(want, sizeof want, "lldb version %d.", PYU_LLDB_MAJOR);
    if (!running || !strstr(running, want)) {
        fprintf(stderr, "pyunwind: this plugin was built for lldb %d; this "
                "is %s: rebuild pyunwind against this lldb's liblldb\n",
                PYU_LLDB_MAJOR, running ? running : "an unknown lldb");
        return false;
    }
    lldb::SBCommandInterpreter interp = debugger.GetCommandInterpreter();
    static const struct {
        enum pyu_cmd_kind kind;
        const char *summary, *syntax;
    } commands[] = {
        {PYU_CMD_DUMP,
         "Print the Python stack of every thread of the debugged CPython.",
         "py-dump [--json] [-o FILE] [--thread TID] [--no-source] [--async] "
         "[--locals] [--native | --native-last] [--subprocesses] "
         "[--verbose]"},
        {PYU_CMD_TASKS,
         "Print the asyncio tasks of the debugged CPython (3.14+).",
         "py-tasks [--tree] [--json] [-o FILE] [--subprocesses] "
         "[--verbose]"},
        {PYU_CMD_SAMPLE,
         "Sample the Python stacks of the debugged CPython for a while.",
         "py-sample [-d SECONDS] [-r RATE] [--mode MODE] [--format FORMAT] "
         "[-o FILE] ..."},
    };
    auto *profile = new ProfileCommand();
    lldb::SBCommand pc = interp.AddCommand(
        "py-profile", profile,
        "Feed a profile one sample at a time (for breakpoint callbacks), "
        "or by a sampling window.",
        "py-profile add [--thread TID | --all] | sample [OPTIONS] | "
        "write [--format F] [-o FILE] | close | clear; each [--name NAME]");
    if (!pc.IsValid())
        return false;
    pc.SetHelpLong(ProfileCommand::help);
    for (const auto &c : commands) {
        auto *impl = new Command(c.kind);
        lldb::SBCommand cmd =
            interp.AddCommand(impl->name(), impl, c.summary, c.syntax);
        if (!cmd.IsValid())
            return false;
        // lldb prints the summary and the syntax itself: the long help
        // starts after the shared text's first two lines
        const char *help = pyu_cmd_help(c.kind, PYU_CMD_DEBUGGER);
        for (int line = 0; line < 2 && strchr(help, '\n'); line++)
            help = strchr(help, '\n') + 1;
        cmd.SetHelpLong(help);
    }
    return pyu_lldb::add_pyframes_commands(interp);
}
