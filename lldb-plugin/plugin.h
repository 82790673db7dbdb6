// What the lldb plugin's files share: plugin.cpp opens lldb's target for
// pyunwind (and registers py-dump, py-tasks, py-sample, py-profile);
// pyframes.cpp adds the commands over one thread's Python frames (py-bt,
// py-up, py-list...).
#ifndef PYUNWIND_LLDB_PLUGIN_H
#define PYUNWIND_LLDB_PLUGIN_H

#include "command.h"
#include "pyunwind/pyunwind.h"

#include <lldb/API/LLDB.h>

#include <cstdio>
#include <string>

namespace pyu_lldb {

// Opens a session on lldb's selected target (a core, a live process read
// directly, or lldb's memory: see plugin.cpp); on failure returns -1 with
// the one-line message in msg and the exit code in exitcode.  retry: the
// target runs on (a live process), so that a torn dump may be taken again;
// source: how the session reads memory, in a few words.  With o, says in
// it whose descendants --subprocesses reads (pyu_cmd_tree_root).
int open_target(lldb::SBDebugger &debugger, pyu_session **out, bool *retry,
                std::string *source, std::string *msg, int *exitcode,
                pyu_cmd_opts *o = nullptr);

// What a memstream collected, as a string; closes f (accepts NULL) and
// frees buf.
std::string take(FILE *f, char *&buf, size_t &len);

// Registers py-bt, py-bt-full, py-up, py-down, py-list, py-locals and
// py-print (pyframes.cpp); false when lldb refused one.
bool add_pyframes_commands(lldb::SBCommandInterpreter &interp);

} // namespace pyu_lldb

#endif
