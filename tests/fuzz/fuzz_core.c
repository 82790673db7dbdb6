/* Fuzz harness: the ELF core reader (program headers, notes, NT_FILE,
 * NT_PRSTATUS, truncation) and the compressed-core decoders, then the
 * walk and the asyncio walker over what it reads: the input is a core
 * file (seeds: real kernel cores shrunk to the pages pyunwind reads, and
 * compressed copies, made by tests/fuzz/make-seeds). */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pyunwind/pyunwind.h>

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    setenv("TMPDIR", "/dev/shm", 1); /* (decompressed copies) */
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t len)
{
    int fd = memfd_create("core", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    if (write(fd, in, len) != (ssize_t)len) {
        close(fd);
        return 0;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    pyu_session *s = pyu_session_new();
    if (s && pyu_open_core(s, path, NULL, NULL) == 0) {
        pyu_dump *d = NULL;
        pyu_dump_take(s, PYU_WALK_ASYNC, &d);
        pyu_dump_free(d);
        d = NULL;
        pyu_dump_take(s, 0, &d);
        pyu_dump_free(d);
        pyu_tasks *t = NULL;
        pyu_tasks_take(s, &t);
        pyu_tasks_free(t);
    }
    pyu_session_free(s);
    close(fd);
    return 0;
}
