/* Rendering asyncio tasks: a table like `python -m asyncio ps`, a tree
 * like `python -m asyncio pstree`, and JSON (docs/json.md). */
#include "../internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TREE_DEPTH 256
#define MAX_TREE_NODES (1u << 22)
#define MAX_TREE_LINES (1u << 22)

/* ------------------------------------------------------------ lookups */

typedef struct index_entry {
    uint64_t id;
    size_t at;
} index_entry;

static int cmp_entry(const void *a, const void *b)
{
    uint64_t x = ((const index_entry *)a)->id, y = ((const index_entry *)b)->id;
    return x < y ? -1 : x > y;
}

/* An index of the tasks by id, or NULL when out of memory. */
static index_entry *make_index(const pyu_tasks *t)
{
    index_entry *ix = malloc((t->ntasks ? t->ntasks : 1) * sizeof *ix);
    if (!ix)
        return NULL;
    for (size_t i = 0; i < t->ntasks; i++)
        ix[i] = (index_entry){t->tasks[i].id, i};
    qsort(ix, t->ntasks, sizeof *ix, cmp_entry);
    return ix;
}

static const pyu_task *lookup(const pyu_tasks *t, const index_entry *ix,
                              uint64_t id)
{
    index_entry key = {id, 0};
    const index_entry *e = bsearch(&key, ix, t->ntasks, sizeof *ix, cmp_entry);
    return e ? &t->tasks[e->at] : NULL;
}

/* What a limit cut from some tasks: one line each, after the table or the
 * tree. */
static void cut_notes(FILE *out, const pyu_tasks *t)
{
    for (size_t i = 0; i < t->ntasks; i++) {
        const pyu_task *task = &t->tasks[i];
        if (task->truncated & PYU_TASK_TRUNC_STACK)
            fprintf(out, "[task '%s' (0x%" PRIx64 "): its coroutine stack is "
                    "deeper than %d frames; the innermost are not shown]\n",
                    task->name, task->id, PYU_MAX_CORO_DEPTH);
        if (task->truncated & PYU_TASK_TRUNC_AWAITERS)
            fprintf(out, "[task '%s' (0x%" PRIx64 "): more than %u tasks "
                    "await it; the others are not shown]\n",
                    task->name, task->id, PYU_MAX_AWAITERS);
    }
}

/* ------------------------------------------------------------- the table */

/* Characters (code points) of a UTF-8 string, as Python counts them. */
static int chars(const char *s)
{
    int n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p & 0xC0) != 0x80;
    return n;
}

static void pad(FILE *out, int n, int width)
{
    for (; n < width; n++)
        fputc(' ', out);
}

/* Writes s padded with spaces to `width` characters. */
static void padded(FILE *out, const char *s, int width)
{
    fputs(s, out);
    pad(out, chars(s), width);
}

/* "a -> b -> c": the functions of a coroutine stack, innermost first. */
static void chain(FILE *out, const pyu_task *task, int width)
{
    int n = 0;
    for (size_t i = 0; i < task->nstack; i++) {
        const char *f = task->stack[i].function;
        if (i) {
            fputs(" -> ", out);
            n += 4;
        }
        fputs(f, out);
        n += chars(f);
    }
    pad(out, n, width);
}

static void row(FILE *out, const pyu_task *task, const pyu_task *awaiter,
                uint64_t awaiter_id)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, task->native_thread_id);
    padded(out, buf, 10);
    snprintf(buf, sizeof buf, " 0x%" PRIx64, task->id);
    padded(out, buf, 21);
    fputc(' ', out);
    padded(out, task->name, 20);
    fputc(' ', out);
    chain(out, task, 50);
    fputc(' ', out);
    if (awaiter)
        chain(out, awaiter, 50);
    else
        padded(out, "", 50);
    fputc(' ', out);
    padded(out, awaiter ? awaiter->name : awaiter_id ? "Unknown" : "", 15);
    snprintf(buf, sizeof buf, " 0x%" PRIx64, awaiter_id);
    padded(out, buf, 16);
    fputc('\n', out);
}

int pyu_tasks_write_table(const pyu_tasks *t, FILE *out)
{
    index_entry *ix = make_index(t);
    if (!ix)
        return -PYU_E_NOMEM;
    static const struct {
        const char *title;
        int width;
    } cols[] = {{"tid", 10}, {"task id", 20}, {"task name", 20},
                {"coroutine stack", 50}, {"awaiter chain", 50},
                {"awaiter name", 15}, {"awaiter id", 15}};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
        if (i)
            fputc(' ', out);
        padded(out, cols[i].title, cols[i].width);
    }
    fputc('\n', out);
    for (int i = 0; i < 180; i++)
        fputc('-', out);
    fputc('\n', out);
    if (!t->ntasks && !t->truncated)
        fputs("(no asyncio tasks)\n", out);
    for (size_t i = 0; i < t->ntasks; i++) {
        const pyu_task *task = &t->tasks[i];
        if (!task->nawaited_by)
            row(out, task, NULL, 0);
        for (size_t k = 0; k < task->nawaited_by; k++)
            row(out, task, lookup(t, ix, task->awaited_by[k]),
                task->awaited_by[k]);
    }
    cut_notes(out, t);
    if (t->truncated)
        fputs("[more tasks not shown: the task lists are longer than the "
              "limit, loop, or are unreadable past this point]\n", out);
    free(ix);
    return ferror(out) ? -PYU_E_IO : 0;
}

/* -------------------------------------------------------------- the tree */

/* Tree nodes: one per task, plus coroutine frames under them. */
typedef struct node {
    const pyu_task *task;   /* a task node, or NULL */
    const pyu_frame *frame; /* a coroutine frame node */
    size_t first, last, next; /* children and sibling, as index + 1 */
} node;

typedef struct tree {
    node *n;
    size_t len, cap;
    bool nomem;
} tree;

static size_t new_node(tree *tr, const pyu_task *task, const pyu_frame *f)
{
    if (tr->len == tr->cap) {
        size_t ncap = tr->cap ? tr->cap * 2 : 256;
        node *n = ncap <= MAX_TREE_NODES ? realloc(tr->n, ncap * sizeof *n)
                                         : NULL;
        if (!n) {
            tr->nomem = true;
            return 0;
        }
        tr->n = n;
        tr->cap = ncap;
    }
    tr->n[tr->len] = (node){task, f, 0, 0, 0};
    return ++tr->len;
}

static void append_child(tree *tr, size_t parent, size_t child)
{
    node *p = &tr->n[parent - 1];
    if (p->last)
        tr->n[p->last - 1].next = child;
    else
        p->first = child;
    p->last = child;
}

static bool same_frame(const pyu_frame *a, const pyu_frame *b)
{
    return a->line == b->line && strcmp(a->function, b->function) == 0 &&
           strcmp(a->file, b->file) == 0;
}

/* The child of parent for frame f, made when missing. */
static size_t frame_child(tree *tr, size_t parent, const pyu_frame *f)
{
    for (size_t c = tr->n[parent - 1].first; c; c = tr->n[c - 1].next)
        if (tr->n[c - 1].frame && same_frame(tr->n[c - 1].frame, f))
            return c;
    size_t c = new_node(tr, NULL, f);
    if (c)
        append_child(tr, parent, c);
    return c;
}

/* Under the task node, its coroutine frames outermost first; returns the
 * innermost one (or the task node when it has no frames). */
static size_t frames_under(tree *tr, size_t tnode, const pyu_task *task)
{
    size_t cur = tnode;
    for (size_t i = task->nstack; i-- > 0 && cur;)
        cur = frame_child(tr, cur, &task->stack[i]);
    return cur;
}

static void print_label(FILE *out, const node *n)
{
    if (n->task) {
        fputs("(T) ", out);
        fputs(n->task->name, out);
    } else if (n->frame->line > 0) { /* pstree's blank coroutine mark */
        fprintf(out, " %s %s:%d", n->frame->function, n->frame->file,
                n->frame->line);
    } else {
        fprintf(out, " %s %s", n->frame->function, n->frame->file);
    }
    fputc('\n', out);
}

static void prefix(FILE *out, const bool *lastp, int depth)
{
    for (int i = 0; i < depth; i++)
        fputs(lastp[i] ? "    " : "\u2502   ", out);
}

/* Depth-first, without recursion: cur[d] is the node printed at depth d,
 * lastp[d] whether it is its parent's last child (the prefix of the levels
 * below is "    " then, "│   " otherwise).  *budget bounds the lines of
 * a graph whose shared subtrees repeat. */
static void render(FILE *out, const tree *tr, size_t root, size_t *budget)
{
    size_t cur[MAX_TREE_DEPTH];
    bool lastp[MAX_TREE_DEPTH];
    int depth = 0;
    cur[0] = root;
    lastp[0] = true;
    for (;;) {
        size_t nd = cur[depth];
        if (*budget == 0) {
            fputs("[the rest of the tree is not shown: too many lines]\n",
                  out);
            return;
        }
        (*budget)--;
        prefix(out, lastp, depth);
        fputs(lastp[depth] ? "\u2514\u2500\u2500 " : "\u251c\u2500\u2500 ", out);
        print_label(out, &tr->n[nd - 1]);
        size_t child = tr->n[nd - 1].first;
        if (child && depth + 1 < MAX_TREE_DEPTH) {
            cur[++depth] = child;
            lastp[depth] = tr->n[child - 1].next == 0;
            continue;
        }
        if (child) {
            prefix(out, lastp, depth + 1);
            fputs("\u2514\u2500\u2500 [deeper levels not shown]\n", out);
        }
        /* the next sibling here, or of the nearest ancestor that has one */
        while (depth > 0 && !tr->n[cur[depth] - 1].next)
            depth--;
        if (depth == 0)
            return;
        cur[depth] = tr->n[cur[depth] - 1].next;
        lastp[depth] = tr->n[cur[depth] - 1].next == 0;
    }
}

/* Finds a cycle in the await graph (awaiter -> awaited), iteratively.
 * Returns the number of tasks on it written to cyc (first repeated at the
 * end), 0 when there is none. */
static size_t find_cycle(const pyu_tasks *t, size_t **children,
                         const size_t *nchildren, size_t *cyc, size_t cyc_cap)
{
    uint8_t *color = calloc(t->ntasks ? t->ntasks : 1, 1);
    size_t *path = malloc((t->ntasks + 1) * sizeof *path);
    size_t *pos = malloc((t->ntasks + 1) * sizeof *pos);
    size_t found = 0;
    if (!color || !path || !pos)
        goto out;
    for (size_t s = 0; s < t->ntasks && !found; s++) {
        if (color[s])
            continue;
        size_t depth = 0;
        path[depth] = s;
        pos[depth] = 0;
        color[s] = 1;
        while (depth != (size_t)-1 && !found) {
            size_t v = path[depth];
            if (pos[depth] < nchildren[v]) {
                size_t w = children[v][pos[depth]++];
                if (color[w] == 0) {
                    color[w] = 1;
                    path[++depth] = w;
                    pos[depth] = 0;
                } else if (color[w] == 1) {
                    size_t i = 0;
                    while (path[i] != w)
                        i++;
                    for (; i <= depth && found < cyc_cap - 1; i++)
                        cyc[found++] = path[i];
                    cyc[found++] = w;
                }
            } else {
                color[v] = 2;
                depth--;
            }
        }
    }
out:
    free(color);
    free(path);
    free(pos);
    return found;
}

int pyu_tasks_write_tree(const pyu_tasks *t, FILE *out, int *has_cycle)
{
    int rc = 0;
    if (!t->ntasks && !t->truncated) {
        if (has_cycle)
            *has_cycle = 0;
        return fputs("(no asyncio tasks)\n", out) < 0 ? -PYU_E_IO : 0;
    }
    index_entry *ix = make_index(t);
    size_t **children = calloc(t->ntasks ? t->ntasks : 1, sizeof *children);
    size_t *nchildren = calloc(t->ntasks ? t->ntasks : 1, sizeof *nchildren);
    bool *awaited = calloc(t->ntasks ? t->ntasks : 1, sizeof *awaited);
    size_t *tnode = calloc(t->ntasks ? t->ntasks : 1, sizeof *tnode);
    tree tr = {0};
    if (has_cycle)
        *has_cycle = 0;
    if (!ix || !children || !nchildren || !awaited || !tnode) {
        rc = -PYU_E_NOMEM;
        goto out;
    }
    /* edges awaiter -> awaited, between tasks that were read */
    for (size_t i = 0; i < t->ntasks; i++) {
        for (size_t k = 0; k < t->tasks[i].nawaited_by; k++) {
            const pyu_task *a = lookup(t, ix, t->tasks[i].awaited_by[k]);
            if (!a)
                continue;
            size_t ai = (size_t)(a - t->tasks);
            size_t *c = realloc(children[ai], (nchildren[ai] + 1) * sizeof *c);
            if (!c) {
                rc = -PYU_E_NOMEM;
                goto out;
            }
            children[ai] = c;
            c[nchildren[ai]++] = i;
            awaited[i] = true;
        }
    }
    size_t cyc[64];
    size_t ncyc = find_cycle(t, children, nchildren, cyc, 64);
    if (ncyc) {
        if (has_cycle)
            *has_cycle = 1;
        fputs("the await graph has a cycle, so there is no tree:\n  ", out);
        for (size_t i = 0; i < ncyc; i++)
            fprintf(out, "%s%s (0x%" PRIx64 ")", i ? " \u2192 " : "",
                    t->tasks[cyc[i]].name, t->tasks[cyc[i]].id);
        fputc('\n', out);
        goto out;
    }
    for (size_t i = 0; i < t->ntasks && !tr.nomem; i++)
        tnode[i] = new_node(&tr, &t->tasks[i], NULL);
    /* a child task hangs under the awaiter's innermost frame; a task that
     * awaits no other task shows its own frames */
    for (size_t ai = 0; ai < t->ntasks && !tr.nomem; ai++) {
        if (!nchildren[ai]) {
            frames_under(&tr, tnode[ai], &t->tasks[ai]);
            continue;
        }
        size_t at = frames_under(&tr, tnode[ai], &t->tasks[ai]);
        for (size_t k = 0; at && k < nchildren[ai]; k++) {
            /* the same task node under several parents: link a copy that
             * shares its children */
            size_t child = tnode[children[ai][k]];
            size_t link = new_node(&tr, tr.n[child - 1].task, NULL);
            if (!link)
                break;
            append_child(&tr, at, link);
            tr.n[link - 1].first = child; /* marker: resolved below */
        }
    }
    if (tr.nomem) {
        rc = -PYU_E_NOMEM;
        goto out;
    }
    /* links point at the task node: give them its children */
    for (size_t i = t->ntasks; i < tr.len; i++) {
        node *n = &tr.n[i];
        if (n->task && n->first) {
            const node *target = &tr.n[n->first - 1];
            n->first = target->first;
            n->last = target->last;
        }
    }
    size_t budget = MAX_TREE_LINES;
    for (size_t i = 0; i < t->ntasks && budget; i++)
        if (!awaited[i])
            render(out, &tr, tnode[i], &budget);
    cut_notes(out, t);
    if (t->truncated)
        fputs("[more tasks not shown: the task lists are longer than the "
              "limit, loop, or are unreadable past this point]\n", out);
out:
    for (size_t i = 0; children && i < t->ntasks; i++)
        free(children[i]);
    free(children);
    free(nchildren);
    free(awaited);
    free(tnode);
    free(tr.n);
    free(ix);
    if (rc == 0 && ferror(out))
        rc = -PYU_E_IO;
    return rc;
}

/* ------------------------------------------------------------------ JSON */

static void jo_stack(pyu_json_out *o, const char *key, const pyu_task *task)
{
    pyu_jo_open(o, key, '[', 0);
    for (size_t k = 0; task && k < task->nstack && o->rc == 0; k++)
        pyu_jo_frame(o, &task->stack[k]);
    pyu_jo_close(o, '[');
}

static void jo_task(pyu_json_out *o, const pyu_tasks *t,
                    const index_entry *ix, const pyu_task *task)
{
    pyu_jo_open(o, NULL, '{', 0);
    pyu_jo_uint(o, "id", task->id);
    pyu_jo_str(o, "name", task->name);
    pyu_jo_int(o, "interpreter_id", task->interpreter_id);
    pyu_jo_uint(o, "thread_id", task->thread_id);
    pyu_jo_uint(o, "native_thread_id", task->native_thread_id);
    pyu_jo_bool(o, "running", task->running);
    jo_stack(o, "stack", task);
    pyu_jo_open(o, "awaited_by", '[', 0);
    for (size_t k = 0; k < task->nawaited_by && o->rc == 0; k++) {
        pyu_jo_open(o, NULL, '{', 0);
        pyu_jo_uint(o, "id", task->awaited_by[k]);
        jo_stack(o, "stack", lookup(t, ix, task->awaited_by[k]));
        pyu_jo_close(o, '{');
    }
    pyu_jo_close(o, '[');
    pyu_jo_bool(o, "stack_truncated", task->truncated & PYU_TASK_TRUNC_STACK);
    pyu_jo_bool(o, "awaiters_truncated",
                task->truncated & PYU_TASK_TRUNC_AWAITERS);
    pyu_jo_str(o, "error", task->error);
    pyu_jo_close(o, '{');
}

int pyu_tasks_emit(const pyu_tasks *t, const pyu_json_sink *sink)
{
    index_entry *ix = make_index(t);
    if (!ix)
        return -PYU_E_NOMEM;
    pyu_json_out o = {sink, 0};
    pyu_jo_open(&o, NULL, '{', 0);
    pyu_jo_process_head(&o, &t->process);
    pyu_jo_open(&o, "tasks", '[', PYU_JSON_ROWS | PYU_JSON_ROWS_END);
    for (size_t i = 0; i < t->ntasks && o.rc == 0; i++)
        jo_task(&o, t, ix, &t->tasks[i]);
    pyu_jo_close(&o, '[');
    pyu_jo_bool(&o, "truncated", t->truncated);
    pyu_jo_process_signal(&o, &t->process);
    pyu_jo_close(&o, '{');
    free(ix);
    return o.rc;
}

int pyu_tasks_write_json(const pyu_tasks *t, FILE *out)
{
    pyu_json_text jt;
    pyu_json_sink sink = pyu_json_text_sink(&jt, out);
    int rc = pyu_tasks_emit(t, &sink);
    return rc < 0 ? rc : ferror(out) ? -PYU_E_IO : 0;
}
