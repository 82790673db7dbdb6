/* Output: the whole profile as JSON (docs/json.md, "Profiles"). */
#include "../internal.h"

#include <inttypes.h>

static const char *kind_name(int kind)
{
    return kind == PYU_FUNC_GC        ? "gc"
           : kind == PYU_FUNC_NATIVE  ? "native"
           : kind == PYU_FUNC_UNKNOWN ? "unknown"
                                      : "python";
}

int pyu_profile_write_json(pyu_profile *p, FILE *out)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    const pyu_profile_info *in = d->info;
    fprintf(out, "{\"pid\": %d, \"python\": ", in->process.pid);
    pyu_json_str(out, in->process.python);
    fprintf(out,
            ", \"mode\": \"%s\", \"interval_ns\": %" PRIu64
            ", \"start_ns\": %" PRIu64 ", \"duration_ns\": %" PRIu64
            ", \"samples\": %" PRIu64 ", \"failed\": %" PRIu64
            ", \"missed\": %" PRIu64 ", \"total\": %" PRIu64,
            pyu_profile_mode_name(in->mode),
            in->interval_ns, in->start_ns, in->duration_ns, in->samples,
            in->failed, in->missed, d->total);
    fputs(",\n \"functions\": [", out);
    for (size_t i = 0; i < d->nfuncs; i++) {
        const pyu_profile_func *f = &d->funcs[i];
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", out);
        pyu_json_str(out, f->name);
        fputs(", \"file\": ", out);
        pyu_json_str(out, f->file);
        fprintf(out, ", \"first_line\": %d, \"kind\": \"%s\"}", f->first_line,
                kind_name(f->kind));
    }
    fputs("],\n \"frames\": [", out);
    for (size_t i = 0; i < d->nframes; i++) {
        const pyu_profile_frame *f = &d->frames[i];
        fprintf(out, "%s{\"function\": %" PRIu32 ", \"line\": %d",
                i ? ", " : "", f->func, f->line);
        if (f->instr >= 0) {
            fprintf(out, ", \"instr\": %d, \"op\": ", f->instr);
            pyu_json_str(out, f->op);
            fputs(", \"base\": ", out);
            pyu_json_str(out, f->base);
        }
        fputc('}', out);
    }
    fputs("],\n \"processes\": [", out);
    for (size_t i = 0; i < d->nprocesses; i++) {
        const pyu_profile_process *pr = &d->processes[i];
        fprintf(out, "%s\n  {\"pid\": %d, \"command\": ", i ? "," : "",
                pr->pid);
        pyu_json_str(out, pr->command);
        fputs(", \"python\": ", out);
        pyu_json_str(out, pr->python);
        fprintf(out, ", \"free_threaded\": %s, \"start_ns\": %" PRIu64,
                pr->free_threaded ? "true" : "false", pr->start_ns);
        if (pr->exited)
            fprintf(out, ", \"end_ns\": %" PRIu64 "}", pr->end_ns);
        else
            fputs(", \"end_ns\": null}", out);
    }
    fputs("],\n \"threads\": [", out);
    for (size_t i = 0; i < d->nthreads; i++) {
        const pyu_profile_thread *t = &d->threads[i];
        fprintf(out,
                "%s\n  {\"thread_id\": %" PRIu64
                ", \"native_thread_id\": %" PRIu64
                ", \"interpreter_id\": %" PRId64
                ", \"main\": %s, \"name\": ",
                i ? "," : "", t->thread_id, t->native_thread_id,
                t->interpreter_id, t->main ? "true" : "false");
        pyu_json_str(out, t->name ? t->name : "");
        fprintf(out,
                ", \"process\": %" PRIu32 ", \"samples\": %" PRIu64
                ", \"status\": {",
                t->process, t->samples);
        bool first = true;
        for (unsigned b = 0; b < 8; b++) {
            const char *name = pyu_status_name(1u << b, 0);
            if (!name)
                continue;
            fprintf(out, "%s\"%s\": %" PRIu64, first ? "" : ", ", name,
                    t->status[b]);
            first = false;
        }
        fputs("}}", out);
    }
    fputs("],\n \"stacks\": [", out);
    for (size_t i = 0; i < d->nstacks; i++) {
        const pyu_profile_stack *st = &d->stacks[i];
        fprintf(out, "%s\n  {\"thread\": %" PRIu32 ", \"count\": %" PRIu64
                     ", \"status\": [",
                i ? "," : "", st->thread, st->count);
        bool first = true;
        for (unsigned b = 0; b < 8; b++) {
            const char *name = pyu_status_name(1u << b, 0);
            if (name && (st->status & (1u << b))) {
                fprintf(out, "%s\"%s\"", first ? "" : ", ", name);
                first = false;
            }
        }
        fputs("], \"frames\": [", out);
        /* outermost first: the path from the root, reversed */
        uint32_t depth = d->nodes[st->node].depth;
        for (uint32_t k = 0; k < depth; k++) {
            uint32_t nd = st->node;
            for (uint32_t up = depth - 1 - k; up; up--)
                nd = d->nodes[nd].parent;
            fprintf(out, "%s%" PRIu32, k ? ", " : "", d->nodes[nd].frame);
        }
        fputs("]}", out);
    }
    fputs("]}\n", out);
    return ferror(out) ? -PYU_E_IO : 0;
}
