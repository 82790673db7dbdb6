/* ELF files on disk: where .PyRuntime and _PyRuntime are in a python
 * executable or libpython, and its Py_Version (before 3.11: its
 * PY_VERSION string).  Section headers are not mapped into a process,
 * so they are read from the file. */
#include "../internal.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

bool pyu_elf_init(void)
{
    static int ok = -1;
    if (ok < 0)
        ok = elf_version(EV_CURRENT) != EV_NONE;
    return ok == 1;
}

/* The 8-byte value of a defined symbol, read from its section in the
 * file (Py_Version lies in .rodata, which cores leave out). */
static bool symbol_value(Elf *elf, const GElf_Sym *sym, uint64_t *out)
{
    Elf_Scn *scn = elf_getscn(elf, sym->st_shndx);
    GElf_Shdr sh;
    if (!scn || !gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
        sym->st_value < sh.sh_addr || sym->st_value - sh.sh_addr > sh.sh_size ||
        sh.sh_size - (sym->st_value - sh.sh_addr) < 8)
        return false;
    Elf_Data *d = elf_getdata(scn, NULL);
    uint64_t at = sym->st_value - sh.sh_addr;
    if (!d || !d->d_buf || d->d_size < at + 8)
        return false;
    memcpy(out, (const uint8_t *)d->d_buf + at, 8);
    return true;
}

static void find_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
                         pyu_elf_info *info)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    if (!data || sh->sh_entsize == 0)
        return;
    size_t n = sh->sh_size / sh->sh_entsize;
    for (size_t i = 0; i < n; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
            continue;
        const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
        if (!name)
            continue;
        if (!info->has_symbol && strcmp(name, "_PyRuntime") == 0) {
            info->has_symbol = true;
            info->symbol_vaddr = sym.st_value;
        } else if (!info->has_py_version && sym.st_size == 8 &&
                   strcmp(name, "Py_Version") == 0) {
            info->has_py_version = symbol_value(elf, &sym, &info->py_version);
        }
        if (info->has_symbol && info->has_py_version)
            return;
    }
}

/* A CPython older than 3.11 has no Py_Version: its version is the
 * PY_VERSION string in .rodata ("3.10.13", often merged by the linker into
 * the tail of a longer string, such as an install path ending in it).
 * The first "3.M.N" there (not part of a longer number, ended by a NUL or
 * by '+', as Debian's "3.9.2+") with M from 6 to 10 gives the version
 * (final release level: the micro version is what readers show). */
static bool rodata_version(Elf *elf, size_t shstrndx, uint64_t *out)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        const char *name;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
            !(name = elf_strptr(elf, shstrndx, sh.sh_name)) ||
            strcmp(name, ".rodata") != 0)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf)
            return false;
        const char *b = d->d_buf;
        size_t n = d->d_size;
        for (size_t i = 1; i + 6 <= n; i++) {
            if (b[i] != '3' || b[i + 1] != '.' ||
                (b[i - 1] >= '0' && b[i - 1] <= '9') || b[i - 1] == '.')
                continue;
            size_t k = i + 2;
            unsigned minor = 0, micro = 0, dm = 0, du = 0;
            while (k < n && b[k] >= '0' && b[k] <= '9' && dm < 3)
                minor = minor * 10 + (unsigned)(b[k++] - '0'), dm++;
            if (!dm || k >= n || b[k++] != '.')
                continue;
            while (k < n && b[k] >= '0' && b[k] <= '9' && du < 3)
                micro = micro * 10 + (unsigned)(b[k++] - '0'), du++;
            if (!du || k >= n || (b[k] != '\0' && b[k] != '+') ||
                minor < 6 || minor > 10)
                continue;
            *out = 0x03000000u | minor << 16 | micro << 8 | 0xF0;
            return true;
        }
        return false;
    }
    return false;
}

void pyu_build_id_hex(const uint8_t *id, size_t len, char *out)
{
    for (size_t i = 0; i < len; i++)
        sprintf(out + 2 * i, "%02x", id[i]);
    out[2 * len] = 0;
}

size_t pyu_notes_build_id(const uint8_t *notes, size_t len, uint8_t *id)
{
    size_t at = 0;
    while (len - at >= 12) {
        uint32_t namesz, descsz, type;
        memcpy(&namesz, notes + at, 4);
        memcpy(&descsz, notes + at + 4, 4);
        memcpy(&type, notes + at + 8, 4);
        at += 12;
        size_t nlen = ((size_t)namesz + 3) & ~(size_t)3;
        size_t dlen = ((size_t)descsz + 3) & ~(size_t)3;
        if (nlen > len - at || dlen > len - at - nlen)
            return 0;
        if (type == 3 /* NT_GNU_BUILD_ID */ && namesz == 4 &&
            memcmp(notes + at, "GNU", 4) == 0 && descsz > 0 &&
            descsz <= PYU_BUILD_ID_MAX) {
            memcpy(id, notes + at + nlen, descsz);
            return descsz;
        }
        at += nlen + dlen;
    }
    return 0;
}

int pyu_open_regular(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    return fd;
}

int pyu_elf_inspect(const char *path, pyu_elf_info *info, pyu_err *err)
{
    int rc = 0;
    Elf *elf = NULL;
    memset(info, 0, sizeof *info);
    if (!pyu_elf_init())
        return pyu_err_set(err, PYU_E_IO, "libelf is unusable");
    int fd = pyu_open_regular(path);
    if (fd < 0)
        return pyu_err_set(err, PYU_E_IO, errno == EINVAL
                                              ? "%s is not a regular file"
                                              : "cannot open %s: %s",
                           path, strerror(errno));
    elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!elf || elf_kind(elf) != ELF_K_ELF) {
        rc = pyu_err_set(err, PYU_E_IO, "%s is not an ELF file", path);
        goto out;
    }
    size_t nph, shstrndx;
    if (elf_getphdrnum(elf, &nph) != 0) {
        rc = pyu_err_set(err, PYU_E_IO, "%s: %s", path, elf_errmsg(-1));
        goto out;
    }
    bool have_base = false;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_NOTE &&
            !info->build_id_len && ph.p_filesz <= (1u << 20)) {
            Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)ph.p_offset,
                                               ph.p_filesz, ELF_T_BYTE);
            if (d && d->d_buf)
                info->build_id_len =
                    pyu_notes_build_id(d->d_buf, d->d_size, info->build_id);
        }
        if (!have_base && gelf_getphdr(elf, (int)i, &ph) &&
            ph.p_type == PT_LOAD) {
            uint64_t align = ph.p_align > 1 ? ph.p_align : 1;
            if (align & (align - 1))
                align = 4096;
            info->base_vaddr = ph.p_vaddr & ~(align - 1);
            have_base = true;
        }
    }
    if (!have_base) {
        rc = pyu_err_set(err, PYU_E_IO, "%s has no loadable segment", path);
        goto out;
    }
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        goto out; /* no section headers: nothing more to learn */
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh))
            continue;
        const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
        if (name && strcmp(name, ".PyRuntime") == 0 && sh.sh_addr) {
            info->has_pyruntime = true;
            info->pyruntime_vaddr = sh.sh_addr;
        } else if (name && strcmp(name, ".AsyncioDebug") == 0 && sh.sh_addr) {
            info->has_asyncio = true;
            info->asyncio_vaddr = sh.sh_addr;
            info->asyncio_size = sh.sh_size;
        } else if (sh.sh_type == SHT_DYNSYM) {
            find_symbols(elf, scn, &sh, info);
        }
    }
    if ((info->has_pyruntime || info->has_symbol) && !info->has_py_version)
        info->has_py_version = rodata_version(elf, shstrndx,
                                              &info->py_version);
out:
    if (elf)
        elf_end(elf);
    close(fd);
    return rc;
}
