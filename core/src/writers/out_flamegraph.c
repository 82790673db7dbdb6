/* Output: a flame graph, one self-contained HTML file: the page
 * (core/web/flamegraph.css and .js, embedded at build time by
 * cmake/embed.cmake) and the profile as JSON in a <script
 * type="application/json"> element.  Nothing is fetched when it is
 * viewed.
 *
 * A differential page (pyu_profile_write_flamegraph_diff) carries two,
 * {"base": DATA, "new": DATA}: the new profile is drawn, each frame
 * coloured by how its share of all samples changed from the baseline.
 *
 * The data: {"info": {pid, python, mode, interval_ns, duration_ns,
 * samples, failed, missed}, "functions": [[name, file, first_line, kind]],
 * "frames": [[function, line]] (with --opcodes [function, line, instr,
 * op]), "nodes": [[parent, frame]] (node 0 the
 * empty stack), "threads": [[native_id, thread_id, main, label,
 * process]], "stacks": [[thread, node, count, status]], "processes":
 * [[pid, command, python, free_threaded, start_ns, end_ns, exited]]}: the
 * profile's own tables (status: PYU_STATUS_* bits; a thread's process an
 * index into processes).  The page shows the processes when there are
 * several.
 */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

extern const char pyu_web_flamegraph_js[];
extern const char pyu_web_flamegraph_css[];

static void put_html(FILE *out, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '&': fputs("&amp;", out); break;
        case '"': fputs("&quot;", out); break;
        default: putc(*s, out);
        }
    }
}

/* The profile's tables as JSON (see the top). */
static void put_data(FILE *out, const pyu_profile_data *d)
{
    const pyu_profile_info *pi = d->info;
    fprintf(out,
            "{\"info\": {\"pid\": %d, \"python\": ", pi->process.pid);
    pyu_json_str(out, pi->process.python);
    fprintf(out,
            ", \"mode\": %d, \"interval_ns\": %" PRIu64
            ", \"duration_ns\": %" PRIu64 ", \"samples\": %" PRIu64
            ", \"failed\": %" PRIu64 ", \"missed\": %" PRIu64 "},\n",
            pi->mode, pi->interval_ns, pi->duration_ns, pi->samples,
            pi->failed, pi->missed);
    fputs("\"functions\": [", out);
    for (size_t i = 0; i < d->nfuncs; i++) {
        const pyu_profile_func *f = &d->funcs[i];
        fputs(i ? ",\n[" : "\n[", out);
        pyu_json_str(out, f->name);
        fputs(", ", out);
        pyu_json_str(out, f->file);
        fprintf(out, ", %d, %d]", f->first_line, f->kind);
    }
    fputs("],\n\"frames\": [", out);
    for (size_t i = 0; i < d->nframes; i++) {
        const pyu_profile_frame *f = &d->frames[i];
        fprintf(out, "%s[%" PRIu32 ", %d", i ? "," : "", f->func, f->line);
        if (f->instr >= 0) {
            fprintf(out, ", %d, ", f->instr);
            pyu_json_str(out, f->op);
        }
        fputc(']', out);
    }
    fputs("],\n\"nodes\": [", out);
    for (size_t i = 0; i < d->nnodes; i++)
        fprintf(out, "%s[%" PRIu32 ", %" PRIu32 "]", i ? "," : "",
                d->nodes[i].parent, d->nodes[i].frame);
    fputs("],\n\"threads\": [", out);
    for (size_t i = 0; i < d->nthreads; i++) {
        char label[96];
        pyu_profile_thread_label(label, sizeof label, &d->threads[i]);
        fprintf(out, "%s[%" PRIu64 ", %" PRIu64 ", %d, ", i ? "," : "",
                d->threads[i].native_thread_id, d->threads[i].thread_id,
                d->threads[i].main != 0);
        pyu_json_str(out, label);
        fprintf(out, ", %" PRIu32 "]", d->threads[i].process);
    }
    fputs("],\n\"stacks\": [", out);
    for (size_t i = 0; i < d->nstacks; i++)
        fprintf(out, "%s[%" PRIu32 ", %" PRIu32 ", %" PRIu64 ", %u]",
                i ? "," : "", d->stacks[i].thread, d->stacks[i].node,
                d->stacks[i].count, d->stacks[i].status);
    fputs("],\n\"processes\": [", out);
    for (size_t i = 0; i < d->nprocesses; i++) {
        const pyu_profile_process *pr = &d->processes[i];
        fprintf(out, "%s\n[%d, ", i ? "," : "", pr->pid);
        pyu_json_str(out, pr->command);
        fputs(", ", out);
        pyu_json_str(out, pr->python);
        fprintf(out, ", %d, %" PRIu64 ", %" PRIu64 ", %d]",
                pr->free_threaded != 0, pr->start_ns, pr->end_ns,
                pr->exited != 0);
    }
    fputs("]}", out);
}

int pyu_profile_write_flamegraph(pyu_profile *p, FILE *out)
{
    return pyu_profile_write_flamegraph_diff(p, NULL, out);
}

int pyu_profile_write_flamegraph_diff(pyu_profile *p, pyu_profile *base,
                                      FILE *out)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    char *data = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&data, &len);
    if (!m)
        return -PYU_E_NOMEM;
    if (base) {
        fputs("{\"base\": ", m);
        put_data(m, pyu_profile_get(base));
        fputs(",\n\"new\": ", m);
    }
    put_data(m, d);
    if (base)
        fputc('}', m);
    if (fclose(m) != 0) {
        free(data);
        return -PYU_E_NOMEM;
    }
    char title[256];
    pyu_profile_name(title, sizeof title, d);
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "\n<title>",
          out);
    put_html(out, title);
    fprintf(out, "</title>\n<style>\n%s</style>\n</head><body>\n",
            pyu_web_flamegraph_css);
    fputs("<header><h1 id=\"title\"></h1><div id=\"summary\"></div>\n"
          "<div id=\"processes\" hidden></div>\n"
          "<div id=\"hotspots\"></div>\n"
          "<div id=\"controls\"><label id=\"process-box\" hidden>Process "
          "<select id=\"process\"></select></label>\n"
          "<label>Thread <select id=\"thread\">"
          "</select></label>\n"
          "<label>Status <select id=\"status\"><option value=\"0\">any"
          "</option><option value=\"1\">holding the GIL</option>"
          "<option value=\"2\">waiting for the GIL</option>"
          "<option value=\"4\">on a CPU</option>"
          "<option value=\"8\">in the garbage collector</option>"
          "<option value=\"16\">handling an exception</option>"
          "</select></label>\n"
          "<input type=\"search\" id=\"search\" placeholder=\"search "
          "functions ( / )\"> <span id=\"matched\"></span>\n"
          "<label><input type=\"checkbox\" id=\"inverted\"> inverted "
          "(i)</label>\n"
          "<label><input type=\"checkbox\" id=\"files\"> file paths"
          "</label>\n"
          "<label><input type=\"checkbox\" id=\"modules\"> modules"
          "</label>\n"
          "<label><input type=\"checkbox\" id=\"lines\"> lines (l)"
          "</label>\n"
          "<label>Theme <select id=\"theme\"><option value=\"\">system"
          "</option><option value=\"light\">light</option>"
          "<option value=\"dark\">dark</option></select></label>\n"
          "<button id=\"svg\">SVG</button>"
          "<a id=\"svg-link\" download=\"flamegraph.svg\" hidden></a>\n"
          "<label id=\"elided-box\" hidden><input type=\"checkbox\" "
          "id=\"elided\"> elided (stacks of the baseline that vanished)"
          "</label></div></header>\n"
          "<div id=\"crumbs\"></div><div id=\"info\"></div>"
          "<div id=\"graph\"></div><div id=\"elided-list\" hidden></div>\n"
          "<div id=\"legend\">Click a frame to zoom into it (Esc, ↑ or "
          "the links above zoom out; ↓ the heaviest callee, ← → the "
          "neighbours); hover for its samples; w: the clicked function's "
          "callers and callees (a sandwich)."
          "<span style=\"background:hsl(30,80%,62%)\"></span>Python"
          "<span style=\"background:hsl(0,0%,70%)\"></span>&lt;GC&gt;"
          "<span style=\"background:hsl(210,60%,75%)\"></span>&lt;native&gt;"
          "<span style=\"background:#e040fb\"></span>search match</div>\n"
          "<script type=\"application/json\" id=\"pyu-data\">",
          out);
    pyu_html_json(out, data, len);
    free(data);
    fprintf(out, "</script>\n<script>\n%s</script>\n</body></html>\n",
            pyu_web_flamegraph_js);
    return ferror(out) ? -PYU_E_IO : 0;
}
