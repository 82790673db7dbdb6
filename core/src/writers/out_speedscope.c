/* Output: speedscope's file format (https://www.speedscope.app/file-format-
 * schema.json), which speedscope opens (the web app, or `speedscope FILE`
 * from its npm package).
 *
 *   shared.frames   one per profile function: its qualified name, file and
 *                   first line (speedscope merges a function's samples
 *                   whatever line they ran, as a flame graph should)
 *   profiles        one "sampled" profile per thread, named after it (main
 *                   threads first: speedscope shows the first one); when
 *                   the profile holds several processes, the threads of
 *                   each process in turn, each named after its process
 *                   too, "pid N (COMMAND): Thread M (main thread)": each
 *                   of its stacks once, frame indices from the outermost,
 *                   weighted by count x period in nanoseconds (the
 *                   schedule's period; at -r max the run's mean interval;
 *                   unit "none" and the bare counts when that is unknown)
 *   name            "pyunwind: PID N, CPython V, MODE mode" ("N
 *                   processes" for several)
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>

int pyu_profile_write_speedscope(pyu_profile *p, FILE *out)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    const pyu_profile_info *pi = d->info;
    uint64_t period = pyu_profile_period(pi);
    uint64_t unit = period ? period : 1;
    uint32_t *path = NULL;
    size_t cap = 0;
    char name[160];
    pyu_profile_name(name, sizeof name, d);
    fputs("{\"$schema\": \"https://www.speedscope.app/file-format-schema."
          "json\",\n \"exporter\": \"pyunwind\", \"name\": ",
          out);
    pyu_json_str(out, name);
    fputs(", \"activeProfileIndex\": 0,\n \"shared\": {\"frames\": [", out);
    for (size_t i = 0; i < d->nfuncs; i++) {
        const pyu_profile_func *f = &d->funcs[i];
        fputs(i ? ",\n  {\"name\": " : "\n  {\"name\": ", out);
        pyu_json_str(out, f->name);
        if (f->kind == PYU_FUNC_PYTHON) {
            fputs(", \"file\": ", out);
            pyu_json_str(out, f->file);
            fprintf(out, ", \"line\": %d", f->first_line);
        }
        fputc('}', out);
    }
    fputs("]},\n \"profiles\": [", out);
    int rc = 0;
    size_t written = 0;
    /* process by process; main threads first: speedscope opens the
     * first profile */
    bool many = d->nprocesses > 1;
    for (size_t k = 0; k < 2 * d->nthreads * (many ? d->nprocesses : 1) &&
                       rc == 0;
         k++) {
        size_t th = k % d->nthreads, pass = k / d->nthreads;
        const pyu_profile_thread *t = &d->threads[th];
        if ((pass % 2 == 0) != (t->main != 0) || !t->samples ||
            (many && t->process != pass / 2))
            continue;
        uint64_t total = 0;
        for (size_t i = 0; i < d->nstacks; i++)
            if (d->stacks[i].thread == th)
                total += d->stacks[i].count * unit;
        char label[96], named[1200];
        pyu_profile_thread_label(label, sizeof label, t);
        if (many) {
            char process[1100];
            pyu_profile_process_label(process, sizeof process,
                                      &d->processes[t->process]);
            snprintf(named, sizeof named, "%s: %s", process, label);
        }
        fprintf(out, "%s{\"type\": \"sampled\", \"name\": ",
                written++ ? ",\n " : "\n ");
        pyu_json_str(out, many ? named : label);
        fprintf(out,
                ", \"unit\": \"%s\", \"startValue\": 0, \"endValue\": "
                "%" PRIu64 ",\n  \"samples\": [",
                period ? "nanoseconds" : "none", total);
        bool first = true;
        for (size_t i = 0; i < d->nstacks; i++) {
            const pyu_profile_stack *s = &d->stacks[i];
            if (s->thread != th)
                continue;
            long depth = pyu_profile_path(d, s->node, &path, &cap);
            if (depth < 0) {
                rc = -PYU_E_NOMEM;
                break;
            }
            fputs(first ? "\n   [" : ",\n   [", out);
            first = false;
            for (long j = 0; j < depth; j++) /* (each frame's function) */
                fprintf(out, j ? ", %" PRIu32 : "%" PRIu32,
                        d->frames[path[j]].func);
            fputc(']', out);
        }
        fputs("],\n  \"weights\": [", out);
        first = true;
        for (size_t i = 0; i < d->nstacks; i++) {
            const pyu_profile_stack *s = &d->stacks[i];
            if (s->thread != th)
                continue;
            fprintf(out, first ? "%" PRIu64 : ", %" PRIu64, s->count * unit);
            first = false;
        }
        fputs("]}", out);
    }
    fputs("]}\n", out);
    free(path);
    if (rc == 0 && ferror(out))
        rc = -PYU_E_IO;
    return rc;
}
