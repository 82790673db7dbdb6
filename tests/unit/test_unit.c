/* Unit tests of the core's decoders, the core-file reader, the walk (over a
 * synthetic runtime) and the error record, and of the front end's tick
 * schedule (frontend/ticks.c), and the JSON described to a sink.
 *
 *   test_unit                          run every unit test
 *   test_unit lines FIRST HEX NUNITS   print the line of each code unit of
 *                                      a location table (used by the
 *                                      integration tests, which compare it
 *                                      with CPython's own co_lines())
 */
#include "internal.h"
#include "sampler/sampling.h"
#include "follow.h"
#include "ticks.h"

#include <elf.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int failures, checks;

#define CHECK(cond)                                                          \
    do {                                                                     \
        checks++;                                                            \
        if (!(cond)) {                                                       \
            failures++;                                                      \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,           \
                    __LINE__, #cond);                                        \
        }                                                                    \
    } while (0)

#define CHECK_EQ(a, b)                                                       \
    do {                                                                     \
        long long a_ = (long long)(a), b_ = (long long)(b);                  \
        checks++;                                                            \
        if (a_ != b_) {                                                      \
            failures++;                                                      \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n",      \
                    __FILE__, __LINE__, #a, a_, #b, b_);                     \
        }                                                                    \
    } while (0)

/* --------------------------------------------------------- location table */

static void test_linetable(void)
{
    /* One entry of every form, first line 10. */
    static const uint8_t t[] = {
        0xE9, 0x02,             /* 13 no columns, 2 units, +1   -> 11 */
        0xDA, 0x05, 0x07,       /* 11 one line, 3 units, +1     -> 12 */
        0xF8,                   /* 15 no location, 1 unit       -> 0  */
        0xF0, 0x07, 0x00, 0x01, 0x01, /* 14 long, 1 unit, -3    -> 9  */
        0x99, 0x00,             /* 3 short form, 2 units, +0    -> 9  */
        0xE8, 0x48, 0x03,       /* 13, 1 unit, +100 (2 chunks)  -> 109 */
    };
    static const int want[] = {11, 11, 12, 12, 12, 0, 9, 9, 9, 109};
    for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK_EQ(pyu_linetable_line(t, sizeof t, 10, i), want[i]);
    CHECK_EQ(pyu_linetable_line(t, sizeof t, 10, 10), -1); /* past the end */
    static const uint8_t bad_start[] = {0x12, 0x80};
    CHECK_EQ(pyu_linetable_line(bad_start, sizeof bad_start, 1, 0), -1);
    static const uint8_t cut_varint[] = {0xE8, 0x48};  /* continues, ends */
    CHECK_EQ(pyu_linetable_line(cut_varint, sizeof cut_varint, 1, 0), -1);
    static const uint8_t cut_long[] = {0xF0, 0x02};     /* long form, cut */
    CHECK_EQ(pyu_linetable_line(cut_long, sizeof cut_long, 1, 0), -1);
    static const uint8_t cut_short[] = {0x99};          /* extra byte gone */
    CHECK_EQ(pyu_linetable_line(cut_short, sizeof cut_short, 1, 0), -1);
    CHECK_EQ(pyu_linetable_line(NULL, 0, 1, 0), -1);
    /* an endless varint is rejected, not looped over */
    uint8_t endless[64];
    endless[0] = 0xE8;
    memset(endless + 1, 0x7F, sizeof endless - 1);
    CHECK_EQ(pyu_linetable_line(endless, sizeof endless, 1, 0), -1);
}

/* ----------------------------------------------------------------- strings */

static void test_strings(void)
{
    char out[64];
    static const uint8_t latin1[] = {'g', 'r', 0xFC, 0xDF, 'e'};
    CHECK_EQ(pyu_ucs_to_utf8(latin1, 5, 1, out, sizeof out), 7);
    CHECK(strcmp(out, "gr\xc3\xbc\xc3\x9f" "e") == 0);

    static const uint16_t cjk[] = {0x6328, 0x62F6, '_', 0x00FC};
    CHECK_EQ(pyu_ucs_to_utf8(cjk, 4, 2, out, sizeof out), 9);
    CHECK(strcmp(out, "\xe6\x8c\xa8\xe6\x8b\xb6_\xc3\xbc") == 0);

    static const uint32_t wide[] = {'a', 0x1F600, 0xDCFF, 0xD800, 0x110000};
    long n = pyu_ucs_to_utf8(wide, 5, 4, out, sizeof out);
    /* emoji; surrogateescape'd byte 0xFF; lone surrogate and an
     * out-of-range code point become U+FFFD */
    CHECK(n == 1 + 4 + 1 + 3 + 3);
    CHECK(memcmp(out, "a\xf0\x9f\x98\x80\xff\xef\xbf\xbd\xef\xbf\xbd", 12) == 0);

    CHECK_EQ(pyu_ucs_to_utf8(latin1, 5, 3, out, sizeof out), -1); /* kind */
    CHECK_EQ(pyu_ucs_to_utf8(latin1, 5, 1, out, 6), -1);      /* no room */
    CHECK_EQ(pyu_ucs_to_utf8(latin1, 0, 1, out, sizeof out), 0);
    CHECK(out[0] == '\0');
}

/* -------------------------------------------------------------- core file */

static char tmpdir[] = "/tmp/pyu-unit-XXXXXX";

static void put_note(uint8_t *buf, size_t *off, uint32_t type,
                     const void *desc, uint32_t len)
{
    Elf64_Nhdr nh = {5, len, type};
    memcpy(buf + *off, &nh, sizeof nh);
    *off += sizeof nh;
    memcpy(buf + *off, "CORE\0\0\0", 8);
    *off += 8;
    memcpy(buf + *off, desc, len);
    *off += (len + 3) & ~3u;
}

/* Writes a core: segment A [0x10000, 0x12000) with only its first page in
 * the core (the second comes from the backing file), segment B
 * [0x12000, 0x13000) right after it, an NT_FILE note naming the backing
 * file for [0x10000, 0x12000), and NT_PRPSINFO with pid 4242.  Returns the
 * core's size; cut > 0 truncates the file by that many bytes. */
static size_t write_core(const char *path, const char *backing, size_t cut,
                         uint16_t type)
{
    static uint8_t buf[3 * 4096 + 4096];
    memset(buf, 0, sizeof buf);
    Elf64_Ehdr eh = {0};
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = type;
    eh.e_machine = EM_X86_64;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof eh;
    eh.e_ehsize = sizeof eh;
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 3;
    memcpy(buf, &eh, sizeof eh);

    /* notes at 0x200 */
    uint8_t notes[1024];
    size_t noff = 0;
    uint8_t nt_file[24 + 16 + 64] = {0};
    uint64_t f[5] = {1, 4096, 0x10000, 0x12000, 0};
    memcpy(nt_file, f, sizeof f);
    size_t blen = strlen(backing) + 1;
    memcpy(nt_file + sizeof f, backing, blen);
    put_note(notes, &noff, NT_FILE, nt_file, (uint32_t)(sizeof f + blen));
    uint8_t psinfo[136] = {0};
    int32_t pid = 4242;
    memcpy(psinfo + 24, &pid, 4);
    put_note(notes, &noff, NT_PRPSINFO, psinfo, sizeof psinfo);
    memcpy(buf + 0x200, notes, noff);

    Elf64_Phdr ph[3] = {
        {PT_NOTE, 0, 0x200, 0, 0, noff, 0, 4},
        {PT_LOAD, PF_R | PF_W, 0x1000, 0x10000, 0, 0x1000, 0x2000, 4096},
        {PT_LOAD, PF_R, 0x2000, 0x12000, 0, 0x1000, 0x1000, 4096},
    };
    memcpy(buf + sizeof eh, ph, sizeof ph);
    for (size_t i = 0x1000; i < 0x3000; i++)
        buf[i] = (uint8_t)(i < 0x2000 ? 'A' : 'B');
    size_t size = 0x3000 - cut;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, buf, size) != (ssize_t)size) {
        perror(path);
        exit(2);
    }
    close(fd);
    return size;
}

static void test_core_reader(void)
{
    char core[256], backing[256], other[256];
    pyu_err err = {0};
    void *ctx = NULL;
    int pid = 0;
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        exit(2);
    }
    snprintf(core, sizeof core, "%s/core", tmpdir);
    snprintf(backing, sizeof backing, "%s/lib.so", tmpdir);
    snprintf(other, sizeof other, "%s/other", tmpdir);
    /* the backing file: page 0 'a', page 1 'f' */
    uint8_t page[8192];
    memset(page, 'a', 4096);
    memset(page + 4096, 'f', 4096);
    int fd = open(backing, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, page, sizeof page) == (ssize_t)sizeof page);
    close(fd);

    write_core(core, backing, 0, ET_CORE);
    CHECK_EQ(pyu_core_create(core, NULL, NULL, &ctx, &pid, &err), 0);
    CHECK_EQ(pid, 4242);
    if (ctx) {
        /* one read across: in-core page of A, left-out page of A (from the
         * backing file), and segment B */
        static uint8_t got[0x10];
        uint8_t span[3];
        pyu_range r[2] = {{0x10fff, span, 3}, {0x11ffe, got, 4}};
        CHECK_EQ(pyu_core_ops.read(ctx, r, 2), 0);
        CHECK(span[0] == 'A' && span[1] == 'f' && span[2] == 'f');
        CHECK(got[0] == 'f' && got[1] == 'f' && got[2] == 'B' && got[3] == 'B');
        pyu_range bad = {0x20000, got, 4};
        CHECK_EQ(pyu_core_ops.read(ctx, &bad, 1), -PYU_E_FAULT);
        pyu_range past = {0x12ffe, got, 4}; /* runs off the last segment */
        CHECK_EQ(pyu_core_ops.read(ctx, &past, 1), -PYU_E_FAULT);
        uint64_t have;
        CHECK_EQ(pyu_core_truncated(ctx, &have), 0);
        pyu_core_ops.destroy(ctx);
        ctx = NULL;
    }

    /* --sysroot: the backing file is looked up below it */
    snprintf(other, sizeof other, "%s/root", tmpdir);
    char rooted[300];
    mkdir(other, 0700);
    snprintf(rooted, sizeof rooted, "%s%s", other, tmpdir);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s' && printf 'zzzz' > '%s/lib.so'",
             rooted, rooted);
    CHECK_EQ(system(cmd), 0);
    CHECK_EQ(pyu_core_create(core, NULL, other, &ctx, &pid, &err), 0);
    if (ctx) {
        uint8_t b[2];
        pyu_range r = {0x11000, b, 2}; /* left-out page: offset 0x1000 of a
                                          4-byte file -> unreadable */
        CHECK_EQ(pyu_core_ops.read(ctx, &r, 1), -PYU_E_FAULT);
        pyu_range r0 = {0x10000, b, 2}; /* in the core: unaffected */
        CHECK_EQ(pyu_core_ops.read(ctx, &r0, 1), 0);
        pyu_core_ops.destroy(ctx);
        ctx = NULL;
    }

    /* a cut-off core: B's data is missing, and the size is reported */
    write_core(core, backing, 0x800, ET_CORE);
    CHECK_EQ(pyu_core_create(core, NULL, NULL, &ctx, &pid, &err), 0);
    if (ctx) {
        uint8_t b[4];
        pyu_range r = {0x12900, b, 4};
        CHECK_EQ(pyu_core_ops.read(ctx, &r, 1), -PYU_E_FAULT);
        pyu_range ok = {0x12000, b, 4};
        CHECK_EQ(pyu_core_ops.read(ctx, &ok, 1), 0);
        uint64_t have;
        CHECK_EQ(pyu_core_truncated(ctx, &have), 0x3000);
        CHECK_EQ(have, 0x2800);
        pyu_core_ops.destroy(ctx);
        ctx = NULL;
    }

    /* not a core: an executable, an empty file, a directory, text */
    write_core(core, backing, 0, ET_EXEC);
    CHECK(pyu_core_create(core, NULL, NULL, &ctx, &pid, &err) ==
          -PYU_E_BADCORE);
    CHECK(strstr(err.msg, "not a core file") != NULL);
    fd = open(other, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    close(fd);
    CHECK(pyu_core_create(tmpdir, NULL, NULL, &ctx, &pid, &err) ==
          -PYU_E_BADCORE);
    CHECK(strstr(err.msg, "directory") != NULL);
    snprintf(cmd, sizeof cmd, "printf 'hello\\n' > '%s/text'", tmpdir);
    CHECK_EQ(system(cmd), 0);
    snprintf(other, sizeof other, "%s/text", tmpdir);
    CHECK(pyu_core_create(other, NULL, NULL, &ctx, &pid, &err) ==
          -PYU_E_BADCORE);
    CHECK(strstr(err.msg, "not an ELF file") != NULL);
    snprintf(other, sizeof other, "%s/missing", tmpdir);
    CHECK(pyu_core_create(other, NULL, NULL, &ctx, &pid, &err) < 0);
    CHECK(strstr(err.msg, "No such file") != NULL);

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK_EQ(system(cmd), 0);
}

/* ------------------------------------------------------------ versions */

static void test_versions(void)
{
    char v[32];
    pyu_version_string(0x030E07F0, v, sizeof v);
    CHECK(strcmp(v, "3.14.7") == 0);
    pyu_version_string(0x030F00B4, v, sizeof v);
    CHECK(strcmp(v, "3.15.0b4") == 0);
    pyu_version_string(0x030F00C1, v, sizeof v);
    CHECK(strcmp(v, "3.15.0rc1") == 0);
    /* (no such release level: damaged memory, found by fuzz_offsets) */
    pyu_version_string(0x030F00D1, v, sizeof v);
    CHECK(strcmp(v, "3.15.0?1") == 0);
    pyu_version_string(0x030F0051, v, sizeof v);
    CHECK(strcmp(v, "3.15.0?1") == 0);
    pyu_version_string(0x030F00C1, v, sizeof v);
    CHECK(strcmp(v, "3.15.0rc1") == 0);
    CHECK_EQ(pyu_offsets_layout_fields(0x030D05F0), 70);  /* 584 bytes */
    CHECK_EQ(pyu_offsets_layout_fields(0x030E07F0), 92);  /* 760 bytes */
    CHECK_EQ(pyu_offsets_layout_fields(0x030F02F0), 108); /* 888 bytes */
    CHECK_EQ(pyu_offsets_layout_fields(0x030F00B4), 108);
    CHECK_EQ(pyu_offsets_layout_fields(0x030F00B1), 0); /* 880: unknown */
    CHECK_EQ(pyu_offsets_layout_fields(0x030E00C1), 0); /* pre-release */
    CHECK_EQ(pyu_offsets_layout_fields(0x030C00F0), 0); /* 3.12 */
    CHECK_EQ(pyu_offsets_layout_fields(0x031000F0), 0); /* 3.16 */
    pyu_version_string(0x030B0000, v, sizeof v); /* (micro unknown) */
    CHECK(strcmp(v, "3.11") == 0);
}

/* ----------------------------------------------- CPython 3.11 (no table) */

#define R11 0x200000u /* a 3.11 runtime: main interpreter inside it */
#define R11_SIZE 0x30000u
#define I11 (R11 + 58936)
#define T11 (R11 + 0x28000) /* two thread states */

static uint8_t img11[R11_SIZE];

static void put11(uint64_t addr, uint64_t v)
{
    memcpy(img11 + (addr - R11), &v, 8);
}

static int read11(void *ctx, const pyu_range *r, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) {
        if (r[i].addr < R11 || r[i].addr + r[i].len > R11 + R11_SIZE)
            return -PYU_E_FAULT;
        memcpy(r[i].buf, img11 + (r[i].addr - R11), r[i].len);
    }
    return 0;
}

static const pyu_memory_ops ops11 = {.read = read11};

/* Opens the image through its runtime hint, with Py_Version `version`. */
static int open11(uint64_t version, pyu_session **out)
{
    pyu_session *s = pyu_session_new();
    pyu_set_version_hint(s, version);
    int rc = pyu_open_memory(s, &ops11, NULL, 0, R11);
    *out = s;
    return rc;
}

static void test_py311(void)
{
    pyu_session *s;
    pyu_offsets o;
    uint8_t buf[128] = {0};

    /* the built-in layouts validate; 3.8 has none and says what is read */
    s = pyu_session_new();
    CHECK_EQ(pyu_offsets_builtin(s, 0x030B02F0, &o), 0);
    CHECK(o.builtin && o.long_size_signed && o.dict_order_before);
    CHECK(!PYU_HAS(&o, ts_current_frame) && PYU_OFF(&o, ts_cframe) == 56);
    CHECK(PYU_OFF(&o, co_flags) == 48); /* (not derived from co_argcount) */
    CHECK_EQ(pyu_offsets_builtin(s, 0x030C01F0, &o), 0);
    CHECK(o.builtin && !o.long_size_signed && o.dict_order_before);
    CHECK(o.managed_dict_tagged && PYU_OFF(&o, cframe_current_frame) == 0);
    CHECK(!PYU_HAS(&o, fr_is_entry) && PYU_OFF(&o, fr_owner) == 70);
    CHECK_EQ(pyu_offsets_builtin(s, 0x030812F0, &o), -PYU_E_VERSION);
    CHECK(strstr(pyu_errmsg(s), "CPython 3.8.18 is not a version pyunwind "
                                "reads; it reads CPython 3.9-3.15") != NULL);
    pyu_session_free(s);

    /* the shape a scan looks for: interpreters.main at the embedded main
     * interpreter, interpreters.head set */
    memcpy(buf + 8 + 48, &(uint64_t){0x1000 + 8 + 58936}, 8);
    CHECK_EQ(pyu_builtin_runtime_at(buf, sizeof buf, 8, 0x1000 + 8), 0);
    memcpy(buf + 8 + 40, &(uint64_t){0x5000}, 8);
    CHECK_EQ(pyu_builtin_runtime_at(buf, sizeof buf, 8, 0x1000 + 8),
             0x030B0000);
    CHECK_EQ(pyu_builtin_runtime_at(buf, sizeof buf, 80, 0x1000 + 80), 0);
    memcpy(buf + 8 + 48, &(uint64_t){0x1000 + 8 + 76392}, 8); /* 3.12 */
    CHECK_EQ(pyu_builtin_runtime_at(buf, sizeof buf, 8, 0x1000 + 8),
             0x030C0000);

    /* a consistent runtime: the interpreter points back, both threads
     * name it */
    memset(img11, 0, sizeof img11);
    put11(R11 + 40, I11);               /* interpreters.head */
    put11(R11 + 48, I11);               /* interpreters.main */
    put11(I11 + 40, R11);               /* interp->runtime */
    put11(I11 + 16, T11);               /* threads.head */
    put11(T11 + 16, I11);               /* tstate->interp */
    put11(T11 + 8, T11 + 0x200);        /* next */
    put11(T11 + 0x200 + 16, I11);
    CHECK_EQ(open11(0x030B02F0, &s), 0);
    pyu_python_info info;
    pyu_process pr;
    CHECK_EQ(pyu_python(s, &info), 0);
    CHECK_EQ(pyu_target(s, &pr), 0);
    CHECK(strcmp(pr.python, "3.11.2") == 0 && info.runtime_addr == R11);
    pyu_session_free(s);
    /* without a version there is nothing to go by (no cookie) */
    CHECK(open11(0, &s) < 0);
    pyu_session_free(s);
    /* a thread naming another interpreter: not a runtime */
    put11(T11 + 0x200 + 16, I11 + 8);
    CHECK(open11(0x030B02F0, &s) < 0);
    pyu_session_free(s);
    put11(T11 + 0x200 + 16, I11);
    /* an interpreter that does not point back: not a runtime */
    put11(I11 + 40, R11 + 8);
    CHECK(open11(0x030B02F0, &s) < 0);
    pyu_session_free(s);
    /* a thread list that loops: bounded, refused */
    put11(I11 + 40, R11);
    put11(T11 + 0x200 + 8, T11);
    CHECK(open11(0x030B02F0, &s) < 0);
    pyu_session_free(s);
}


/* 3.9's and 3.10's frame objects say whether their eval loop runs them
 * (objects.c): the mark each version keeps, where its layout puts it. */
static void test_frame_objects(void)
{
    pyu_session *s = pyu_session_new();
    pyu_offsets o;
    uint8_t f[120] = {0};
    /* 3.9: f_executing, 1 while running */
    CHECK_EQ(pyu_offsets_builtin(s, 0x030902F0, &o), 0);
    CHECK(o.object_frames && PYU_OFF(&o, fr_state) == 116);
    CHECK(!pyu_objects_running(&o, f, sizeof f)); /* (returned) */
    f[116] = 1;
    CHECK(pyu_objects_running(&o, f, sizeof f));
    CHECK(!pyu_objects_running(&o, f, 100)); /* (the copy too short) */
    /* 3.10: f_state, FRAME_EXECUTING (0) or FRAME_UNWINDING (2) */
    memset(f, 0, sizeof f);
    CHECK_EQ(pyu_offsets_builtin(s, 0x030A0DF0, &o), 0);
    CHECK(PYU_OFF(&o, fr_state) == 108);
    const int8_t states[] = {-2, -1, 0, 1, 2, 3, 4}; /* CREATED..CLEARED */
    const bool running[] = {false, false, true, false, true, false, false};
    for (size_t i = 0; i < sizeof states; i++) {
        f[108] = (uint8_t)states[i];
        CHECK(pyu_objects_running(&o, f, sizeof f) == running[i]);
    }
    /* 3.11 on: no frame objects, no mark */
    CHECK_EQ(pyu_offsets_builtin(s, 0x030B02F0, &o), 0);
    CHECK(!PYU_HAS(&o, fr_state) && pyu_objects_running(&o, f, sizeof f));
    pyu_session_free(s);
}

/* ------------------------------------------- a synthetic runtime in memory */

/* A CPython 3.15 runtime laid out by hand in a buffer and served through
 * the caller-supplied memory source: one interpreter, one thread, and frame
 * chains that loop, run too deep, or hold things that are not code. */
#define IMG_BASE 0x100000u
#define IMG_SIZE 0x10000u
#define DEEP_BASE 0x40000000u /* synthetic chain: frame k at DEEP_BASE+k*256 */
#define RT (IMG_BASE)
#define INTERP (IMG_BASE + 0x2000)
#define TSTATE (IMG_BASE + 0x3000)
#define CODE (IMG_BASE + 0x4000)
#define CODE_TYPE (IMG_BASE + 0x5000)
#define DICT_TYPE (IMG_BASE + 0x5400)
#define STRS (IMG_BASE + 0x6000)
#define LINETABLE (IMG_BASE + 0x7000)
#define FRAMES (IMG_BASE + 0x8000)
#define DICT_OBJ (IMG_BASE + 0x9000)

typedef struct fake_mem {
    uint8_t img[IMG_SIZE];
    uint64_t deep_count; /* frames in the synthetic deep chain */
    int destroyed;
} fake_mem;

static void put64(fake_mem *m, uint64_t addr, uint64_t v)
{
    memcpy(m->img + (addr - IMG_BASE), &v, 8);
}
static void put32(fake_mem *m, uint64_t addr, uint32_t v)
{
    memcpy(m->img + (addr - IMG_BASE), &v, 4);
}

static int fake_read(void *ctx, const pyu_range *r, size_t n)
{
    fake_mem *m = ctx;
    for (size_t i = 0; i < n; i++) {
        uint64_t a = r[i].addr;
        if (a >= IMG_BASE && a + r[i].len <= IMG_BASE + IMG_SIZE) {
            memcpy(r[i].buf, m->img + (a - IMG_BASE), r[i].len);
            continue;
        }
        uint64_t end = DEEP_BASE + m->deep_count * 256;
        if (a >= DEEP_BASE && a + r[i].len <= end && r[i].len <= 256) {
            /* frame k: code CODE, previous frame k+1 (0 for the last) */
            uint64_t k = (a - DEEP_BASE) / 256;
            uint8_t f[256] = {0};
            uint64_t prev = k + 1 < m->deep_count ? a + 256 : 0;
            uint64_t code = CODE, ip = CODE + 0xC0;
            memcpy(f + 0x0, &code, 8);
            memcpy(f + 0x8, &prev, 8);
            memcpy(f + 0x38, &ip, 8);
            memcpy(r[i].buf, f + ((a - DEEP_BASE) % 256), r[i].len);
            continue;
        }
        return -PYU_E_FAULT;
    }
    return 0;
}

static void fake_destroy(void *ctx)
{
    ((fake_mem *)ctx)->destroyed = 1;
}

static const pyu_memory_ops fake_ops = {.read = fake_read,
                                        .destroy = fake_destroy};

static void put_str(fake_mem *m, uint64_t addr, const char *text)
{
    put64(m, addr + 0x10, strlen(text));              /* length */
    put32(m, addr + 0x20, (1u << 2) | (1u << 5) | (1u << 6)); /* ascii */
    memcpy(m->img + (addr - IMG_BASE) + 0x28, text, strlen(text) + 1);
}

static void put_frame(fake_mem *m, uint64_t f, uint64_t exe, uint64_t prev,
                      uint8_t owner, unsigned unit)
{
    put64(m, f + 0x0, exe | 1); /* tagged stack reference */
    put64(m, f + 0x8, prev);
    put64(m, f + 0x38, CODE + 0xC0 + 2 * unit);
    m->img[f + 0x4A - IMG_BASE] = owner;
}

static void build_fake_version(fake_mem *m, uint64_t version)
{
    uint64_t v[PYU_F_COUNT];
    memset(m, 0, sizeof *m);
    memset(v, 0, sizeof v);
#define SET(f, x) v[PYU_F_##f] = (x)
    SET(rt_size, 0x1000); SET(rt_interpreters_head, 0x400);
    SET(is_size, 0x200); SET(is_id, 0); SET(is_next, 8);
    SET(is_threads_head, 0x10); SET(is_threads_main, 0x18); SET(is_gc, 0x20);
    SET(is_ceval_gil, 0x40); SET(is_gil_runtime_state, 0x48);
    SET(is_gil_locked, 0x48); SET(is_gil_holder, 0x50);
    SET(is_gil_enabled, 0x58); SET(is_code_object_generation, 0x60);
    SET(ts_size, 0x100); SET(ts_next, 8); SET(ts_interp, 0x10);
    SET(ts_current_frame, 0x20);
    SET(ts_thread_id, 0x28); SET(ts_native_thread_id, 0x30);
    SET(ts_status, 0x38); SET(ts_holds_gil, 0x3C); SET(ts_gil_requested, 0x40);
    SET(ts_current_exception, 0x48); SET(ts_exc_state, 0x50);
    SET(ts_base_frame, 0x70); /* -> the frame at 0x80 */
    SET(ts_last_profiled_frame, 0xE0); SET(ts_last_profiled_frame_seq, 0xE8);
    SET(ts_datastack_chunk, 0x60);
    SET(fr_size, 0x50); SET(fr_previous, 8); SET(fr_executable, 0);
    SET(fr_instr_ptr, 0x38); SET(fr_stackpointer, 0x40);
    SET(fr_tlbc_index, 0x48); SET(fr_owner, 0x4A); SET(fr_localsplus, 0x50);
    SET(co_size, 0x100); SET(co_filename, 0x10); SET(co_name, 0x18);
    SET(co_qualname, 0x20); SET(co_linetable, 0x28); SET(co_firstlineno, 0x30);
    SET(co_code_adaptive, 0xC0); SET(co_argcount, 0x38);
    SET(co_localsplusnames, 0x48); SET(co_localspluskinds, 0x50);
    SET(ob_size, 0x10); SET(ob_type, 8);
    SET(tuple_size, 0x20); SET(tuple_ob_size, 0x10); SET(tuple_ob_item, 0x18);
    SET(list_size, 0x28); SET(list_ob_size, 0x10); SET(list_ob_item, 0x18);
    SET(dict_size, 0x30); SET(dict_ma_keys, 0x20); SET(dict_ma_values, 0x28);
    SET(float_size, 0x18); SET(float_ob_fval, 0x10);
    SET(tp_size, 0x100); SET(tp_name, 0x18); SET(tp_flags, 0xA8);
    SET(set_size, 0xC8); SET(set_used, 0x18); SET(set_mask, 0x20);
    SET(set_table, 0x28);
    SET(long_size, 0x20); SET(long_lv_tag, 0x10); SET(long_ob_digit, 0x18);
    SET(gen_size, 0x100); SET(gen_gi_frame_state, 0x43);
    SET(gen_gi_iframe, 0x48);
    SET(bytes_size, 0x21); SET(bytes_ob_size, 0x10); SET(bytes_ob_sval, 0x20);
    SET(str_size, 0x28); SET(str_state, 0x20); SET(str_length, 0x10);
    SET(str_ascii_size, 0x28); SET(str_compact_size, 0x38);
    SET(gc_size, 0x10); SET(gc_collecting, 0);
#undef SET
    size_t n;
    const uint8_t *layout = pyu_offsets_layout(version, &n);
    memcpy(m->img, "xdebugpy", 8);
    put64(m, RT + 8, version);
    put64(m, RT + 16, 0);
    for (size_t i = 0; i < n; i++)
        put64(m, RT + 24 + 8 * i, v[layout[i]]);
    put64(m, RT + 0x400, INTERP);
    put64(m, INTERP + 0x10, TSTATE);
    put64(m, INTERP + 0x18, TSTATE);
    put64(m, TSTATE + 0x10, INTERP);
    put64(m, TSTATE + 0x28, 0x7f0000001234);
    put64(m, TSTATE + 0x30, 4321);
    put64(m, TSTATE + 0x20, FRAMES);
    /* base frame inside the thread state, owned by the interpreter */
    put64(m, TSTATE + 0x70, TSTATE + 0x80);
    m->img[TSTATE + 0x80 + 0x4A - IMG_BASE] = 3;
    /* the code object, its type, its strings and its location table */
    put64(m, CODE + 8, CODE_TYPE);
    put64(m, CODE + 0x10, STRS);
    put64(m, CODE + 0x18, STRS + 0x100);
    put64(m, CODE + 0x20, STRS + 0x200);
    put64(m, CODE + 0x28, LINETABLE);
    put32(m, CODE + 0x30, 40);
    put64(m, CODE_TYPE + 0x18, CODE_TYPE + 0x100);
    memcpy(m->img + (CODE_TYPE + 0x100 - IMG_BASE), "code", 5);
    put64(m, DICT_TYPE + 0x18, DICT_TYPE + 0x100);
    memcpy(m->img + (DICT_TYPE + 0x100 - IMG_BASE), "dict", 5);
    put64(m, DICT_OBJ + 8, DICT_TYPE);
    put_str(m, STRS, "f.py");
    put_str(m, STRS + 0x100, "fn");
    put_str(m, STRS + 0x200, "Mod.fn");
    put64(m, LINETABLE + 0x10, 4);
    static const uint8_t table[] = {0xEB, 0x04, 0xEB, 0x02}; /* 13: +2, +1 */
    memcpy(m->img + (LINETABLE + 0x20 - IMG_BASE), table, sizeof table);
}

static void build_fake(fake_mem *m)
{
    build_fake_version(m, 0x030F02F0);
}

static pyu_dump *fake_dump(fake_mem *m, pyu_session **sp)
{
    pyu_session *s = pyu_session_new();
    pyu_dump *d = NULL;
    *sp = s;
    CHECK_EQ(pyu_open_memory(s, &fake_ops, m, 99, RT), 0);
    if (pyu_errcode(s) == PYU_E_OK)
        CHECK_EQ(pyu_dump_take(s, 0, &d), 0);
    if (!d)
        fprintf(stderr, "fake runtime: %s\n", pyu_errmsg(s));
    return d;
}

static void test_fake_runtime(void)
{
    static fake_mem m;
    pyu_session *s;
    pyu_dump *d;

    /* a chain: code, a shim frame, a non-code object, code, base frame */
    build_fake(&m);
    put_frame(&m, FRAMES, CODE, FRAMES + 0x100, 0, 0);       /* line 42 */
    put_frame(&m, FRAMES + 0x100, CODE, FRAMES + 0x200, 4, 0); /* C stack */
    put_frame(&m, FRAMES + 0x200, DICT_OBJ, FRAMES + 0x300, 0, 0);
    put_frame(&m, FRAMES + 0x300, CODE, TSTATE + 0x80, 1, 5); /* line 43 */
    put_frame(&m, TSTATE + 0x80, 0, 0xdead0000, 3, 0); /* stops here */
    d = fake_dump(&m, &s);
    if (d) {
        CHECK_EQ(d->nthreads, 1);
        CHECK_EQ(d->process.pid, 99);
        CHECK(strcmp(d->process.python, "3.15.2") == 0);
        const pyu_thread *t = &d->threads[0];
        CHECK_EQ(t->native_thread_id, 4321);
        CHECK(t->main);
        CHECK_EQ(t->nframes, 2);
        CHECK(!t->truncated && !t->error);
        if (t->nframes == 2) {
            CHECK(strcmp(t->frames[0].function, "Mod.fn") == 0);
            CHECK(strcmp(t->frames[0].name, "fn") == 0);
            CHECK(strcmp(t->frames[0].file, "f.py") == 0);
            CHECK_EQ(t->frames[0].line, 42);
            CHECK_EQ(t->frames[1].line, 43);
        }
        pyu_dump_free(d);
    }
    pyu_session_free(s);
    CHECK(m.destroyed); /* the session owned the source */

    /* a frame chain that loops: a visible mark, not a hang */
    build_fake(&m);
    put_frame(&m, FRAMES, CODE, FRAMES + 0x100, 0, 0);
    put_frame(&m, FRAMES + 0x100, CODE, FRAMES + 0x200, 0, 0);
    put_frame(&m, FRAMES + 0x200, CODE, FRAMES, 0, 0);
    d = fake_dump(&m, &s);
    if (d) {
        CHECK_EQ(d->threads[0].truncated, 2);
        CHECK(d->threads[0].nframes >= 3 && d->threads[0].nframes < 16);
        pyu_dump_free(d);
    }
    pyu_session_free(s);

    /* a chain deeper than the limit */
    build_fake(&m);
    m.deep_count = PYU_MAX_FRAMES + 100;
    put64(&m, TSTATE + 0x20, DEEP_BASE);
    d = fake_dump(&m, &s);
    if (d) {
        CHECK_EQ(d->threads[0].truncated, 1);
        CHECK_EQ(d->threads[0].nframes, PYU_MAX_FRAMES);
        pyu_dump_free(d);
    }
    pyu_session_free(s);

    /* a frame pointing nowhere: the thread reports an error, the dump
     * goes on */
    build_fake(&m);
    put_frame(&m, FRAMES, CODE, 0x7777000, 0, 0);
    d = fake_dump(&m, &s);
    if (d) {
        CHECK_EQ(d->threads[0].nframes, 1);
        CHECK(d->threads[0].error &&
              strstr(d->threads[0].error, "0x7777000") != NULL);
        pyu_dump_free(d);
    }
    pyu_session_free(s);

    /* a thread list that loops back on itself ends too */
    build_fake(&m);
    put64(&m, TSTATE + 8, TSTATE);
    d = fake_dump(&m, &s);
    if (d) {
        CHECK_EQ(d->nthreads, 1);
        CHECK(d->threads_truncated);
        pyu_dump_free(d);
    }
    pyu_session_free(s);

    /* an offsets table with a field outside its struct is refused */
    build_fake(&m);
    size_t n;
    const uint8_t *layout = pyu_offsets_layout(0x030F02F0, &n);
    for (size_t i = 0; i < n; i++)
        if (layout[i] == PYU_F_fr_previous)
            put64(&m, RT + 24 + 8 * i, 0x5000);
    s = pyu_session_new();
    CHECK_EQ(pyu_open_memory(s, &fake_ops, &m, 0, RT), -PYU_E_OFFSETS);
    CHECK(strstr(pyu_errmsg(s), "fr_previous") != NULL);
    pyu_session_free(s);

    /* an unknown version, and no runtime at all */
    build_fake(&m);
    put64(&m, RT + 8, 0x031000F0);
    s = pyu_session_new();
    CHECK_EQ(pyu_open_memory(s, &fake_ops, &m, 0, RT), -PYU_E_VERSION);
    CHECK(strstr(pyu_errmsg(s), "3.16.0") != NULL);
    pyu_session_free(s);
    build_fake(&m);
    s = pyu_session_new();
    CHECK_EQ(pyu_open_memory(s, &fake_ops, &m, 0, RT + 8), -PYU_E_NOTPY);
    pyu_session_free(s);
}

/* ------------------------------------------------------ the visitor walk */

#define TSTATE2 (IMG_BASE + 0xA000)
#define TSTATE3 (IMG_BASE + 0xA400)

/* What a walk reported, as a string of events, and how to answer. */
typedef struct visit {
    pyu_session *s;
    char log[4096];
    size_t len;
    int stop_at_frame;   /* answer this frame index with `answer`; -1 none */
    int answer;
    int thread_answer;   /* answer to every thread callback */
    int interp_answer;
    char errmsg[512];    /* pyu_errmsg at the first failed thread_end */
} visit;

static void logf_(visit *v, const char *fmt, ...) PYU_PRINTF(2, 3);
static void logf_(visit *v, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(v->log + v->len, sizeof v->log - v->len, fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof v->log - v->len)
        v->len += (size_t)n;
}

static int v_interp(void *arg, const pyu_walk_interp *in)
{
    visit *v = arg;
    logf_(v, "I%lld/%zu ", (long long)in->id, in->nthreads);
    return v->interp_answer;
}

static int v_thread(void *arg, const pyu_walk_thread *t)
{
    visit *v = arg;
    logf_(v, "T%llu%s ", (unsigned long long)t->native_thread_id,
          t->main ? "m" : "");
    return v->thread_answer;
}

static int v_frame(void *arg, const pyu_walk_frame *f)
{
    visit *v = arg;
    pyu_frame d;
    CHECK_EQ(pyu_frame_describe(v->s, f, &d), 0);
    logf_(v, "F%zu:%s:%d ", f->index, d.function ? d.function : "?", d.line);
    CHECK_EQ(f->code_addr, CODE);
    if ((int)f->index == v->stop_at_frame)
        return v->answer;
    return PYU_WALK_NEXT;
}

static int v_thread_end(void *arg, const pyu_walk_thread *t,
                        const pyu_walk_end *e)
{
    visit *v = arg;
    (void)t;
    logf_(v, "E%zu%s%s ", e->nframes, e->truncated ? "t" : "",
          e->error ? "!" : "");
    if (e->error && !v->errmsg[0])
        snprintf(v->errmsg, sizeof v->errmsg, "%s", pyu_errmsg(v->s));
    return PYU_WALK_NEXT;
}

static int v_interp_end(void *arg, const pyu_walk_interp *in)
{
    visit *v = arg;
    logf_(v, "i%lld", (long long)in->id);
    return PYU_WALK_NEXT;
}

/* Walks the fake runtime; returns what pyu_walk returned. */
static int fake_walk(fake_mem *m, visit *v, unsigned flags)
{
    pyu_walker w = {flags, v_interp, v_thread, v_frame, NULL, v_thread_end,
                    v_interp_end};
    pyu_session *s = pyu_session_new();
    int rc = pyu_open_memory(s, &fake_ops, m, 99, RT);
    CHECK_EQ(rc, 0);
    v->s = s;
    if (rc == 0)
        rc = pyu_walk(s, &w, v);
    pyu_session_free(s);
    return rc;
}

static visit new_visit(void)
{
    visit v;
    memset(&v, 0, sizeof v);
    v.stop_at_frame = -1;
    return v;
}

/* Three threads, newest first in the list: TSTATE3 -> TSTATE2 -> TSTATE;
 * TSTATE is the main one.  Each runs two frames of CODE. */
static void three_threads(fake_mem *m)
{
    build_fake(m);
    put_frame(m, FRAMES, CODE, FRAMES + 0x100, 0, 0);       /* line 42 */
    put_frame(m, FRAMES + 0x100, CODE, 0, 0, 5);            /* line 43 */
    put64(m, INTERP + 0x10, TSTATE3);
    put64(m, TSTATE3 + 8, TSTATE2);
    put64(m, TSTATE2 + 8, TSTATE);
    put64(m, TSTATE + 0x80 + 0x8, 0);
    for (uint64_t ts = TSTATE2, id = 2; ts <= TSTATE3; ts += 0x400, id++) {
        put64(m, ts + 0x10, INTERP);
        put64(m, ts + 0x28, 0x7f0000000000 + id);
        put64(m, ts + 0x30, 4320 + id);
        put64(m, ts + 0x20, FRAMES);
    }
    /* the frames end at NULL, not at the base frame (as before 3.15) */
    put64(m, TSTATE + 0x20, FRAMES);
}

/* A thread list read while it changed can end before the main thread (a
 * state freed as it was read, 3.13+): the main thread's state is read from
 * the interpreter's own pointer, listed first as always, and the list is
 * said cut.  A state that is not this interpreter's any more is left
 * out. */
static void test_main_thread_off_the_list(void)
{
    static fake_mem m;
    pyu_session *s;
    three_threads(&m);
    put64(&m, TSTATE2 + 8, 0); /* the list: TSTATE3, TSTATE2 */
    pyu_dump *d = fake_dump(&m, &s);
    if (d) {
        CHECK_EQ(d->nthreads, 3);
        CHECK(d->threads_truncated);
        if (d->nthreads == 3) {
            CHECK(d->threads[0].main);
            CHECK_EQ(d->threads[0].native_thread_id, 4321);
            CHECK_EQ(d->threads[1].native_thread_id, 4322);
        }
        pyu_dump_free(d);
    }
    pyu_session_free(s);
    put64(&m, TSTATE + 0x10, INTERP + 0x800); /* (another's, or freed) */
    d = fake_dump(&m, &s);
    if (d) {
        CHECK_EQ(d->nthreads, 2);
        CHECK(d->threads_truncated);
        CHECK(d->nthreads < 1 || !d->threads[0].main);
        pyu_dump_free(d);
    }
    pyu_session_free(s);
    put64(&m, TSTATE2 + 8, TSTATE); /* whole again: nothing is said cut */
    put64(&m, TSTATE + 0x10, INTERP);
    d = fake_dump(&m, &s);
    if (d) {
        CHECK_EQ(d->nthreads, 3);
        CHECK(!d->threads_truncated);
        pyu_dump_free(d);
    }
    pyu_session_free(s);
}

static void test_walk(void)
{
    static fake_mem m;
    visit v;

    /* every callback, in walk order: the main thread first, then the
     * others oldest first; names and lines resolved on request */
    three_threads(&m);
    v = new_visit();
    CHECK_EQ(fake_walk(&m, &v, 0), 0);
    CHECK(strcmp(v.log, "I0/3 T4321m F0:Mod.fn:42 F1:Mod.fn:43 E2 "
                        "T4322 F0:Mod.fn:42 F1:Mod.fn:43 E2 "
                        "T4323 F0:Mod.fn:42 F1:Mod.fn:43 E2 i0") == 0);

    /* the runtime's own order: newest first */
    v = new_visit();
    v.thread_answer = PYU_WALK_SKIP; /* and no frames */
    CHECK_EQ(fake_walk(&m, &v, PYU_WALK_LIST_ORDER), 0);
    CHECK(strcmp(v.log, "I0/3 T4323 T4322 T4321m i0") == 0);

    /* a callback's own value stops the walk at once and comes back */
    v = new_visit();
    v.stop_at_frame = 0;
    v.answer = 42;
    CHECK_EQ(fake_walk(&m, &v, 0), 42);
    CHECK(strcmp(v.log, "I0/3 T4321m F0:Mod.fn:42 ") == 0);
    v = new_visit();
    v.stop_at_frame = 1;
    v.answer = -PYU_E_NOMEM; /* negative values too */
    CHECK_EQ(fake_walk(&m, &v, 0), -PYU_E_NOMEM);

    /* SKIP from a frame: the rest of that thread's frames, thread_end
     * still comes; from an interpreter: its threads */
    v = new_visit();
    v.stop_at_frame = 0;
    v.answer = PYU_WALK_SKIP;
    CHECK_EQ(fake_walk(&m, &v, 0), 0);
    CHECK(strcmp(v.log, "I0/3 T4321m F0:Mod.fn:42 E1 T4322 F0:Mod.fn:42 E1 "
                        "T4323 F0:Mod.fn:42 E1 i0") == 0);
    v = new_visit();
    v.interp_answer = PYU_WALK_SKIP;
    CHECK_EQ(fake_walk(&m, &v, 0), 0);
    CHECK(strcmp(v.log, "I0/3 i0") == 0);

    /* an error in one thread's frames: reported in its thread_end, with
     * what failed, and the walk goes on with the next thread */
    three_threads(&m);
    put64(&m, TSTATE2 + 0x20, FRAMES + 0x200);
    put_frame(&m, FRAMES + 0x200, CODE, 0x7777000, 0, 0);
    v = new_visit();
    CHECK_EQ(fake_walk(&m, &v, 0), 0);
    CHECK(strcmp(v.log, "I0/3 T4321m F0:Mod.fn:42 F1:Mod.fn:43 E2 "
                        "T4322 F0:Mod.fn:42 E1! "
                        "T4323 F0:Mod.fn:42 F1:Mod.fn:43 E2 i0") == 0);
    CHECK(strcmp(v.errmsg, "after 1 frames: reading a frame at 0x7777000 "
                           "(80 bytes): address not readable") == 0);

    /* a frame whose executable is NULL (memory a core left out reads as
     * zeros): an error for that thread, once the code cache holds code */
    three_threads(&m);
    put64(&m, TSTATE3 + 0x20, FRAMES + 0x200);
    put_frame(&m, FRAMES + 0x200, 0, FRAMES, 0, 0);
    v = new_visit();
    CHECK_EQ(fake_walk(&m, &v, 0), 0);
    CHECK(strstr(v.log, "T4323 E0! i0") != NULL);
    CHECK(strstr(v.errmsg, "code object pointer 0x0 is NULL") != NULL);
    /* ... and a frame of zeros only: memory the core does not hold (gcore
     * writes zeros where gdb could not read), said so */
    three_threads(&m);
    put64(&m, TSTATE3 + 0x20, FRAMES + 0x300);
    v = new_visit();
    CHECK_EQ(fake_walk(&m, &v, 0), 0);
    CHECK(strstr(v.log, "T4323 E0! i0") != NULL);
    CHECK(strstr(v.errmsg, "the frame at 0x108300 reads as zeros: the "
                           "memory behind it is missing") != NULL);

    /* a loop in the frames: truncated, not endless */
    three_threads(&m);
    put_frame(&m, FRAMES + 0x100, CODE, FRAMES, 0, 5);
    v = new_visit();
    v.thread_answer = PYU_WALK_NEXT;
    CHECK_EQ(fake_walk(&m, &v, PYU_WALK_LIST_ORDER), 0);
    CHECK(strstr(v.log, "t ") != NULL);

    /* PYU_WALK_ASYNC needs CPython 3.14+: the fake runtime, 3.15, has no
     * _asyncio mapped (no mappings at all): the walk runs without it */
    three_threads(&m);
    v = new_visit();
    CHECK_EQ(fake_walk(&m, &v, PYU_WALK_ASYNC), 0);
    CHECK(strncmp(v.log, "I0/3 T4321m F0", 14) == 0);
}

/* describe needs the epoch the frame was reported in */
static int remember_frame(void *arg, const pyu_walk_frame *f)
{
    *(pyu_walk_frame *)arg = *f;
    return 7; /* stop: the first frame is enough */
}

static void test_describe_epoch(void)
{
    static fake_mem m;
    three_threads(&m);
    pyu_session *s = pyu_session_new();
    CHECK_EQ(pyu_open_memory(s, &fake_ops, &m, 99, RT), 0);
    pyu_walk_frame f;
    pyu_walker w = {.frame = remember_frame};
    CHECK_EQ(pyu_walk(s, &w, &f), 7);
    pyu_frame d;
    CHECK_EQ(pyu_frame_describe(s, &f, &d), 0);
    CHECK(strcmp(d.file, "f.py") == 0 && d.line == 42);
    uint64_t epoch = pyu_code_epoch(s);
    pyu_caches_flush(s);
    CHECK(pyu_code_epoch(s) != epoch);
    CHECK_EQ(pyu_frame_describe(s, &f, &d), -PYU_E_STATE);
    CHECK(strstr(pyu_errmsg(s), "no longer cached") != NULL);
    pyu_session_free(s);
}

/* ------------------------------------------------------ the error record */

static void test_errors(void)
{
    pyu_err e;
    pyu_err_clear(&e);
    CHECK(strcmp(pyu_err_text(&e), "") == 0);
    /* a deferred failure keeps its arguments, not its text */
    CHECK_EQ(pyu_fail(&e, PYU_E_FAULT, "reading %s at 0x%" PRIx64
                      " (%zu bytes): %s", "a frame", (uint64_t)0xabc,
                      (size_t)80, pyu_strerror(PYU_E_FAULT)),
             -PYU_E_FAULT);
    CHECK(!e.current);
    CHECK_EQ(pyu_fail_ctx(&e, "after %zu frames", (size_t)3), -PYU_E_FAULT);
    CHECK_EQ(pyu_fail_ctx(&e, "interpreter %lld", (long long)-1),
             -PYU_E_FAULT);
    CHECK(strcmp(pyu_err_text(&e), "interpreter -1: after 3 frames: reading "
                                   "a frame at 0xabc (80 bytes): address not "
                                   "readable") == 0);
    CHECK(e.current && e.code == PYU_E_FAULT);
    /* formatted contexts over deferred ones, and 100% literal */
    pyu_fail(&e, PYU_E_CORRUPT, "state 0x%x, %d%% of %u", 0x2cu, -5, 7u);
    pyu_fail_ctx(&e, "thread %lu", 12UL);
    pyu_err_ctx(&e, "file %s", "/tmp/x y");
    CHECK(strcmp(pyu_err_text(&e), "file /tmp/x y: thread 12: state 0x2c, "
                                   "-5% of 7") == 0);
    /* more contexts than the record keeps: the oldest fold into the text */
    pyu_fail(&e, PYU_E_IO, "base");
    for (int i = 0; i < PYU_ERR_CONTEXTS + 3; i++)
        pyu_fail_ctx(&e, "c%d", i);
    CHECK(strcmp(pyu_err_text(&e), "c8: c7: c6: c5: c4: c3: c2: c1: c0: "
                                   "base") == 0);
    /* a long text is cut, never overflows */
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    pyu_err_set(&e, PYU_E_IO, "%s", big);
    pyu_fail_ctx(&e, "ctx");
    CHECK_EQ(strlen(pyu_err_text(&e)), PYU_ERRMSG_MAX - 1);
}

/* ------------------------------------------------ the sampler's frame cache */

/* A simulated interpreter over the synthetic runtime: one thread whose
 * frames (one code object, lines 42 and 43) are pushed and popped at
 * frames FRAMES + i * 0x60 (a frame, then the top of its stack), moving the 3.15 anchor and its sequence number
 * as CPython does when an anchored frame is popped.  Between two ranges of
 * a read (when `racy`) or between samples it takes random steps, and it
 * logs every stack it ever had, so that each stack the sampler records can
 * be checked against the stacks that existed while that sample ran. */
#define SIM_MAX 30
#define SIM_FRAME(i) (FRAMES + (uint64_t)(i) * 0x60)
#define SIM_ANCHOR (TSTATE + 0xE0)
#define SIM_SEQ (TSTATE + 0xE8)
#define SIM_LOG (1u << 16)

typedef struct sim {
    fake_mem m;
    int depth;
    unsigned unit[SIM_MAX]; /* 0: line 42, 4: line 43 */
    uint64_t rng;
    int racy;               /* steps inside reads, 1 in `racy` ranges */
    int calm;               /* between samples: 0-3 steps in 1 of
                               `calm` samples, else none (0: always) */
    uint32_t log[SIM_LOG];  /* each stack it had, as a bit pattern + depth */
    size_t nlog;
} sim;

static uint64_t sim_rand(sim *x)
{
    x->rng ^= x->rng << 13;
    x->rng ^= x->rng >> 7;
    x->rng ^= x->rng << 17;
    return x->rng;
}

static uint32_t sim_key_of(const unsigned *unit, int depth)
{
    uint32_t k = (uint32_t)depth << 24;
    for (int i = 0; i < depth; i++)
        k |= (unit[i] ? 1u : 0u) << i;
    return k;
}

#define SIM_FUNC (IMG_BASE + 0x9800) /* the function every frame runs */
#define SIM_CALL_OP 50                /* CALL in CPython 3.15 */

static void sim_publish(sim *x)
{
    put64(&x->m, TSTATE + 0x20, x->depth ? SIM_FRAME(x->depth - 1) : 0);
    if (x->nlog < SIM_LOG)
        x->log[x->nlog++] = sim_key_of(x->unit, x->depth);
}

static void sim_step(sim *x)
{
    uint64_t r = sim_rand(x) % 8;
    if (x->depth > 1 && (r < 3 || x->depth == SIM_MAX)) { /* return */
        uint64_t f = SIM_FRAME(x->depth - 1), anchor, seq;
        memcpy(&anchor, x->m.img + (SIM_ANCHOR - IMG_BASE), 8);
        memcpy(&seq, x->m.img + (SIM_SEQ - IMG_BASE), 8);
        if (anchor == f) {
            put64(&x->m, SIM_ANCHOR, SIM_FRAME(x->depth - 2));
            put64(&x->m, SIM_SEQ, seq + 1);
        }
        /* the result takes the callable's place on the caller's stack */
        put64(&x->m, SIM_FRAME(x->depth - 2) + 0x50, 0x1);
        x->depth--;
        sim_publish(x); /* (the caller is current before the frame is
                           cleared: its code, its function) */
        put64(&x->m, f, 1);
        put64(&x->m, f + 0x10, 1);
    } else if (r < 6) { /* call: a new frame at the next slot */
        uint64_t f = SIM_FRAME(x->depth);
        if (x->depth) { /* the caller's evidence: callable, return offset */
            uint64_t c = SIM_FRAME(x->depth - 1);
            put64(&x->m, c + 0x50, SIM_FUNC);
            put64(&x->m, c + 0x40, c + 0x50);
            x->m.img[c + 0x48 - IMG_BASE] = 4;
        }
        x->unit[x->depth] = sim_rand(x) & 1 ? 4 : 0;
        put_frame(&x->m, f, CODE,
                  x->depth ? SIM_FRAME(x->depth - 1) : TSTATE + 0x80, 0,
                  x->unit[x->depth]);
        put64(&x->m, f + 0x10, SIM_FUNC);
        put64(&x->m, f + 0x40, f + 0x50); /* (its stack: empty) */
        x->m.img[f + 0x48 - IMG_BASE] = 0; /* a new frame */
        x->depth++;
    } else { /* the innermost frame runs on to another line */
        x->unit[x->depth - 1] ^= 4;
        put64(&x->m, SIM_FRAME(x->depth - 1) + 0x38,
              CODE + 0xC0 + 2 * x->unit[x->depth - 1]);
    }
    sim_publish(x);
}

static int sim_read(void *ctx, const pyu_range *r, size_t n)
{
    sim *x = ctx;
    for (size_t i = 0; i < n; i++) {
        if (x->racy && sim_rand(x) % (uint64_t)x->racy == 0)
            sim_step(x);
        int rc = fake_read(&x->m, &r[i], 1);
        if (rc < 0)
            return rc;
    }
    return 0;
}

static int sim_write(void *ctx, uint64_t addr, const void *buf, size_t len)
{
    sim *x = ctx;
    if (addr != SIM_ANCHOR || len != 8)
        return -PYU_E_INVAL; /* the one write the sampler may make */
    memcpy(x->m.img + (addr - IMG_BASE), buf, 8);
    return 0;
}

static const pyu_memory_ops sim_ops = {.read = sim_read, .write = sim_write};

/* The stack the profile counted last, as sim_key_of gives it: the stack
 * whose count grew since `before` (counts of the previous sample). */
static long sim_counted(pyu_profile *p, uint64_t *before, size_t *nbefore)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    long key = -1;
    for (size_t i = 0; i < d->nstacks; i++) {
        uint64_t old = i < *nbefore ? before[i] : 0;
        if (d->stacks[i].count != old) {
            unsigned unit[SIM_MAX];
            uint32_t depth = d->nodes[d->stacks[i].node].depth, k = depth;
            if (d->funcs[d->frames[d->nodes[d->stacks[i].node].frame].func]
                    .kind == PYU_FUNC_UNKNOWN) {
                key = -3; /* (partial) */
                before[i] = d->stacks[i].count;
                continue;
            }
            if (depth > SIM_MAX)
                return -2;
            for (uint32_t nd = d->stacks[i].node; nd; nd = d->nodes[nd].parent)
                unit[--k] = d->frames[d->nodes[nd].frame].line == 43 ? 4 : 0;
            key = sim_key_of(unit, (int)depth);
        }
        before[i] = d->stacks[i].count;
    }
    *nbefore = d->nstacks;
    return key;
}

/* Runs `samples` samples with sampler flags `flags`; returns how many
 * recorded a stack the simulation never had while the sample ran (a
 * stack with <unknown> on top is not checked: *failed counts samples that
 * recorded none or such a stack). */
static int sim_run(sim *x, unsigned flags, int racy, int samples,
                   pyu_sampler_stats *st, int *failed)
{
    static uint64_t before[1u << 16];
    size_t nbefore = 0;
    int impossible = 0;
    pyu_session *s = pyu_session_new();
    pyu_profile *p = pyu_profile_new();
    pyu_sampler *sm = NULL;
    CHECK_EQ(pyu_open_memory(s, &sim_ops, x, 99, RT), 0);
    pyu_sampler_opts o = {PYU_MODE_WALL, flags, 0};
    CHECK_EQ(pyu_sampler_new(s, &o, p, &sm), 0);
    *failed = 0;
    for (int i = 0; sm && i < samples; i++) {
        int steps = (int)(sim_rand(x) % 4);
        if (x->calm && sim_rand(x) % (uint64_t)x->calm)
            steps = 0; /* (calm: mostly still) */
        for (int k = steps; k > 0; k--)
            sim_step(x);
        size_t from = x->nlog - 1;
        x->racy = racy;
        int rc = pyu_sampler_take(sm);
        x->racy = 0;
        long key = sim_counted(p, before, &nbefore);
        if (rc != 1 || key == -3) {
            ++*failed;
            continue;
        }
        bool ok = false;
        for (size_t k = from; k < x->nlog && !ok; k++)
            ok = x->log[k] == (uint32_t)key;
        if (!ok)
            impossible++;
        if (x->nlog > SIM_LOG - 4096) { /* keep the window, drop the rest */
            x->log[0] = x->log[x->nlog - 1];
            x->nlog = 1;
        }
    }
    if (sm)
        pyu_sampler_stats_get(sm, st);
    pyu_sampler_free(sm);
    pyu_profile_free(p);
    pyu_session_free(s);
    return impossible;
}

static void sim_init(sim *x, uint64_t seed)
{
    memset(x, 0, sizeof *x);
    build_fake(&x->m);
    x->rng = seed;
    x->unit[0] = 0;
    /* every instruction the frames stand at is a call */
    x->m.img[CODE + 0xC0 - IMG_BASE] = SIM_CALL_OP;
    x->m.img[CODE + 0xC0 + 2 * 4 - IMG_BASE] = SIM_CALL_OP;
    /* the frames lie in one chunk of the data stack: a header (previous,
     * size) right below the first */
    put64(&x->m, TSTATE + 0x60, FRAMES - 0x20);
    put64(&x->m, FRAMES - 0x18, 0xC00);
    put_frame(&x->m, SIM_FRAME(0), CODE, TSTATE + 0x80, 0, 0);
    put64(&x->m, SIM_FRAME(0) + 0x10, SIM_FUNC);
    /* the function's code object, after its header and four fields */
    put64(&x->m, SIM_FUNC + 0x30, CODE);
    x->m.img[TSTATE + 0x80 + 0x4A - IMG_BASE] = 3;
    x->depth = 1;
    for (int i = 0; i < 12; i++)
        sim_step(x);
}

/* A thread whose chain cannot be read still counts: alone, with an
 * <unknown> frame on top, the sample counted as failed; the other
 * threads' stacks of that sample are kept. */
static int torn_run(fake_mem *m, unsigned flags, pyu_sampler_stats *st)
{
    pyu_session *s = pyu_session_new();
    pyu_profile *p = pyu_profile_new();
    pyu_sampler *sm = NULL;
    int last = -100;
    CHECK_EQ(pyu_open_memory(s, &fake_ops, m, 99, RT), 0);
    pyu_sampler_opts o = {PYU_MODE_WALL, flags, 0};
    CHECK_EQ(pyu_sampler_new(s, &o, p, &sm), 0);
    for (int i = 0; sm && i < 3; i++) {
        int rc = pyu_sampler_take(sm);
        CHECK(rc >= 0);
        CHECK(i == 0 || rc == last);
        last = rc;
    }
    if (sm)
        pyu_sampler_stats_get(sm, st);
    pyu_sampler_free(sm);
    pyu_profile_free(p);
    pyu_session_free(s);
    return last;
}

/* Three threads, each one Python frame on its own base frame. */
static void three_based_threads(fake_mem *m)
{
    three_threads(m);
    for (uint64_t ts = TSTATE, k = 0; k < 3; k++) {
        uint64_t f = FRAMES + 0x400 + 0x100 * k;
        ts = k == 0 ? TSTATE : k == 1 ? TSTATE2 : TSTATE3;
        put_frame(m, f, CODE, ts + 0x80, 0, 0);
        put64(m, ts + 0x20, f);
        put64(m, ts + 0x70, ts + 0x80);
        m->img[ts + 0x80 + 0x4A - IMG_BASE] = 3;
        put64(m, ts + 0x80 + 0x8, 0);
    }
}

static void test_sampler_torn_thread(void)
{
    static fake_mem m;
    static const unsigned flags[] = {0, PYU_SAMPLE_NO_CACHE};
    for (size_t f = 0; f < 2; f++) {
        pyu_sampler_stats intact, broken;
        three_based_threads(&m);
        int all = torn_run(&m, flags[f], &intact);
        CHECK_EQ(all, 3);
        CHECK_EQ(intact.failed, 0);
        CHECK_EQ(intact.unknown, 0);
        put64(&m, TSTATE2 + 0x20, 0xdead0000); /* not mapped */
        int some = torn_run(&m, flags[f], &broken);
        CHECK_EQ(some, all);
        CHECK_EQ(broken.samples, 3);
        CHECK_EQ(broken.failed, 3);
        CHECK_EQ(broken.unknown, 3);
        CHECK_EQ(broken.stacks, 3 * (uint64_t)some);
        CHECK(broken.torn > intact.torn);
    }
}

/* 3.14 clears a frame it pops but for its instruction pointer; a frame
 * C code pushes starts with no previous frame, then gets its function
 * and code, its instruction pointer last.  A current frame copied with
 * neither a previous frame nor code was popped and its slot is being
 * filled again (accept.c): its code is the one its instruction names. */
static void test_frame_popped(void)
{
    static fake_mem m;
    build_fake_version(&m, 0x030E0AF0);
    pyu_session *s = pyu_session_new();
    CHECK_EQ(pyu_open_memory(s, &fake_ops, &m, 99, RT), 0);
    pyu_frame_raw f = {.addr = FRAMES, .owner = PYU_OWNER_THREAD,
                       .instr_ptr = CODE + 0xC0};
    CHECK(pyu_frame_popped(s, &f)); /* (being filled again) */
    f.func = 0x1234;
    CHECK(pyu_frame_popped(s, &f)); /* (its function in, not its code) */
    f.code = CODE;
    CHECK(!pyu_frame_popped(s, &f)); /* (a new call, not linked yet) */
    f.prev = FRAMES + 0x100;
    f.sp = FRAMES + 0x60; /* (past its locals: running) */
    CHECK(!pyu_frame_popped(s, &f));
    f.code = 0;
    CHECK(pyu_frame_popped(s, &f)); /* (popped, still linked) */
    f.owner = 3; /* an entry frame, on the C stack */
    f.prev = 0;
    CHECK(!pyu_frame_popped(s, &f));
    pyu_session_free(s);
    /* 3.13 clears nothing: a frame with no code there is no frame */
    build_fake_version(&m, 0x030D05F0);
    s = pyu_session_new();
    CHECK_EQ(pyu_open_memory(s, &fake_ops, &m, 99, RT), 0);
    f.owner = PYU_OWNER_THREAD;
    CHECK(!pyu_frame_popped(s, &f));
    pyu_session_free(s);
}

/* The innermost function of the stack whose count grew since the counts
 * in before[] (updated), or NULL. */
static const char *leaf_name(pyu_profile *p, uint64_t *before, size_t max)
{
    const pyu_profile_data *d = pyu_profile_get(p);
    const char *name = NULL;
    for (size_t i = 0; i < d->nstacks && i < max; i++) {
        if (d->stacks[i].count != before[i]) {
            const pyu_profile_node *nd = &d->nodes[d->stacks[i].node];
            name = d->funcs[d->frames[nd->frame].func].name;
        }
        before[i] = d->stacks[i].count;
    }
    return name;
}

/* CPython 3.13 reports no freed code objects: a cached code object is
 * used from sample to sample only while a new copy of its fields, read
 * with each stack, shows the same names and table.  A code object
 * replaced at the same address (here its qualname) is read again. */
static void test_sampler_code_checked(void)
{
    static fake_mem m;
    build_fake_version(&m, 0x030D05F0);
    put_frame(&m, FRAMES, CODE, FRAMES + 0x100, 0, 0);
    put64(&m, FRAMES, CODE); /* (3.13 does not tag it) */
    put_frame(&m, FRAMES + 0x100, 0, 0, 3, 0); /* the entry frame */
    pyu_session *s = pyu_session_new();
    pyu_profile *p = pyu_profile_new();
    pyu_sampler *sm = NULL;
    CHECK_EQ(pyu_open_memory(s, &fake_ops, &m, 99, RT), 0);
    pyu_sampler_opts o = {PYU_MODE_WALL, 0, 0};
    CHECK_EQ(pyu_sampler_new(s, &o, p, &sm), 0);
    if (!sm) {
        fprintf(stderr, "fake 3.13 runtime: %s\n", pyu_errmsg(s));
        pyu_profile_free(p);
        pyu_session_free(s);
        return;
    }
    uint64_t counted[4] = {0};
    pyu_sampler_stats before, after;
    CHECK_EQ(pyu_sampler_take(sm), 1);
    const char *name = leaf_name(p, counted, 4);
    CHECK(name && strcmp(name, "Mod.fn") == 0);
    pyu_sampler_stats_get(sm, &before);
    CHECK_EQ(pyu_sampler_take(sm), 1);
    pyu_sampler_stats_get(sm, &after);
    name = leaf_name(p, counted, 4);
    CHECK(name && strcmp(name, "Mod.fn") == 0);
    /* the batch and the recheck, with the code object's fields: its
     * names and table are not read again */
    CHECK_EQ(after.reads - before.reads, 2);
    put_str(&m, STRS + 0x300, "Mod.gn");
    put64(&m, CODE + 0x20, STRS + 0x300);
    CHECK_EQ(pyu_sampler_take(sm), 1);
    name = leaf_name(p, counted, 4);
    CHECK(name && strcmp(name, "Mod.gn") == 0);
    CHECK_EQ(pyu_sampler_take(sm), 1);
    name = leaf_name(p, counted, 4);
    CHECK(name && strcmp(name, "Mod.gn") == 0);
    pyu_sampler_free(sm);
    pyu_profile_free(p);
    pyu_session_free(s);
}

static uint64_t cpu_asked;
static int fake_thread_cpu(void *ctx, uint64_t tid, int *cpu)
{
    (void)ctx;
    cpu_asked = tid;
    *cpu = 5;
    return 0;
}

/* pyu_sampler_cpu: the CPU of the thread the last sample read running
 * Python, as the source says; nothing before a sample, or from a source
 * that cannot say. */
static void test_sampler_cpu(void)
{
    static fake_mem m;
    static const pyu_memory_ops ops = {.read = fake_read,
                                       .thread_cpu = fake_thread_cpu};
    build_fake_version(&m, 0x030D05F0);
    put_frame(&m, FRAMES, CODE, FRAMES + 0x100, 0, 0);
    put64(&m, FRAMES, CODE);
    put_frame(&m, FRAMES + 0x100, 0, 0, 3, 0);
    for (int with_op = 0; with_op < 2; with_op++) {
        pyu_session *s = pyu_session_new();
        pyu_profile *p = pyu_profile_new();
        pyu_sampler *sm = NULL;
        CHECK_EQ(pyu_open_memory(s, with_op ? &ops : &fake_ops, &m, 99, RT),
                 0);
        pyu_sampler_opts o = {PYU_MODE_WALL, 0, 0};
        CHECK_EQ(pyu_sampler_new(s, &o, p, &sm), 0);
        int cpu = -1;
        cpu_asked = 0;
        CHECK_EQ(pyu_sampler_cpu(sm, &cpu), -PYU_E_STATE);
        CHECK_EQ(pyu_sampler_take(sm), 1);
        CHECK_EQ(pyu_sampler_cpu(sm, &cpu), with_op ? 0 : -PYU_E_STATE);
        CHECK_EQ(cpu, with_op ? 5 : -1);
        /* (the sampled thread's native id, as a dump gives it) */
        CHECK(!with_op || cpu_asked == 4321);
        pyu_sampler_free(sm);
        pyu_profile_free(p);
        pyu_session_free(s);
    }
}

static void test_sampler_cache(void)
{
    static sim x;
    pyu_sampler_stats st;
    int failed;
    static const unsigned modes[] = {0, PYU_SAMPLE_READ_ONLY,
                                     PYU_SAMPLE_NO_CACHE};
    for (size_t m = 0; m < 3; m++) {
        /* the target changes only between samples: every stack exact */
        sim_init(&x, 0x9E3779B97F4A7C15ull + m);
        x.calm = 8; /* (often the same stack for a few samples) */
        CHECK_EQ(sim_run(&x, modes[m], 0, 20000, &st, &failed), 0);
        CHECK_EQ(failed, 0);
        CHECK_EQ(st.unknown, 0);
        CHECK_EQ(st.torn, 0);
        if (m == 0) { /* the anchor did its work */
            CHECK(st.anchor_writes > 0);
            CHECK(st.cache_full > 2000);
            /* (calls made above the frame the anchor names: read in the
             * window, the rest from the cache) */
            CHECK(st.cache_part > 1000);
            CHECK(st.frames_cached > st.frames_read / 4);
        } else {
            CHECK_EQ(st.anchor_writes, 0);
            CHECK_EQ(st.frames_cached, 0);
        }
        /* and while it reads: the simulation takes a step between two
         * ranges of a read in one of `racy` ranges.  A frame left behind
         * by a call that returned, under a caller that is past the call
         * or is a new frame, is caught by the acceptance rules; the
         * stacks that cannot be read whole are counted with <unknown>,
         * never left out */
        for (int racy = 2; racy <= 64; racy *= 4) {
            sim_init(&x, 0x1234567 + m);
            int bad = sim_run(&x, modes[m], racy, 20000, &st, &failed);
            CHECK(bad * 100 <= 20000); /* (mixes of frames of one function
                                          the rules cannot tell apart) */
            CHECK(failed < 20000 * 6 / 10);
            /* (every sample counted with <unknown>, on outer frames that
             * passed or alone, is a failed one: the summary's figure) */
            CHECK_EQ(st.failed, (uint64_t)failed);
            CHECK(st.torn + st.later > 0); /* (the races were met) */
            CHECK_EQ(st.stacks, 20000); /* (no sample vanishes) */
        }
    }
}

static int print_lines(int argc, char **argv)
{
    if (argc != 5)
        return 2;
    int first = atoi(argv[2]);
    const char *hex = argv[3];
    size_t len = strlen(hex) / 2;
    uint8_t *t = malloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        unsigned b;
        if (sscanf(hex + 2 * i, "%2x", &b) != 1)
            return 2;
        t[i] = (uint8_t)b;
    }
    long n = atol(argv[4]);
    bool positions = strcmp(argv[1], "positions") == 0;
    int old = strcmp(argv[1], "lines310") == 0   ? PYU_LINES_310
              : strcmp(argv[1], "lnotab") == 0 ? PYU_LINES_LNOTAB
                                               : -1;
    for (long i = 0; i < n; i++) {
        pyu_position p;
        int line;
        if (old >= 0) /* (no line: 0, as pyu_code_line shows it) */
            printf("%d\n", (line = pyu_linetable_line_old(
                                 t, len, first, (uint64_t)i, old)) < 0
                               ? 0
                               : line);
        else if (!positions)
            printf("%d\n", pyu_linetable_line(t, len, first, (uint64_t)i));
        else if (pyu_linetable_position(t, len, first, (uint64_t)i, &p) < 0)
            printf("-1\n");
        else
            printf("%d %d %d %d\n", p.line, p.end_line, p.col, p.end_col);
    }
    free(t);
    return 0;
}

/* The task renderers on hand-made task lists: a diamond (a task awaited by
 * two), a cycle, an awaiter that was not read. */
static char *render_tasks(const pyu_tasks *t, int tree, int *cycle)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    if (!f)
        return NULL;
    int rc = tree ? pyu_tasks_write_tree(t, f, cycle)
                  : pyu_tasks_write_table(t, f);
    CHECK(rc == 0);
    fclose(f);
    return buf;
}

static void test_task_rendering(void)
{
    pyu_frame fr[3] = {
        {.function = "inner", .name = "inner", .file = "a.py", .line = 3,
         .code_addr = 0x100},
        {.function = "outer", .name = "outer", .file = "a.py", .line = 9,
         .code_addr = 0x200},
        {.function = "main", .name = "main", .file = "m.py", .line = 1,
         .code_addr = 0x300},
    };
    uint64_t by_root = 0x10, by_both[2] = {0x20, 0x30}, by_ghost = 0x999;
    pyu_task tasks[4] = {
        {0x10, "root", 0, 1, 7, 0, &fr[2], 1, NULL, 0, NULL, 0},
        {0x20, "left", 0, 1, 7, 0, &fr[0], 2, &by_root, 1, NULL, 0},
        {0x30, "right", 0, 1, 7, 0, &fr[1], 1, &by_root, 1, NULL, 0},
        {0x40, "shared", 0, 1, 7, 0, &fr[0], 1, by_both, 2, NULL, 0},
    };
    pyu_tasks t = {0};
    t.tasks = tasks;
    t.ntasks = 4;
    int cycle = -1;
    char *out = render_tasks(&t, 1, &cycle);
    CHECK(cycle == 0);
    CHECK(out && strstr(out, "\u2514\u2500\u2500 (T) root\n"
                              "    \u2514\u2500\u2500  main m.py:1\n"));
    /* "shared" hangs under both of its awaiters */
    const char *p = out ? strstr(out, "(T) shared") : NULL;
    CHECK(p && strstr(p + 1, "(T) shared"));
    free(out);
    out = render_tasks(&t, 0, NULL);
    /* one row per awaiter: shared twice, root once (no awaiter, 0x0) */
    CHECK(out && strstr(out, "0x40") && strstr(strstr(out, "0x40") + 1, "0x40"));
    CHECK(out && strstr(out, "root                 main"));
    free(out);

    /* left awaits shared, shared awaits left: a cycle, no tree */
    uint64_t by_shared = 0x40, by_left = 0x20;
    tasks[1].awaited_by = &by_shared;
    tasks[3].awaited_by = &by_left;
    tasks[3].nawaited_by = 1;
    out = render_tasks(&t, 1, &cycle);
    CHECK(cycle == 1);
    CHECK(out && strstr(out, "cycle") && strstr(out, "left (0x20)") &&
          strstr(out, "shared (0x40)"));
    free(out);

    /* an awaiter that is not in the list: "Unknown" in the table, and the
     * task is a root of the tree */
    tasks[1].awaited_by = &by_ghost;
    tasks[3].awaited_by = by_both;
    tasks[3].nawaited_by = 2;
    out = render_tasks(&t, 0, NULL);
    CHECK(out && strstr(out, "Unknown") && strstr(out, "0x999"));
    free(out);
    out = render_tasks(&t, 1, &cycle);
    CHECK(cycle == 0 && out && strstr(out, "\u2514\u2500\u2500 (T) left\n"));
    free(out);
}

/* Frames at instructions (PYU_SAMPLE_OPCODES): interned with their
 * instruction, kept by a raw capture, and merged by line in the copy the
 * other formats are written from (counts and timeline on the merged
 * stacks). */
static void test_profile_instrs(void)
{
    pyu_profile *p = pyu_profile_new();
    long th = pyu_profile_add_thread(p, 1, 11, 0, 1);
    long fn = pyu_profile_add_func(p, "f", "/x/f.py", 1, PYU_FUNC_PYTHON);
    long a = pyu_profile_add_instr_frame(p, (uint32_t)fn, 2, 5,
                                         "BINARY_OP_ADD_INT", "BINARY_OP");
    long b = pyu_profile_add_instr_frame(p, (uint32_t)fn, 2, 7, "STORE_FAST",
                                         "STORE_FAST");
    long line = pyu_profile_add_frame(p, (uint32_t)fn, 2);
    CHECK(th == 0 && a >= 0 && b > a && line > b);
    CHECK_EQ(pyu_profile_add_instr_frame(p, (uint32_t)fn, 2, 5,
                                         "BINARY_OP_ADD_INT", "BINARY_OP"),
             a);
    CHECK_EQ(pyu_profile_add_instr_frame(p, (uint32_t)fn, 2, -3, "X", "Y"),
             line); /* (no instruction: no names) */
    CHECK(pyu_profile_has_instrs(p));
    long na = pyu_profile_push(p, 0, (uint32_t)a);
    long nb = pyu_profile_push(p, 0, (uint32_t)b);
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)na, 2, PYU_STATUS_HAS_GIL), 0);
    CHECK_EQ(pyu_profile_mark(p, 1000, 0), 0);
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)nb, 1, PYU_STATUS_HAS_GIL), 0);
    CHECK_EQ(pyu_profile_mark(p, 2000, 0), 0);
    pyu_profile_info_of(p)->samples = 2;
    /* a capture keeps them */
    char *buf = NULL, msg[256];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_EQ(pyu_profile_write_raw(p, f), 0);
    fclose(f);
    pyu_profile *q = pyu_profile_new();
    f = fmemopen(buf, len, "r");
    CHECK_EQ(pyu_capture_read(f, NULL, q, msg, sizeof msg), 0);
    fclose(f);
    free(buf);
    const pyu_profile_data *d = pyu_profile_get(q);
    int found = 0;
    for (size_t i = 0; i < d->nframes; i++)
        found += d->frames[i].instr == 5 &&
                 strcmp(d->frames[i].op, "BINARY_OP_ADD_INT") == 0 &&
                 strcmp(d->frames[i].base, "BINARY_OP") == 0;
    CHECK_EQ(found, 1);
    CHECK(pyu_profile_has_instrs(q));
    pyu_profile_free(q);
    /* by line: one frame, one stack of 3 with its status, the timeline's
     * events on it */
    q = pyu_profile_by_line(p);
    CHECK(q != NULL);
    d = pyu_profile_get(q);
    CHECK(!pyu_profile_has_instrs(q));
    CHECK_EQ(d->nnodes, 2);
    CHECK_EQ(d->nstacks, 1);
    CHECK(d->stacks[0].node == 1 && d->stacks[0].count == 3 &&
          d->stacks[0].status == PYU_STATUS_HAS_GIL);
    CHECK(d->frames[d->nodes[1].frame].line == 2 &&
          d->frames[d->nodes[1].frame].instr == -1);
    CHECK(d->total == 3 && d->threads[0].samples == 3 &&
          d->threads[0].status[0] == 3);
    pyu_profile_timeline tl;
    pyu_profile_timeline_get(q, &tl);
    CHECK(tl.nticks == 2 && tl.nevents == 2 && tl.events[0].node == 1 &&
          tl.events[1].node == 1 && tl.events[0].n == 2 && !tl.cut);
    CHECK_EQ(pyu_profile_info_of(q)->samples, 2);
    pyu_profile_free(q);
    pyu_profile_free(p);
}

/* The timeline: marks close samples, counts after the last mark are
 * pending; a profile's raw capture keeps the times (and a report's window
 * cuts by them); the timeline stops at a whole sample at its limits. */
static void test_profile_timeline(void)
{
    pyu_profile *p = pyu_profile_new();
    long th = pyu_profile_add_thread(p, 1, 11, 0, 1);
    long fn = pyu_profile_add_func(p, "f", "/x/f.py", 1, PYU_FUNC_PYTHON);
    long fr = pyu_profile_add_frame(p, (uint32_t)fn, 2);
    long nd = pyu_profile_push(p, 0, (uint32_t)fr);
    CHECK(th >= 0 && fn >= 0 && fr >= 0 && nd > 0);
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)nd, 1, PYU_STATUS_HAS_GIL), 0);
    CHECK_EQ(pyu_profile_mark(p, 5000000, 0), 0);
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)nd, 1, 0), 0);
    CHECK_EQ(pyu_profile_count(p, 0, 0, 1, 0), 0);
    CHECK_EQ(pyu_profile_mark(p, 7000000, 1), 0);
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)nd, 1, 0), 0); /* pending */
    pyu_profile_timeline tl;
    pyu_profile_timeline_get(p, &tl);
    CHECK_EQ(tl.nticks, 2);
    CHECK_EQ(tl.nevents, 4);
    CHECK(tl.ticks[0].end == 1 && tl.ticks[1].end == 3 && tl.ticks[1].failed);
    CHECK(!tl.cut);
    /* pending counts: the raw capture is one aggregated sample */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK_EQ(pyu_profile_write_raw(p, f), 0);
    fclose(f);
    pyu_profile *q = pyu_profile_new();
    char msg[256];
    f = fmemopen(buf, len, "r");
    CHECK_EQ(pyu_capture_read(f, NULL, q, msg, sizeof msg), 0);
    fclose(f);
    CHECK_EQ(pyu_profile_info_of(q)->samples, 1);
    CHECK_EQ(pyu_profile_get(q)->total, 4);
    pyu_profile_free(q);
    free(buf);
    /* all marked: the samples with their times; a window keeps the
     * samples in it, with times from the window's start */
    CHECK_EQ(pyu_profile_mark(p, 9000000, 0), 0);
    pyu_profile_info_of(p)->samples = 3;
    f = open_memstream(&buf, &len);
    CHECK_EQ(pyu_profile_write_raw(p, f), 0);
    CHECK_EQ(pyu_profile_write_gecko(p, f), 0);
    fclose(f);
    q = pyu_profile_new();
    pyu_capture_filter w = {.mode = -1, .from_ns = 6000000};
    f = fmemopen(buf, len, "r");
    CHECK_EQ(pyu_capture_read(f, &w, q, msg, sizeof msg), 0);
    fclose(f);
    CHECK_EQ(pyu_profile_info_of(q)->samples, 2);
    CHECK_EQ(pyu_profile_info_of(q)->failed, 1);
    CHECK_EQ(pyu_profile_get(q)->total, 3);
    pyu_profile_timeline_get(q, &tl);
    CHECK(tl.nticks == 2 && tl.ticks[0].t_ns == 1000000 &&
          tl.ticks[1].t_ns == 3000000 && tl.nevents == 3);
    pyu_profile_free(q);
    free(buf);
    /* a count too large for an event: the timeline stops at the last
     * mark, the counts go on */
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)nd, 1, 0), 0);
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)nd, 1ull << 33, 0), 0);
    CHECK_EQ(pyu_profile_mark(p, 10000000, 0), 0);
    pyu_profile_timeline_get(p, &tl);
    CHECK(tl.cut && tl.nticks == 3 && tl.nevents == 4);
    CHECK_EQ(pyu_profile_get(p)->total, 5 + (1ull << 33));
    pyu_profile_free(p);
    /* the limit of samples */
    p = pyu_profile_new();
    pyu_profile_add_thread(p, 1, 11, 0, 1);
    int bad = 0;
    for (uint32_t i = 0; i <= PYU_TIMELINE_MAX_TICKS; i++)
        bad += pyu_profile_count(p, 0, 0, 1, 0) != 0 ||
               pyu_profile_mark(p, i, 0) != 0;
    CHECK_EQ(bad, 0);
    pyu_profile_timeline_get(p, &tl);
    CHECK(tl.cut && tl.nticks == PYU_TIMELINE_MAX_TICKS &&
          tl.nevents == PYU_TIMELINE_MAX_TICKS);
    CHECK_EQ(pyu_profile_get(p)->total, PYU_TIMELINE_MAX_TICKS + 1);
    pyu_profile_free(p);
}

/* pyu_profile_select: a thread, a wall profile narrowed by status, a
 * window of its timeline, by line; a capture of the profile read with the
 * same filter keeps the same. */
static void test_profile_select(void)
{
    pyu_profile *p = pyu_profile_new();
    long a = pyu_profile_add_thread(p, 1, 11, 0, 1);
    long b = pyu_profile_add_thread(p, 2, 22, 0, 0);
    long fn = pyu_profile_add_func(p, "f", "/x/f.py", 1, PYU_FUNC_PYTHON);
    long f1 = pyu_profile_add_instr_frame(p, (uint32_t)fn, 2, 4, "LOAD_FAST",
                                          "LOAD_FAST");
    long f2 = pyu_profile_add_instr_frame(p, (uint32_t)fn, 2, 6, "CALL",
                                          "CALL");
    long n1 = pyu_profile_push(p, 0, (uint32_t)f1);
    long n2 = pyu_profile_push(p, 0, (uint32_t)f2);
    CHECK(a == 0 && b == 1 && f1 >= 0 && f2 > f1 && n1 > 0 && n2 > n1);
    unsigned gil = PYU_STATUS_HAS_GIL;
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)n1, 1, gil), 0);
    CHECK_EQ(pyu_profile_count(p, 1, (uint32_t)n2, 1, 0), 0);
    CHECK_EQ(pyu_profile_mark(p, 1000000, 0), 0);
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)n2, 1, 0), 0);
    CHECK_EQ(pyu_profile_count(p, 1, (uint32_t)n1, 1, gil), 0);
    CHECK_EQ(pyu_profile_mark(p, 2000000, 0), 0);
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)n1, 1, gil), 0);
    CHECK_EQ(pyu_profile_mark(p, 3000000, 1), 0);
    pyu_profile_info_of(p)->samples = 3;
    pyu_profile_info_of(p)->failed = 1;
    pyu_profile_info_of(p)->duration_ns = 4000000;
    pyu_profile *q;
    pyu_profile_timeline tl;
    /* a thread, by its native id: its counts and its part of the
     * timeline, every tick kept */
    pyu_profile_filter f = {.thread = 22, .mode = -1};
    CHECK_EQ(pyu_profile_select(p, &f, &q), 0);
    CHECK(pyu_profile_get(q)->nthreads == 1 && pyu_profile_get(q)->total == 2);
    CHECK_EQ(pyu_profile_get(q)->threads[0].native_thread_id, 22);
    pyu_profile_timeline_get(q, &tl);
    CHECK(tl.nticks == 3 && tl.nevents == 2 && tl.ticks[0].end == 1 &&
          tl.ticks[1].end == 2 && tl.ticks[2].end == 2 && tl.ticks[2].failed);
    pyu_profile_free(q);
    /* gil, from a wall profile: the stacks holding it; cpu: refused */
    f = (pyu_profile_filter){.mode = PYU_MODE_GIL};
    CHECK_EQ(pyu_profile_select(p, &f, &q), 0);
    CHECK_EQ(pyu_profile_get(q)->total, 3);
    CHECK_EQ(pyu_profile_info_of(q)->mode, PYU_MODE_GIL);
    pyu_profile_free(q);
    f = (pyu_profile_filter){.mode = PYU_MODE_CPU};
    CHECK_EQ(pyu_profile_select(p, &f, &q), -PYU_E_INVAL);
    CHECK(!q);
    /* a window: its samples, from its start */
    f = (pyu_profile_filter){.mode = -1, .from_ns = 1500000,
                             .to_ns = 3500000};
    CHECK_EQ(pyu_profile_select(p, &f, &q), 0);
    CHECK_EQ(pyu_profile_get(q)->total, 3);
    CHECK(pyu_profile_info_of(q)->samples == 2 &&
          pyu_profile_info_of(q)->failed == 1 &&
          pyu_profile_info_of(q)->duration_ns == 2000000);
    pyu_profile_timeline_get(q, &tl);
    CHECK(tl.nticks == 2 && tl.ticks[0].t_ns == 500000 &&
          tl.ticks[1].t_ns == 1500000 && tl.nevents == 3);
    /* ... as a capture of the whole profile read with that window */
    char *buf = NULL, msg[256];
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    CHECK_EQ(pyu_profile_write_raw(p, out), 0);
    fclose(out);
    pyu_profile *r = pyu_profile_new();
    FILE *in = fmemopen(buf, len, "r");
    CHECK_EQ(pyu_capture_read(in, &f, r, msg, sizeof msg), 0);
    fclose(in);
    CHECK(pyu_profile_get(r)->total == 3 &&
          pyu_profile_info_of(r)->samples == 2 &&
          pyu_profile_info_of(r)->failed == 1);
    pyu_profile_free(r);
    free(buf);
    pyu_profile_free(q);
    /* by line: the two instructions of line 2 are one frame */
    f = (pyu_profile_filter){.mode = -1, .by_line = 1};
    CHECK_EQ(pyu_profile_select(p, &f, &q), 0);
    CHECK(!pyu_profile_has_instrs(q) && pyu_profile_get(q)->nframes == 1 &&
          pyu_profile_get(q)->nnodes == 2 && pyu_profile_get(q)->total == 5);
    pyu_profile_free(q);
    CHECK(pyu_profile_has_instrs(p));
    pyu_profile_free(p);
}

/* ------------------------------------------------ processes of a profile */

static void test_profile_processes(void)
{
    pyu_profile *p = pyu_profile_new();
    CHECK(p != NULL);
    pyu_profile_info_of(p)->process.pid = 100;
    /* a hand-built profile: process 0 made from the info */
    CHECK_EQ(pyu_profile_add_thread(p, 7, 100, 0, 1), 0);
    CHECK_EQ(pyu_profile_get(p)->nprocesses, 1);
    CHECK_EQ(pyu_profile_get(p)->processes[0].pid, 100);
    /* the same pid again: that process, its command filled in */
    CHECK_EQ(pyu_profile_add_process(p, 100, "python3 app.py", "3.14.7", 0,
                                     0), 0);
    CHECK(strcmp(pyu_profile_get(p)->processes[0].command,
                 "python3 app.py") == 0);
    /* a child whose thread has the parent's ids (fork copies them): a
     * thread of its own */
    long c = pyu_profile_add_process(p, 101, "python3 app.py", "3.14.7", 0,
                                     5000);
    CHECK_EQ(c, 1);
    long t = pyu_profile_add_process_thread(p, (uint32_t)c, 7, 100, 0, 1);
    CHECK_EQ(t, 1);
    CHECK_EQ(pyu_profile_get(p)->threads[t].process, 1);
    CHECK_EQ(pyu_profile_add_process_thread(p, 9, 7, 100, 0, 1),
             -PYU_E_INVAL);
    long f1 = pyu_profile_add_func(p, "work", "app.py", 1, PYU_FUNC_PYTHON);
    long fr = pyu_profile_add_frame(p, (uint32_t)f1, 2);
    long n = pyu_profile_push(p, 0, (uint32_t)fr);
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)n, 3, 0), 0);
    CHECK_EQ(pyu_profile_count(p, 1, (uint32_t)n, 2, 0), 0);
    /* it exits; a later process with its pid is another one */
    CHECK_EQ(pyu_profile_end_process(p, 1, 9000), 0);
    CHECK(pyu_profile_get(p)->processes[1].exited &&
          pyu_profile_get(p)->processes[1].end_ns == 9000);
    CHECK_EQ(pyu_profile_add_process(p, 101, NULL, NULL, 0, 10000), 2);
    CHECK_EQ(pyu_profile_end_process(p, 3, 1), -PYU_E_INVAL);
    /* a process's part */
    pyu_profile_filter f = {.pid = 101, .mode = -1};
    pyu_profile *q;
    CHECK_EQ(pyu_profile_select(p, &f, &q), 0);
    const pyu_profile_data *d = pyu_profile_get(q);
    CHECK(d->nprocesses == 2 && d->nthreads == 1 && d->total == 2 &&
          d->threads[0].process == 0 && d->processes[0].pid == 101 &&
          d->processes[0].exited && d->processes[0].start_ns == 5000 &&
          strcmp(d->processes[0].python, "3.14.7") == 0);
    pyu_profile_free(q);
    pyu_profile_free(p);
}

/* A capture of p read back with filter f (NULL: all) into a new profile;
 * the read's return value in *rc, its message in msg. */
static pyu_profile *reread(const char *buf, size_t len,
                           const pyu_capture_filter *f, int *rc, char *msg,
                           size_t msglen)
{
    pyu_profile *q = pyu_profile_new();
    FILE *in = fmemopen((void *)buf, len, "r");
    *rc = pyu_capture_read(in, f, q, msg, msglen);
    fclose(in);
    return q;
}

/* The processes of a capture: a hand-built run of two processes (a child
 * found after the start, that exits, and a later process with its pid)
 * streamed as it goes, and written whole; read back whole, by pid, in a
 * window; a pid the capture lacks; a version 3 capture's one process. */
static void test_capture_processes(void)
{
    pyu_profile *p = pyu_profile_new();
    CHECK(p != NULL);
    pyu_profile_info *pi = pyu_profile_info_of(p);
    pi->process.pid = 100;
    snprintf(pi->process.python, sizeof pi->process.python, "3.14.7");
    CHECK_EQ(pyu_profile_add_process(p, 100, "python3 app.py", "3.14.7", 0,
                                     0), 0);
    CHECK_EQ(pyu_profile_add_process_thread(p, 0, 7, 100, 0, 1), 0);
    long fn = pyu_profile_add_func(p, "work", "app.py", 1, PYU_FUNC_PYTHON);
    long fr = pyu_profile_add_frame(p, (uint32_t)fn, 2);
    long nd = pyu_profile_push(p, 0, (uint32_t)fr);
    char *buf = NULL, msg[256];
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    pyu_capture *c;
    CHECK_EQ(pyu_capture_new(p, out, &c), 0);
    /* 1 ms: the parent */
    CHECK_EQ(pyu_profile_count(p, 0, (uint32_t)nd, 1, 0), 0);
    CHECK_EQ(pyu_profile_mark(p, 1000000, 0), 0);
    CHECK_EQ(pyu_capture_sample(c, 1000000, 0, 0), 0);
    /* 2 ms: a child found, a thread with the parent's ids (fork) */
    CHECK_EQ(pyu_profile_add_process(p, 101, "python3 worker.py", "3.14.7t",
                                     1, 2000000), 1);
    CHECK_EQ(pyu_profile_add_process_thread(p, 1, 7, 100, 0, 1), 1);
    CHECK_EQ(pyu_profile_count(p, 1, (uint32_t)nd, 1, 0), 0);
    CHECK_EQ(pyu_profile_mark(p, 2000000, 0), 0);
    CHECK_EQ(pyu_capture_sample(c, 2000000, 0, 1), 0);
    /* 3 ms it exits; 4 ms another process with its pid, sampled; then
     * the parent ends after the last sample */
    CHECK_EQ(pyu_profile_end_process(p, 1, 3000000), 0);
    CHECK_EQ(pyu_profile_add_process(p, 101, "python3 other.py", "3.14.7",
                                     0, 4000000), 2);
    CHECK_EQ(pyu_profile_add_process_thread(p, 2, 8, 101, 0, 1), 2);
    CHECK_EQ(pyu_profile_count(p, 2, (uint32_t)nd, 1, 0), 0);
    CHECK_EQ(pyu_profile_mark(p, 4000000, 0), 0);
    CHECK_EQ(pyu_capture_sample(c, 4000000, 0, 0), 0);
    CHECK_EQ(pyu_profile_end_process(p, 0, 5000000), 0);
    pi->duration_ns = 5000000;
    pi->samples = 3;
    pi->missed = 1;
    CHECK_EQ(pyu_capture_end(c), 0);
    fclose(out);
    /* read back: the processes, their times, each thread's */
    int rc;
    pyu_profile *q = reread(buf, len, NULL, &rc, msg, sizeof msg);
    CHECK_EQ(rc, 0);
    CHECK_EQ(msg[0], 0);
    const pyu_profile_data *d = pyu_profile_get(q);
    CHECK_EQ(d->nprocesses, 3);
    CHECK_EQ(d->nthreads, 3);
    if (d->nprocesses == 3 && d->nthreads == 3) {
        const pyu_profile_process *pr = d->processes;
        CHECK(pr[0].pid == 100 && pr[0].exited && pr[0].end_ns == 5000000 &&
              pr[0].start_ns == 0 &&
              strcmp(pr[0].command, "python3 app.py") == 0);
        CHECK(pr[1].pid == 101 && pr[1].exited && pr[1].end_ns == 3000000 &&
              pr[1].start_ns == 2000000 && pr[1].free_threaded &&
              strcmp(pr[1].python, "3.14.7t") == 0 &&
              strcmp(pr[1].command, "python3 worker.py") == 0);
        CHECK(pr[2].pid == 101 && !pr[2].exited &&
              pr[2].start_ns == 4000000 &&
              strcmp(pr[2].command, "python3 other.py") == 0);
        CHECK(d->threads[0].process == 0 && d->threads[1].process == 1 &&
              d->threads[2].process == 2 &&
              d->threads[1].native_thread_id == 100);
    }
    CHECK(d->info->samples == 3 && d->info->missed == 1 && d->total == 3);
    pyu_profile_free(q);
    /* one pid: its processes, its samples; the run's missed ticks */
    pyu_capture_filter f = {.pid = 101, .mode = -1};
    q = reread(buf, len, &f, &rc, msg, sizeof msg);
    CHECK_EQ(rc, 0);
    d = pyu_profile_get(q);
    CHECK(d->nprocesses == 2 && d->nthreads == 2 && d->total == 2 &&
          d->info->samples == 2 && d->info->missed == 1);
    CHECK(d->info->process.pid == 101 &&
          strcmp(d->info->process.python, "3.14.7t") == 0 &&
          d->info->process.free_threaded);
    CHECK(d->nprocesses == 2 && d->processes[0].exited &&
          d->threads[0].process == 0 && d->threads[1].process == 1);
    pyu_profile_free(q);
    /* a window [1.5 ms, 3.5 ms): times from its start; the child's end in
     * it, the parent's after it; the process found after it not there */
    f = (pyu_capture_filter){.mode = -1, .from_ns = 1500000,
                             .to_ns = 3500000};
    q = reread(buf, len, &f, &rc, msg, sizeof msg);
    CHECK_EQ(rc, 0);
    d = pyu_profile_get(q);
    CHECK(d->nprocesses == 2 && d->nthreads == 2 && d->info->samples == 1);
    if (d->nprocesses == 2)
        CHECK(!d->processes[0].exited && d->processes[1].start_ns == 500000 &&
              d->processes[1].exited &&
              d->processes[1].end_ns == 1500000);
    pyu_profile_free(q);
    /* a window that ends before the child's end: the later process of its
     * pid is not taken for it */
    f = (pyu_capture_filter){.pid = 101, .mode = -1, .to_ns = 2500000};
    q = reread(buf, len, &f, &rc, msg, sizeof msg);
    CHECK_EQ(rc, 0);
    d = pyu_profile_get(q);
    CHECK(d->nprocesses == 1 && d->nthreads == 1 && !d->processes[0].exited &&
          d->threads[0].process == 0 && d->info->samples == 1);
    pyu_profile_free(q);
    /* a pid the capture lacks: one line naming those it has */
    f = (pyu_capture_filter){.pid = 999, .mode = -1};
    q = reread(buf, len, &f, &rc, msg, sizeof msg);
    CHECK_EQ(rc, -PYU_E_INVAL);
    CHECK(strstr(msg, "no process 999") && strstr(msg, "100, 101") &&
          !strchr(msg, '\n'));
    pyu_profile_free(q);
    free(buf);
    /* the whole profile written at once: the same processes */
    out = open_memstream(&buf, &len);
    CHECK_EQ(pyu_profile_write_raw(p, out), 0);
    fclose(out);
    q = reread(buf, len, NULL, &rc, msg, sizeof msg);
    CHECK_EQ(rc, 0);
    d = pyu_profile_get(q);
    CHECK(d->nprocesses == 3 && d->nthreads == 3 && d->total == 3);
    if (d->nprocesses == 3)
        CHECK(d->processes[0].exited && d->processes[1].exited &&
              d->processes[1].end_ns == 3000000 && !d->processes[2].exited &&
              d->processes[2].start_ns == 4000000);
    pyu_profile_free(q);
    f = (pyu_capture_filter){.pid = 100, .mode = -1};
    q = reread(buf, len, &f, &rc, msg, sizeof msg);
    CHECK(rc == 0 && pyu_profile_get(q)->info->samples == 1 &&
          pyu_profile_get(q)->nprocesses == 1);
    pyu_profile_free(q);
    free(buf);
    pyu_profile_free(p);
    /* version 3: the header's pid and version are the one process */
    static const char v3[] =
        "PYUNWRAW\003"
        "P\052\0063.13.5\0\0\0\0" /* pid 42, "3.13.5", wall, 0, 0, 0 */
        "T\001\052\0\001\0"       /* thread 1, native 42, main, no name */
        "S\0\0\0\001\0\0\0\001"   /* one sample: thread 0, the root */
        "E\0\001\0\0";
    q = reread(v3, sizeof v3 - 1, NULL, &rc, msg, sizeof msg);
    CHECK_EQ(rc, 0);
    d = pyu_profile_get(q);
    CHECK(d->nprocesses == 1 && d->nthreads == 1 && d->total == 1);
    if (d->nprocesses == 1)
        CHECK(d->processes[0].pid == 42 && !d->processes[0].exited &&
              strcmp(d->processes[0].python, "3.13.5") == 0 &&
              d->threads[0].process == 0);
    pyu_profile_free(q);
    f = (pyu_capture_filter){.pid = 42, .mode = -1};
    q = reread(v3, sizeof v3 - 1, &f, &rc, msg, sizeof msg);
    CHECK(rc == 0 && pyu_profile_get(q)->total == 1);
    pyu_profile_free(q);
    f.pid = 43;
    q = reread(v3, sizeof v3 - 1, &f, &rc, msg, sizeof msg);
    CHECK_EQ(rc, -PYU_E_INVAL);
    CHECK(strstr(msg, "its process: 42)") != NULL);
    pyu_profile_free(q);
}

/* ------------------------------------------------ JSON described to a sink */

/* A sink that counts calls, tracks nesting, and fails at call fail_at. */
typedef struct count_sink {
    int calls, fail_at, depth, max_depth, after_failure;
    bool failed;
} count_sink;

static int cs_call(count_sink *c)
{
    if (c->failed)
        c->after_failure++;
    if (++c->calls == c->fail_at) {
        c->failed = true;
        return -PYU_E_IO;
    }
    return 0;
}

static int cs_open(void *arg, char kind, unsigned layout)
{
    count_sink *c = arg;
    (void)kind, (void)layout;
    if (++c->depth > c->max_depth)
        c->max_depth = c->depth;
    return cs_call(c);
}

static int cs_close(void *arg, char kind)
{
    count_sink *c = arg;
    (void)kind;
    c->depth--;
    return cs_call(c);
}

static int cs_key(void *arg, const char *k) { (void)k; return cs_call(arg); }
static int cs_str(void *arg, const char *v) { (void)v; return cs_call(arg); }
static int cs_int(void *arg, int64_t v) { (void)v; return cs_call(arg); }
static int cs_uint(void *arg, uint64_t v) { (void)v; return cs_call(arg); }
static int cs_bool(void *arg, int v) { (void)v; return cs_call(arg); }
static int cs_null(void *arg) { return cs_call(arg); }

static void test_json_sink(void)
{
    pyu_var vars[2] = {{.name = "x", .type = "int", .value = "1", .addr = 8},
                       {.name = "y", .type = "str", .value = "'a'"}};
    pyu_frame frames[3] = {
        {"f", "f", "a.py", 3, 0, vars, 2, NULL, 3, 4, 9, 0},
        {"g", "g", "a.py", 0, 0, NULL, 0, "unreadable", 0, -1, -1, 0},
        {"<module>", "<module>", "a.py", 9, 0, NULL, 0, NULL, 9, -1, -1, 0}};
    pyu_thread threads[2] = {
        {.thread_id = 1, .native_thread_id = 11, .main = 1,
         .status = PYU_STATUS_HAS_GIL | PYU_STATUS_ON_CPU, .frames = frames,
         .nframes = 3},
        {.thread_id = 2, .native_thread_id = 12, .frames = frames + 2,
         .nframes = 1, .error = "torn", .truncated = PYU_TRUNC_DEPTH}};
    pyu_dump d = {.process = {.pid = 7, .signal = 11, .signal_thread = 12,
                              .python = "3.14.7"},
                  .threads = threads, .nthreads = 2, .has_locals = 1};
    count_sink c = {0};
    pyu_json_sink k = {&c, cs_open, cs_close, cs_key, cs_str,
                       cs_int, cs_uint, cs_bool, cs_null};
    CHECK_EQ(pyu_dump_emit(&d, &k), 0);
    CHECK_EQ(c.depth, 0);
    CHECK_EQ(c.max_depth, 7); /* {threads[{frames[{locals[{ */
    int total = c.calls;
    CHECK(total > 50);
    /* a sink's error stops the description and is what it returns */
    for (int at = 1; at <= total; at++) {
        c = (count_sink){.fail_at = at};
        CHECK_EQ(pyu_dump_emit(&d, &k), -PYU_E_IO);
        CHECK_EQ(c.after_failure, 0);
        CHECK_EQ(c.calls, at);
    }
    /* the text sink: the same description as --json prints it */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f && pyu_dump_write_json(&d, f) == 0);
    fclose(f);
    CHECK(buf && strstr(buf, "\"frames\": [\n    {\"function\": \"f\"") &&
          strstr(buf, "\"line\": null, \"end_line\": null, \"column\": null, "
                      "\"end_column\": null, \"source_changed\": null, "
                      "\"locals\": [], \"locals_error\": "
                      "\"unreadable\"}") &&
          strstr(buf, "\"status\": [\"has_gil\", \"on_cpu\"]") &&
          strstr(buf, "\"truncated\": \"depth\", \"error\": \"torn\"}\n], "
                      "\"threads_truncated\": false, \"signal\": "
                      "{\"number\": 11, \"native_thread_id\": 12}}\n"));
    free(buf);
    /* one frame alone, with and without its variables */
    c = (count_sink){0};
    CHECK_EQ(pyu_frame_emit(&frames[0], 0, &k), 0);
    int plain = c.calls;
    c = (count_sink){0};
    CHECK_EQ(pyu_frame_emit(&frames[0], 1, &k), 0);
    CHECK(c.calls > plain && c.depth == 0 && c.max_depth == 3);
}

/* ------------------------------------------------- the debuggers' ticks */

static void test_ticks(void)
{
    /* tick n at its point of the interval after start + n * period */
    CHECK(fabs(pyu_cmd_tick_due(100.0, 0.01, 1, 0.0, INFINITY) - 100.01) <
          1e-9);
    CHECK(fabs(pyu_cmd_tick_due(100.0, 0.01, 3, 0.5, INFINITY) - 100.035) <
          1e-9);
    CHECK(pyu_cmd_tick_due(100.0, 0.01, 3, 0.999, 200.0) < 100.04);
    /* never past the deadline; no rate: at once */
    CHECK(pyu_cmd_tick_due(100.0, 0.5, 4, 0.5, 102.0) == 102.0);
    CHECK(pyu_cmd_tick_due(100.0, 0.0, 7, 0.3, 102.0) == 100.0);
    /* missed: the ticks of the duration beyond the samples */
    CHECK_EQ(pyu_cmd_ticks_missed(2000000000, 1000000, 1991), 9);
    CHECK_EQ(pyu_cmd_ticks_missed(2000000000, 1000000, 2000), 0);
    CHECK_EQ(pyu_cmd_ticks_missed(2000000000, 1000000, 2001), 0);
    CHECK_EQ(pyu_cmd_ticks_missed(1999999, 1000000, 0), 1);
    CHECK_EQ(pyu_cmd_ticks_missed(2000000000, 0, 5), 0);
}

/* ------------------------------------------------- the CLI's schedule */

static void test_schedule(void)
{
    uint64_t missed = 99;
    /* the next tick, however late, while its interval ([10, 20) for
     * tick 1 of 10 ns from 0) ended under `late` ns ago */
    uint64_t late = 80;
    CHECK_EQ(pyu_sched_next(0, 10, late, 0, 5, &missed), 1);
    CHECK_EQ(missed, 0);
    CHECK_EQ(pyu_sched_next(0, 10, late, 0, 20 + late - 1, &missed), 1);
    CHECK_EQ(missed, 0);
    /* then missed, one by one: the first tick served is the first whose
     * interval is not that far past */
    CHECK_EQ(pyu_sched_next(0, 10, late, 0, 20 + late, &missed), 2);
    CHECK_EQ(missed, 1);
    CHECK_EQ(pyu_sched_next(1000, 10, late, 4, 1000 + 10 * 5 + late + 373,
                            &missed), 42);
    CHECK_EQ(missed, 37);
    /* not late at all (the schedule before 2026-12-07): missed once its
     * own interval is over */
    CHECK_EQ(pyu_sched_next(0, 10, 0, 0, 19, &missed), 1);
    CHECK_EQ(pyu_sched_next(0, 10, 0, 0, 20, &missed), 2);
    CHECK_EQ(missed, 1);
    /* a clock read before the start, or no interval: the next tick */
    CHECK_EQ(pyu_sched_next(1000, 10, late, 0, 999, &missed), 1);
    CHECK_EQ(missed, 0);
    CHECK_EQ(pyu_sched_next(0, 0, 0, 7, 12345, &missed), 8);
    CHECK_EQ(missed, 0);
    /* the CLI's: 10 ms, at 100,000/s as at 1/s */
    CHECK_EQ(pyu_sched_next(0, 10000, PYU_LATE_NS, 0, 10019999, &missed),
             1);
    CHECK_EQ(pyu_sched_next(0, 10000, PYU_LATE_NS, 0, 10020000, &missed),
             2);
    CHECK_EQ(pyu_sched_next(0, 1000000000, PYU_LATE_NS, 0, 2009999999,
                            &missed), 1);
    CHECK_EQ(pyu_sched_next(0, 1000000000, PYU_LATE_NS, 0, 2010000000,
                            &missed), 2);
}

int main(int argc, char **argv)
{
    if (argc > 1 && (strcmp(argv[1], "lines") == 0 ||
                     strcmp(argv[1], "lines310") == 0 ||
                     strcmp(argv[1], "lnotab") == 0 ||
                     strcmp(argv[1], "positions") == 0))
        return print_lines(argc, argv);
    test_linetable();
    test_strings();
    test_core_reader();
    test_versions();
    test_py311();
    test_frame_objects();
    test_frame_popped();
    test_main_thread_off_the_list();
    test_fake_runtime();
    test_task_rendering();
    test_walk();
    test_describe_epoch();
    test_errors();
    test_sampler_cache();
    test_sampler_torn_thread();
    test_sampler_code_checked();
    test_sampler_cpu();
    test_profile_timeline();
    test_profile_select();
    test_profile_processes();
    test_capture_processes();
    test_profile_instrs();
    test_json_sink();
    test_ticks();
    test_schedule();
    printf("%d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
