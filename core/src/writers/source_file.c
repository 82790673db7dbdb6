/* A target's source file as the writers see it: below the target's root
 * first (a container's file, a sysroot's), never blocking on a FIFO or a
 * device, bounded in size, and whether it changed after the target's
 * source time.  The dump's text and JSON (out_dump.c) and the debugger
 * commands' listings (frontend/pyframes.c) read sources through this. */
#include "../internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SRC_MAX (8u << 20) /* larger files are not read */

/* Opens path below root (when both are absolute-ish and root is set),
 * else path itself: a regular file's descriptor, or -1 with errno. */
static int open_below(const char *root, const char *path)
{
    int fd = -1, err = ENOENT;
    if (path[0] == '/' && root && root[0]) {
        char *full = malloc(strlen(root) + strlen(path) + 1);
        if (!full)
            return -1;
        strcpy(full, root);
        strcat(full, path);
        fd = pyu_open_regular(full);
        err = errno;
        free(full);
    }
    if (fd < 0 && path[0]) {
        fd = pyu_open_regular(path);
        err = errno;
    }
    if (fd < 0)
        errno = err;
    return fd;
}

int pyu_source_load(const char *root, const char *path, const pyu_process *p,
                    bool stat_only, pyu_source *out)
{
    memset(out, 0, sizeof *out);
    out->changed = -1;
    int fd = open_below(root, path);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        out->error = errno ? errno : ENOENT;
        if (fd >= 0)
            close(fd);
        return out->error == ENOMEM ? -PYU_E_NOMEM : -PYU_E_IO;
    }
    /* (a second of slack: the process's start is known to a clock tick,
     * a file's time to its file system's) */
    if (p && p->source_time > 0)
        out->changed = (int64_t)st.st_mtime > p->source_time + 1;
    int rc = 0;
    if (stat_only) {
        out->error = 0;
    } else if (st.st_size > (off_t)SRC_MAX) {
        out->error = EFBIG;
        rc = -PYU_E_IO;
    } else if (!(out->text = malloc((size_t)st.st_size + 1))) {
        out->error = ENOMEM;
        rc = -PYU_E_NOMEM;
    } else {
        size_t got = 0;
        while (got < (size_t)st.st_size) {
            ssize_t k = read(fd, out->text + got, (size_t)st.st_size - got);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                break;
            got += (size_t)k;
        }
        out->len = got;
        out->text[got] = '\0';
    }
    close(fd);
    return rc;
}

int pyu_source_read(const pyu_dump *d, const char *path, pyu_source *out)
{
    return pyu_source_load(d->source_root, path ? path : "", &d->process,
                           false, out);
}

void pyu_source_free(pyu_source *src)
{
    if (!src)
        return;
    free(src->text);
    src->text = NULL;
    src->len = 0;
}
