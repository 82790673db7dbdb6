/* source_lines_driver: pyu_source_lines over records read from stdin,
 * one a line:
 *
 *     VERSION LINE END_LINE COL END_COL PATH
 *
 * (VERSION: minor * 100 + micro, or the minor version alone; PATH is
 * the rest of the line; END_LINE 0 and COL/END_COL -1 when
 * unknown).  For each it writes what pyu_source_lines writes for that
 * file, then a line holding only "\x1e", so tests/integration/
 * test_source_lines.py can split the output by record.  Exits 1 on a
 * malformed record or a file it cannot read. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The file last read (records come grouped by file). */
typedef struct file {
    char *path; /* owned */
    char *text; /* owned */
    size_t len;
} file;

static int load(file *f, const char *path)
{
    if (f->path && !strcmp(f->path, path))
        return 0;
    free(f->path);
    free(f->text);
    *f = (file){0};
    FILE *in = fopen(path, "rb");
    if (!in)
        return -1;
    size_t cap = 0, n;
    char buf[1 << 16];
    while ((n = fread(buf, 1, sizeof buf, in)) > 0) {
        if (f->len + n > cap) {
            cap = (f->len + n) * 2;
            char *p = realloc(f->text, cap);
            if (!p)
                break;
            f->text = p;
        }
        memcpy(f->text + f->len, buf, n);
        f->len += n;
    }
    int rc = ferror(in) || n > 0 ? -1 : 0;
    fclose(in);
    f->path = strdup(path);
    return rc == 0 && f->path ? 0 : -1;
}

int main(void)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t got;
    file f = {0};
    int rc = 0;
    while ((got = getline(&line, &cap, stdin)) > 0) {
        if (line[got - 1] == '\n')
            line[got - 1] = 0;
        int version, lno, end_line, col, end_col, used = 0;
        if (sscanf(line, "%d %d %d %d %d %n", &version, &lno, &end_line, &col,
                   &end_col, &used) != 5 || !line[used]) {
            fprintf(stderr, "source_lines_driver: bad record: %s\n", line);
            rc = 1;
            break;
        }
        if (load(&f, line + used) < 0) {
            fprintf(stderr, "source_lines_driver: cannot read %s\n",
                    line + used);
            rc = 1;
            break;
        }
        pyu_source_lines(stdout, f.text, f.len, version, lno, end_line, col,
                         end_col);
        fputs("\x1e\n", stdout);
    }
    free(line);
    free(f.path);
    free(f.text);
    return rc;
}
