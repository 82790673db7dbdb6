/* _Py_DebugOffsets: one layout per CPython minor version, normalised.
 *
 * CPython 3.13+ starts _PyRuntime with a table of sizes and offsets of its
 * internal structs.  Fields were inserted between versions, so each minor
 * version has its own order; the lists below give it.  The table comes from
 * target memory: it is validated here once (every used field inside its
 * struct and aligned) and used raw afterwards.
 */
#include "../internal.h"

#include <inttypes.h>
#include <string.h>

#define L(n) PYU_F_##n

static const uint8_t layout_313[] = {
    L(rt_size), L(rt_finalizing), L(rt_interpreters_head),
    L(is_size), L(is_id), L(is_next), L(is_threads_head), L(is_gc),
    L(is_imports_modules), L(is_sysdict), L(is_builtins), L(is_ceval_gil),
    L(is_gil_runtime_state), L(is_gil_enabled), L(is_gil_locked),
    L(is_gil_holder),
    L(ts_size), L(ts_prev), L(ts_next), L(ts_interp), L(ts_current_frame),
    L(ts_thread_id), L(ts_native_thread_id), L(ts_datastack_chunk),
    L(ts_status),
    L(fr_size), L(fr_previous), L(fr_executable), L(fr_instr_ptr),
    L(fr_localsplus), L(fr_owner),
    L(co_size), L(co_filename), L(co_name), L(co_qualname), L(co_linetable),
    L(co_firstlineno), L(co_argcount), L(co_localsplusnames),
    L(co_localspluskinds), L(co_code_adaptive),
    L(ob_size), L(ob_type),
    L(tp_size), L(tp_name), L(tp_repr), L(tp_flags),
    L(tuple_size), L(tuple_ob_item), L(tuple_ob_size),
    L(list_size), L(list_ob_item), L(list_ob_size),
    L(dict_size), L(dict_ma_keys), L(dict_ma_values),
    L(float_size), L(float_ob_fval),
    L(long_size), L(long_lv_tag), L(long_ob_digit),
    L(bytes_size), L(bytes_ob_size), L(bytes_ob_sval),
    L(str_size), L(str_state), L(str_length), L(str_ascii_size),
    L(gc_size), L(gc_collecting),
};

static const uint8_t layout_314[] = {
    L(rt_size), L(rt_finalizing), L(rt_interpreters_head),
    L(is_size), L(is_id), L(is_next), L(is_threads_head), L(is_threads_main),
    L(is_gc), L(is_imports_modules), L(is_sysdict), L(is_builtins),
    L(is_ceval_gil), L(is_gil_runtime_state), L(is_gil_enabled),
    L(is_gil_locked), L(is_gil_holder), L(is_code_object_generation),
    L(is_tlbc_generation),
    L(ts_size), L(ts_prev), L(ts_next), L(ts_interp), L(ts_current_frame),
    L(ts_thread_id), L(ts_native_thread_id), L(ts_datastack_chunk),
    L(ts_status),
    L(fr_size), L(fr_previous), L(fr_executable), L(fr_instr_ptr),
    L(fr_localsplus), L(fr_owner), L(fr_stackpointer), L(fr_tlbc_index),
    L(co_size), L(co_filename), L(co_name), L(co_qualname), L(co_linetable),
    L(co_firstlineno), L(co_argcount), L(co_localsplusnames),
    L(co_localspluskinds), L(co_code_adaptive), L(co_tlbc),
    L(ob_size), L(ob_type),
    L(tp_size), L(tp_name), L(tp_repr), L(tp_flags),
    L(tuple_size), L(tuple_ob_item), L(tuple_ob_size),
    L(list_size), L(list_ob_item), L(list_ob_size),
    L(set_size), L(set_used), L(set_table), L(set_mask),
    L(dict_size), L(dict_ma_keys), L(dict_ma_values),
    L(float_size), L(float_ob_fval),
    L(long_size), L(long_lv_tag), L(long_ob_digit),
    L(bytes_size), L(bytes_ob_size), L(bytes_ob_sval),
    L(str_size), L(str_state), L(str_length), L(str_ascii_size),
    L(gc_size), L(gc_collecting),
    L(gen_size), L(gen_gi_name), L(gen_gi_iframe), L(gen_gi_frame_state),
    L(llist_next), L(llist_prev),
    L(dbg_eval_breaker), L(dbg_remote_debugger_support),
    L(dbg_remote_debugging_enabled), L(dbg_debugger_pending_call),
    L(dbg_debugger_script_path), L(dbg_debugger_script_path_size),
};

/* 3.15.0b4 and later (3.15.0b1-b3 lack last_profiled_frame_seq). */
static const uint8_t layout_315[] = {
    L(rt_size), L(rt_finalizing), L(rt_interpreters_head),
    L(is_size), L(is_id), L(is_next), L(is_threads_head), L(is_threads_main),
    L(is_gc), L(is_imports_modules), L(is_sysdict), L(is_builtins),
    L(is_ceval_gil), L(is_gil_runtime_state), L(is_gil_enabled),
    L(is_gil_locked), L(is_gil_holder), L(is_code_object_generation),
    L(is_tlbc_generation),
    L(ts_size), L(ts_prev), L(ts_next), L(ts_interp), L(ts_current_frame),
    L(ts_base_frame), L(ts_last_profiled_frame),
    L(ts_last_profiled_frame_seq), L(ts_thread_id), L(ts_native_thread_id),
    L(ts_datastack_chunk), L(ts_status), L(ts_holds_gil),
    L(ts_gil_requested), L(ts_current_exception), L(ts_exc_state),
    L(err_exc_value),
    L(fr_size), L(fr_previous), L(fr_executable), L(fr_instr_ptr),
    L(fr_localsplus), L(fr_owner), L(fr_stackpointer), L(fr_tlbc_index),
    L(co_size), L(co_filename), L(co_name), L(co_qualname), L(co_linetable),
    L(co_firstlineno), L(co_argcount), L(co_localsplusnames),
    L(co_localspluskinds), L(co_code_adaptive), L(co_tlbc),
    L(ob_size), L(ob_type),
    L(tp_size), L(tp_name), L(tp_repr), L(tp_flags), L(tp_basicsize),
    L(tp_dictoffset),
    L(ht_size), L(ht_cached_keys),
    L(tuple_size), L(tuple_ob_item), L(tuple_ob_size),
    L(list_size), L(list_ob_item), L(list_ob_size),
    L(set_size), L(set_used), L(set_table), L(set_mask),
    L(dict_size), L(dict_ma_keys), L(dict_ma_values),
    L(float_size), L(float_ob_fval),
    L(long_size), L(long_lv_tag), L(long_ob_digit),
    L(bytes_size), L(bytes_ob_size), L(bytes_ob_sval),
    L(str_size), L(str_state), L(str_length), L(str_ascii_size),
    L(str_compact_size),
    L(gc_size), L(gc_collecting), L(gc_frame), L(gc_generation_stats_size),
    L(gc_generation_stats),
    L(gen_size), L(gen_gi_name), L(gen_gi_iframe), L(gen_gi_frame_state),
    L(llist_next), L(llist_prev),
    L(dbg_eval_breaker), L(dbg_remote_debugger_support),
    L(dbg_remote_debugging_enabled), L(dbg_debugger_pending_call),
    L(dbg_debugger_script_path), L(dbg_debugger_script_path_size),
};

_Static_assert(sizeof layout_313 == 70, "3.13 table is 584 bytes");
_Static_assert(sizeof layout_314 == 92, "3.14 table is 760 bytes");
_Static_assert(sizeof layout_315 == 108, "3.15 table is 888 bytes");
_Static_assert(PYU_F_COUNT < 256, "field ids fit a byte");

#define PY_MINOR(hex) ((int)(((hex) >> 16) & 0xff))
#define PY_MAJOR(hex) ((int)(((hex) >> 24) & 0xff))
#define PY_MICRO(hex) ((int)(((hex) >> 8) & 0xff))
#define PY_LEVEL(hex) ((int)(((hex) >> 4) & 0xf))
#define PY_SERIAL(hex) ((int)((hex) & 0xf))

void pyu_version_string(uint64_t hex, char *out, size_t outlen)
{
    /* (the release levels: 0xA alpha, 0xB beta, 0xC candidate, 0xF final;
     * other values come only from damaged memory) */
    int lv = PY_LEVEL(hex);
    if ((hex & 0xffff) == 0) { /* only the minor version is known */
        snprintf(out, outlen, "%d.%d", PY_MAJOR(hex), PY_MINOR(hex));
        return;
    }
    const char *name = lv == 0xA   ? "a"
                       : lv == 0xB ? "b"
                       : lv == 0xC ? "rc"
                       : lv == 0xF ? ""
                                   : "?";
    if (lv == 0xF)
        snprintf(out, outlen, "%d.%d.%d", PY_MAJOR(hex), PY_MINOR(hex),
                 PY_MICRO(hex));
    else
        snprintf(out, outlen, "%d.%d.%d%s%d", PY_MAJOR(hex), PY_MINOR(hex),
                 PY_MICRO(hex), name, PY_SERIAL(hex));
}

/* The layout for a version, or NULL. */
const uint8_t *pyu_offsets_layout(uint64_t hex, size_t *n)
{
    int minor = PY_MINOR(hex), level = PY_LEVEL(hex);
    if (PY_MAJOR(hex) != 3)
        return NULL;
    if (minor == 13 && level == 0xF) {
        *n = sizeof layout_313;
        return layout_313;
    }
    if (minor == 14 && level == 0xF) {
        *n = sizeof layout_314;
        return layout_314;
    }
    if (minor == 15 &&
        (level == 0xF || level == 0xC ||
         (level == 0xB && PY_SERIAL(hex) >= 4) || PY_MICRO(hex) > 0)) {
        *n = sizeof layout_315;
        return layout_315;
    }
    return NULL;
}

size_t pyu_offsets_layout_fields(uint64_t hex)
{
    size_t n = 0;
    return pyu_offsets_layout(hex, &n) ? n : 0;
}

/* Field, the struct size it must lie within, its width (and alignment);
 * required ones are the walkers'.  Optional ones are checked when present. */
typedef struct check {
    uint8_t field, within, width;
    bool required;
} check;

static const check checks[] = {
    {L(rt_interpreters_head), L(rt_size), 8, true},
    {L(is_id), L(is_size), 8, true},
    {L(is_next), L(is_size), 8, true},
    {L(is_threads_head), L(is_size), 8, true},
    {L(is_threads_main), L(is_size), 8, false},
    {L(is_gc), L(is_size), 8, true},
    {L(is_code_object_generation), L(is_size), 8, false},
    {L(ts_next), L(ts_size), 8, true},
    {L(ts_current_frame), L(ts_size), 8, false},
    {L(ts_cframe), L(ts_size), 8, false},
    {L(ts_root_cframe), L(ts_size), 16, false},
    {L(rt_main_thread), L(rt_size), 8, false},
    {L(rt_gil_holder), L(rt_size), 8, false},
    {L(rt_gil_locked), L(rt_size), 4, false},
    {L(is_runtime), L(is_size), 8, false},
    {L(fr_is_entry), L(fr_size), 1, false},
    {L(co_firsttraceable), L(co_size), 4, false},
    {L(ts_thread_id), L(ts_size), 8, true},
    {L(ts_native_thread_id), L(ts_size), 8, true},
    {L(ts_datastack_chunk), L(ts_size), 8, true},
    {L(ts_base_frame), L(ts_size), 8, false},
    {L(ts_last_profiled_frame), L(ts_size), 8, false},
    {L(ts_last_profiled_frame_seq), L(ts_size), 8, false},
    {L(ts_holds_gil), L(ts_size), 4, false},
    {L(ts_gil_requested), L(ts_size), 4, false},
    {L(ts_current_exception), L(ts_size), 8, false},
    {L(ts_exc_state), L(ts_size), 8, false},
    {L(ts_exc_info), L(ts_size), 8, false},
    {L(fr_previous), L(fr_size), 8, true},
    {L(fr_executable), L(fr_size), 8, true},
    {L(fr_instr_ptr), L(fr_size), 8, true},
    {L(fr_owner), L(fr_size), 1, true},
    {L(fr_stackpointer), L(fr_size), 8, false},
    {L(fr_funcobj), L(fr_size), 8, false},
    {L(fr_stacktop), L(fr_size), 4, false},
    {L(fr_return_offset), L(fr_size), 2, false},
    {L(fr_state), L(fr_size), 1, false},
    {L(fr_gen), L(fr_size), 8, false},
    {L(fr_tlbc_index), L(fr_size), 4, false},
    {L(co_filename), L(co_size), 8, true},
    {L(co_name), L(co_size), 8, true},
    {L(co_qualname), L(co_size), 8, true},
    {L(co_linetable), L(co_size), 8, true},
    {L(co_firstlineno), L(co_size), 4, true},
    {L(co_code_adaptive), L(co_size), 2, true},
    {L(co_tlbc), L(co_size), 8, false},
    {L(ob_type), L(ob_size), 8, true},
    {L(tp_name), L(tp_size), 8, true},
    {L(tp_flags), L(tp_size), 8, true},
    {L(co_argcount), L(co_size), 4, false},
    {L(co_flags), L(co_size), 4, false},
    {L(co_names), L(co_size), 8, false},
    {L(co_nlocalsplus), L(co_size), 4, false},
    {L(co_stacksize), L(co_size), 4, false},
    {L(ts_datastack_top), L(ts_size), 8, false},
    {L(co_kwonlyargcount), L(co_size), 4, false},
    {L(co_localsplusnames), L(co_size), 8, false},
    {L(co_localspluskinds), L(co_size), 8, false},
    {L(tuple_ob_size), L(tuple_size), 8, false},
    {L(tuple_ob_item), L(tuple_size), 8, false},
    {L(list_ob_size), L(list_size), 8, false},
    {L(list_ob_item), L(list_size), 8, false},
    {L(dict_ma_used), L(dict_size), 8, false},
    {L(dict_ma_keys), L(dict_size), 8, false},
    {L(dict_ma_values), L(dict_size), 8, false},
    {L(float_ob_fval), L(float_size), 8, false},
    {L(set_used), L(set_size), 8, false},
    {L(set_mask), L(set_size), 8, false},
    {L(set_table), L(set_size), 8, false},
    {L(long_lv_tag), L(long_size), 8, false},
    {L(long_ob_digit), L(long_size), 4, false},
    {L(bytes_ob_size), L(bytes_size), 8, true},
    {L(bytes_ob_sval), L(bytes_size), 1, true},
    {L(str_state), L(str_size), 4, true},
    {L(str_length), L(str_size), 8, true},
    {L(gc_collecting), L(gc_size), 4, true},
    {L(gc_frame), L(gc_size), 8, false},
    {L(gen_gi_iframe), L(gen_size), 8, false},
    {L(gen_gi_frame_state), L(gen_size), 1, false},
};

/* Struct sizes whose copies live in fixed buffers: size (plus what is read
 * with it) must fit the buffer. */
static const struct {
    uint8_t size;
    uint64_t extra, buffer;
} buffers[] = {
    {L(fr_size), PYU_CORO_PEEK, PYU_BUF_FRAME},
    {L(co_size), 0, PYU_BUF_CODE},
    {L(ts_size), 0, PYU_BUF_TSTATE},
    {L(str_compact_size), PYU_STR_PEEK, PYU_BUF_STR_HEADER + PYU_STR_PEEK},
    {L(str_ascii_size), PYU_STR_PEEK, PYU_BUF_STR_HEADER + PYU_STR_PEEK},
    {L(bytes_ob_sval), 0, PYU_BUF_BYTES_HEADER},
};

static const char *const field_names[] = {
#define PYU_FIELD_NAME_(n) #n,
    PYU_OFFSET_FIELDS(PYU_FIELD_NAME_)
#undef PYU_FIELD_NAME_
};

/* Facts the table does not carry, per version: everything that differs
 * between versions and is not a published offset is settled here, so that
 * the walkers never test version numbers. */
static void add_known_facts(pyu_offsets *o)
{
    int minor = PY_MINOR(o->version_hex);
    o->tag_mask = minor >= 14 ? 7 : 0; /* _PyStackRef tag bits */
    o->str_kind_shift = (minor >= 14 && o->free_threaded) ? 8 : 2;
    if (!PYU_HAS(o, str_compact_size) && PYU_HAS(o, str_ascii_size))
        o->v[PYU_F_str_compact_size] = o->v[PYU_F_str_ascii_size] + 16;
    /* PyThreadState is a public struct, identical in debug builds; measured
     * with offsetof() against the installed headers of 3.13.5 and 3.14.7
     * (GIL and free-threaded builds): where the exception being raised and
     * the pointer to the topmost handled-exception entry are */
    if (minor == 13 || minor == 14) {
        o->v[PYU_F_ts_current_exception] = 112;
        o->v[PYU_F_ts_exc_info] = 120;
        o->v[PYU_F_err_exc_value] = 0;
    }
    /* 3.15 publishes exc_state (the thread's own entry) but not exc_info,
     * the top of the handled-exception stack (a running generator's entry
     * when there is one); it is the pointer right after current_exception,
     * as in 3.13 and 3.14 */
    if (minor >= 15 && PYU_HAS(o, ts_current_exception))
        o->v[PYU_F_ts_exc_info] = o->v[PYU_F_ts_current_exception] + 8;
    /* PyCodeObject (Include/cpython/code.h, 3.13-3.15): the ints co_flags,
     * co_argcount, co_posonlyargcount, co_kwonlyargcount follow each
     * other; only co_argcount is published */
    if (!PYU_HAS(o, co_flags) && PYU_HAS(o, co_argcount) &&
        PYU_OFF(o, co_argcount) >= 4) {
        o->v[PYU_F_co_flags] = PYU_OFF(o, co_argcount) - 4;
        o->v[PYU_F_co_kwonlyargcount] = PYU_OFF(o, co_argcount) + 8;
    }
    /* ... then co_stacksize, co_firstlineno and co_nlocalsplus (3.12+;
     * 3.11's built-in layout names its own) */
    if (PYU_HAS(o, co_argcount) && !o->builtin) {
        o->v[PYU_F_co_stacksize] = PYU_OFF(o, co_argcount) + 12;
        o->v[PYU_F_co_nlocalsplus] = PYU_OFF(o, co_argcount) + 20;
    }
    /* PyThreadState (Include/cpython/pystate.h, 3.11-3.15): the top of
     * the data stack follows its chunk */
    if (PYU_HAS(o, ts_datastack_chunk) && !o->builtin)
        o->v[PYU_F_ts_datastack_top] = PYU_OFF(o, ts_datastack_chunk) + 8;
    /* ... after co_consts, co_names and co_exceptiontable (3.11-3.15) */
    if (PYU_HAS(o, co_flags) && PYU_OFF(o, co_flags) >= 16 &&
        PYU_OFF(o, co_flags) % 8 == 0 && !PYU_HAS(o, co_names))
        o->v[PYU_F_co_names] = PYU_OFF(o, co_flags) - 16;
    /* PyCellObject {PyObject_HEAD; PyObject *ob_ref;}: the header ends
     * with ob_type (both builds) */
    uint64_t header = PYU_OFF(o, ob_type) + 8;
    o->v[PYU_F_cell_ob_ref] = header;
    /* PyDictObject (Include/cpython/dictobject.h): ma_used follows the
     * header */
    o->v[PYU_F_dict_ma_used] = header;
    /* PySetObject (Include/cpython/setobject.h) {PyObject_HEAD; fill;
     * used; mask; table; ...}, published from 3.14; the size given is
     * the part read (up to the table pointer) */
    if (!PYU_HAS(o, set_used)) {
        o->v[PYU_F_set_used] = header + 8;
        o->v[PYU_F_set_mask] = header + 16;
        o->v[PYU_F_set_table] = header + 24;
        o->v[PYU_F_set_size] = header + 32;
    }
    /* _PyErr_StackItem: {PyObject *exc_value; _PyErr_StackItem
     * *previous_item;} since 3.11 */
    if (!PYU_HAS(o, err_previous_item))
        o->v[PYU_F_err_previous_item] = o->v[PYU_F_err_exc_value] + 8;
    /* holds_gil: 3.13 keeps it as bit 5 of the `_status` bit field; 3.14
     * has an int right after the 4-byte `_status`; 3.15 publishes it */
    if (o->free_threaded && PYU_HAS(o, ts_status)) {
        /* no GIL: "holds it" reads as attached, the `active` bit of
         * `_status` (bit 4), as CPython's own sampler reads it */
        o->v[PYU_F_ts_holds_gil] = o->v[PYU_F_ts_status];
        o->holds_gil_mask = 1u << 4;
    } else if (minor == 13) {
        o->v[PYU_F_ts_holds_gil] = o->v[PYU_F_ts_status];
        o->holds_gil_mask = 1u << 5;
    } else {
        if (minor == 14)
            o->v[PYU_F_ts_holds_gil] = o->v[PYU_F_ts_status] + 4;
        o->holds_gil_mask = UINT32_MAX;
    }
    /* _PyInterpreterFrame (internal/pycore_frame.h; 3.14+
     * pycore_interpframe_structs.h): f_executable, previous, then the
     * function, in every version since 3.13; 3.13 keeps the top of the
     * value stack as an int index (`stacktop`, -1 while the frame runs)
     * where 3.14 has the published stackpointer */
    if (minor >= 13)
        o->v[PYU_F_fr_funcobj] = 16;
    /* ... and ends with `uint16_t return_offset; char owner;` (3.13-3.15):
     * the size of the call instruction a caller made, 0 in a new frame */
    if (minor >= 13 && PYU_HAS(o, fr_owner) && PYU_OFF(o, fr_owner) >= 2)
        o->v[PYU_F_fr_return_offset] = PYU_OFF(o, fr_owner) - 2;
    if (minor == 13)
        o->v[PYU_F_fr_stacktop] = 64;
    /* ... then f_globals, f_builtins and f_locals, the dicts py-print
     * looks names up in (3.13-3.15; 3.11's table names its own) */
    if (minor >= 13) {
        o->v[PYU_F_fr_globals] = PYU_OFF(o, fr_funcobj) + 8;
        o->v[PYU_F_fr_builtins] = PYU_OFF(o, fr_funcobj) + 16;
        o->v[PYU_F_fr_locals] = PYU_OFF(o, fr_funcobj) + 24;
    }
    /* PyTypeObject (Include/cpython/object.h, 3.11-3.15, both builds;
     * checked against the DWARF of 3.11d, 3.13, 3.13t, 3.14 and 3.15d):
     * tp_basicsize follows tp_name; tp_dict, tp_dictoffset and tp_mro
     * lie 240, 264 and 320 bytes after it */
    if (PYU_HAS(o, tp_name)) {
        uint64_t name = PYU_OFF(o, tp_name);
        if (!PYU_HAS(o, tp_basicsize))
            o->v[PYU_F_tp_basicsize] = name + 8;
        if (!PYU_HAS(o, tp_dictoffset))
            o->v[PYU_F_tp_dictoffset] = name + 264;
        o->v[PYU_F_tp_dict] = name + 240;
        o->v[PYU_F_tp_mro] = name + 320;
        /* PyHeapTypeObject's ht_cached_keys, published from 3.15 (3.11's
         * table has it): 856 bytes after tp_name in 3.13 and 3.14 */
        if (!PYU_HAS(o, ht_cached_keys) && (minor == 13 || minor == 14))
            o->v[PYU_F_ht_cached_keys] = name + 856;
    }
    /* PyModuleObject {PyObject_HEAD; PyObject *md_dict; ...} and
     * PyMemberDescrObject {PyObject_HEAD; d_type; d_name; d_qualname;
     * PyMemberDef *d_member} (Include/descrobject.h) */
    o->v[PYU_F_md_dict] = header;
    o->v[PYU_F_descr_member] = header + 24;
    /* Py_TPFLAGS_MANAGED_DICT: the dict pointer sits three words before
     * the object (3.11; 3.13+ with the GIL: MANAGED_DICT_OFFSET in
     * Include/internal/pycore_object.h), one word before it without the
     * GIL; 3.11 keeps its values pointer four words before it; 3.12
     * shares the dict's word with the values */
    o->managed_dict_back = o->free_threaded ? 8 : 24;
    o->managed_values_back = minor == 11 ? 32 : 0;
    /* 3.12 keeps one word there (PyDictOrValues): the dict, or the values
     * less one, the low bit set (Include/internal/pycore_object.h) */
    o->managed_dict_tagged = minor == 12;
    /* generator-like objects (Include/internal/pycore_frame.h): the
     * gi_frame_state values were renumbered in 3.15, where the awaited
     * object also moved one slot down the value stack */
    if (minor >= 15) {
        o->gen_yield_from = 2;
        o->gen_yield_from_locked = 3;
        o->gen_cleared = 5;
        o->await_slot = 16;
    } else {
        o->gen_yield_from = -1;
        o->gen_yield_from_locked = -1;
        o->gen_cleared = 4;
        o->await_slot = 8;
    }
}

static int validate(pyu_session *s, const pyu_offsets *o, const char *ver);

int pyu_offsets_read(pyu_session *s, uint64_t runtime, pyu_offsets *o)
{
    uint8_t raw[PYU_BUF_OFFSETS];
    uint64_t hex, ft;
    size_t n = 0;
    int rc;
    char ver[32];

    if ((rc = pyu_read(s, runtime, raw, 24, "the debug offsets header")) < 0)
        return rc;
    memcpy(&hex, raw + 8, 8);
    memcpy(&ft, raw + 16, 8);
    pyu_version_string(hex, ver, sizeof ver);
    const uint8_t *layout = pyu_offsets_layout(hex, &n);
    if (!layout) {
        int minor = PY_MINOR(hex);
        if (PY_MAJOR(hex) != 3 || minor > 30)
            return pyu_err_set(&s->err, PYU_E_OFFSETS,
                               "_PyRuntime at 0x%" PRIx64
                               " holds version 0x%" PRIx64
                               ", which is not a CPython version",
                               runtime, hex);
        if (minor > 15)
            return pyu_err_set(&s->err, PYU_E_VERSION,
                               "CPython %s is newer than pyunwind knows; "
                               "it reads " PYU_VERSIONS_READ,
                               ver);
        if (minor < 13)
            return pyu_err_set(&s->err, PYU_E_VERSION,
                               "CPython %s is not a version pyunwind "
                               "reads; it reads " PYU_VERSIONS_READ,
                               ver);
        return pyu_err_set(&s->err, PYU_E_VERSION,
                           "CPython %s is a pre-release whose debug offsets "
                           "layout pyunwind does not know; it reads 3.9-3.12, "
                           "the 3.13 and 3.14 releases and 3.15 from "
                           "3.15.0b4",
                           ver);
    }
    if (ft > 1)
        return pyu_err_set(&s->err, PYU_E_OFFSETS,
                           "debug offsets of CPython %s: free_threaded flag "
                           "is %" PRIu64 ", not 0 or 1",
                           ver, ft);
    if ((rc = pyu_read(s, runtime + 24, raw + 24, 8 * n,
                       "the debug offsets table")) < 0)
        return rc;

    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < PYU_F_COUNT; i++)
        o->v[i] = PYU_ABSENT;
    for (size_t i = 0; i < n; i++)
        memcpy(&o->v[layout[i]], raw + 24 + 8 * i, 8);
    o->version_hex = hex;
    o->free_threaded = ft == 1;
    add_known_facts(o);
    return validate(s, o, ver);
}

/* Checks every field the walkers use against its struct's size, and the
 * sizes against the buffers they are copied into. */
static int validate(pyu_session *s, const pyu_offsets *o, const char *ver)
{
    for (size_t i = 0; i < sizeof checks / sizeof checks[0]; i++) {
        const check *c = &checks[i];
        uint64_t v = o->v[c->field], within = o->v[c->within];
        if (v == PYU_ABSENT) {
            /* (frame objects have no owner, threads no data stack and,
             * before 3.11, no native id in their state) */
            bool objects_lack = o->object_frames &&
                                (c->field == PYU_F_fr_owner ||
                                 c->field == PYU_F_ts_datastack_chunk ||
                                 c->field == PYU_F_ts_native_thread_id);
            if (c->required && !objects_lack)
                return pyu_err_set(&s->err, PYU_E_OFFSETS,
                                   "debug offsets of CPython %s lack %s",
                                   ver, field_names[c->field]);
            continue;
        }
        if (within == 0 || within > PYU_MAX_SECTION || v >= within ||
            within - v < c->width || v % c->width != 0)
            return pyu_err_set(&s->err, PYU_E_OFFSETS,
                               "debug offsets of CPython %s are invalid: "
                               "%s = %" PRIu64 " (struct size %" PRIu64
                               "); the runtime is corrupt",
                               ver, field_names[c->field], v, within);
    }
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) {
        uint64_t v = o->v[buffers[i].size];
        if (v == 0 || v > buffers[i].buffer ||
            buffers[i].buffer - v < buffers[i].extra)
            return pyu_err_set(&s->err, PYU_E_OFFSETS,
                               "debug offsets of CPython %s are invalid: "
                               "%s = %" PRIu64 " is implausible (at most %"
                               PRIu64 "); the runtime is corrupt",
                               ver, field_names[buffers[i].size], v,
                               buffers[i].buffer - buffers[i].extra);
    }
    if (!PYU_HAS(o, ts_current_frame) &&
        (!PYU_HAS(o, ts_cframe) || !PYU_HAS(o, cframe_current_frame)))
        return pyu_err_set(&s->err, PYU_E_OFFSETS,
                           "debug offsets of CPython %s lack "
                           "ts_current_frame", ver);
    if (o->free_threaded && PYU_HAS(o, is_tlbc_generation) &&
        (!PYU_HAS(o, fr_tlbc_index) || !PYU_HAS(o, co_tlbc)))
        return pyu_err_set(&s->err, PYU_E_OFFSETS,
                           "debug offsets of free-threaded CPython %s lack "
                           "the thread-local bytecode fields",
                           ver);
    return 0;
}

/* ------------------------------------------------- built-in layouts */

/* CPython 3.11 publishes no _Py_DebugOffsets: its layout is written here.
 * Every value was measured with offsetof()/sizeof() against Debian 12's
 * headers of 3.11.2 (and checked against the DWARF of Debian's
 * python3.11 and python3.11d); release and Py_DEBUG builds agree, as
 * Py_TRACE_REFS stays off.  The headers, under Include/:
 *   internal/pycore_runtime.h  _PyRuntimeState (the GIL in ceval.gil,
 *                              internal/pycore_ceval_state.h's
 *                              _gil_runtime_state: last_holder, locked)
 *   internal/pycore_interp.h   struct _is; internal/pycore_gc.h for gc
 *   cpython/pystate.h          struct _ts, _PyCFrame, _PyErr_StackItem
 *   internal/pycore_frame.h    _PyInterpreterFrame
 *   cpython/code.h             PyCodeObject
 *   object.h, cpython/object.h PyObject, PyTypeObject, PyHeapTypeObject
 *   cpython/{tuple,list,dict,float,bytes,unicode}object.h, setobject.h,
 *   cpython/longintrepr.h      the value objects
 * What 3.11 does differently is said by the table: the current frame is
 * two loads away (ts_cframe, then cframe_current_frame), the GIL is the
 * runtime's (rt_gil_*), the main thread is named by the runtime
 * (rt_main_thread), a frame's instruction pointer is prev_instr (the last
 * code unit run, one before the code for a new frame), fr_is_entry marks
 * the first frame of each C-level eval loop (there are no shim frames),
 * and strings keep their wstr fields (48- and 72-byte headers). */
typedef struct known {
    uint8_t field;
    uint32_t value;
} known;

static const known layout_311[] = {
    {L(rt_size), 166688}, {L(rt_finalizing), 24},
    {L(rt_interpreters_head), 40}, {L(rt_main_thread), 80},
    {L(rt_gil_holder), 360 + 8}, {L(rt_gil_locked), 360 + 16},
    {L(is_size), 107752}, {L(is_next), 0}, {L(is_threads_head), 16},
    {L(is_runtime), 40}, {L(is_id), 48}, {L(is_gc), 648},
    {L(is_imports_modules), 888}, {L(is_sysdict), 904},
    {L(is_builtins), 912},
    {L(gc_size), 240}, {L(gc_collecting), 200},
    {L(ts_size), 360}, {L(ts_prev), 0}, {L(ts_next), 8}, {L(ts_interp), 16},
    {L(ts_cframe), 56}, {L(ts_current_exception), 96 /* curexc_type */},
    {L(ts_exc_info), 120}, {L(ts_thread_id), 152},
    {L(ts_native_thread_id), 160}, {L(ts_datastack_chunk), 296},
    {L(ts_datastack_top), 304},
    {L(ts_exc_state), 320}, {L(ts_root_cframe), 336},
    {L(cframe_current_frame), 8}, {L(cframe_previous), 16},
    {L(err_exc_value), 0},
    {L(fr_size), 80}, {L(fr_executable), 32 /* f_code */},
    {L(fr_previous), 48}, {L(fr_instr_ptr), 56 /* prev_instr */},
    {L(fr_is_entry), 68}, {L(fr_owner), 69}, {L(fr_localsplus), 72},
    {L(fr_funcobj), 0 /* f_func */}, {L(fr_stacktop), 64},
    {L(fr_globals), 8}, {L(fr_builtins), 16}, {L(fr_locals), 24},
    {L(co_size), 192}, {L(co_flags), 48}, {L(co_argcount), 56},
    {L(co_stacksize), 68}, {L(co_nlocalsplus), 76},
    {L(co_kwonlyargcount), 64}, {L(co_firstlineno), 72},
    {L(co_localsplusnames), 96}, {L(co_localspluskinds), 104},
    {L(co_filename), 112}, {L(co_name), 120}, {L(co_qualname), 128},
    {L(co_linetable), 136}, {L(co_firsttraceable), 168},
    {L(co_code_adaptive), 184},
    {L(ob_size), 16}, {L(ob_type), 8},
    {L(tp_size), 408}, {L(tp_name), 24}, {L(tp_basicsize), 32},
    {L(tp_repr), 88}, {L(tp_flags), 168}, {L(tp_dictoffset), 288},
    {L(ht_size), 904}, {L(ht_cached_keys), 872},
    {L(tuple_size), 32}, {L(tuple_ob_size), 16}, {L(tuple_ob_item), 24},
    {L(list_size), 40}, {L(list_ob_size), 16}, {L(list_ob_item), 24},
    {L(set_size), 200}, {L(set_used), 24}, {L(set_mask), 32},
    {L(set_table), 40},
    {L(dict_size), 48}, {L(dict_ma_used), 16}, {L(dict_ma_keys), 32},
    {L(dict_ma_values), 40},
    {L(float_size), 24}, {L(float_ob_fval), 16},
    /* the signed digit count (ob_size) stands where 3.12+ has lv_tag */
    {L(long_size), 32}, {L(long_lv_tag), 16}, {L(long_ob_digit), 24},
    {L(bytes_size), 40}, {L(bytes_ob_size), 16}, {L(bytes_ob_sval), 32},
    {L(str_size), 80}, {L(str_length), 16}, {L(str_state), 32},
    {L(str_ascii_size), 48}, {L(str_compact_size), 72},
};

/* CPython 3.12, measured as 3.11's was: from the DWARF of pyenv's 3.12.1
 * (libpython3.12.so, a release build; the headers' structs are the same
 * in distributions' builds).  What 3.12 does differently from 3.11 is
 * again said by the table: the current frame is two loads away as in
 * 3.11 (ts_cframe, then cframe_current_frame, which is now the _PyCFrame's
 * first word), but each eval loop pushes an entry frame of its own (owner
 * 3, on the C stack) as 3.13 does, so no frame says is_entry; the GIL is
 * the main interpreter's (`_gil` in PyInterpreterState, which the runtime
 * embeds as `_main_interpreter` at 76392: the holder and locked flag are
 * given as offsets in the runtime, as 3.11's are); strings have lost
 * their wstr fields (40- and 56-byte headers); ints have lv_tag; a frame
 * keeps prev_instr as 3.11 does. */
static const known layout_312[] = {
    {L(rt_size), 459944}, {L(rt_finalizing), 24},
    {L(rt_interpreters_head), 40}, {L(rt_main_thread), 64},
    {L(rt_gil_holder), 76392 + 1040 + 8},
    {L(rt_gil_locked), 76392 + 1040 + 16},
    {L(is_size), 383552}, {L(is_next), 0}, {L(is_threads_head), 72},
    {L(is_runtime), 96}, {L(is_id), 8}, {L(is_gc), 112},
    {L(is_imports_modules), 944}, {L(is_sysdict), 352},
    {L(is_builtins), 360},
    {L(gc_size), 240}, {L(gc_collecting), 200},
    {L(ts_size), 288}, {L(ts_prev), 0}, {L(ts_next), 8}, {L(ts_interp), 16},
    {L(ts_cframe), 56}, {L(ts_current_exception), 96},
    {L(ts_exc_info), 104}, {L(ts_thread_id), 136},
    {L(ts_native_thread_id), 144}, {L(ts_datastack_chunk), 232},
    {L(ts_datastack_top), 240}, {L(ts_exc_state), 256},
    {L(ts_root_cframe), 272},
    {L(cframe_current_frame), 0}, {L(cframe_previous), 8},
    {L(err_exc_value), 0},
    {L(fr_size), 80}, {L(fr_executable), 0 /* f_code */},
    {L(fr_previous), 8}, {L(fr_funcobj), 16}, {L(fr_globals), 24},
    {L(fr_builtins), 32}, {L(fr_locals), 40},
    {L(fr_instr_ptr), 56 /* prev_instr */}, {L(fr_stacktop), 64},
    /* (return_offset, at 68, is not given: a 3.12 call sets it to 0,
     * where 3.13+ saves the call's size, which the sampler reads as
     * evidence of the call) */
    {L(fr_owner), 70}, {L(fr_localsplus), 72},
    {L(co_size), 200}, {L(co_flags), 48}, {L(co_argcount), 52},
    {L(co_kwonlyargcount), 60}, {L(co_stacksize), 64},
    {L(co_firstlineno), 68}, {L(co_nlocalsplus), 72},
    {L(co_localsplusnames), 96}, {L(co_localspluskinds), 104},
    {L(co_filename), 112}, {L(co_name), 120}, {L(co_qualname), 128},
    {L(co_linetable), 136}, {L(co_firsttraceable), 176},
    {L(co_code_adaptive), 192},
    {L(ob_size), 16}, {L(ob_type), 8},
    {L(tp_size), 416}, {L(tp_name), 24}, {L(tp_basicsize), 32},
    {L(tp_repr), 88}, {L(tp_flags), 168}, {L(tp_dictoffset), 288},
    {L(ht_size), 920}, {L(ht_cached_keys), 880},
    {L(tuple_size), 32}, {L(tuple_ob_size), 16}, {L(tuple_ob_item), 24},
    {L(list_size), 40}, {L(list_ob_size), 16}, {L(list_ob_item), 24},
    {L(set_size), 200}, {L(set_used), 24}, {L(set_mask), 32},
    {L(set_table), 40},
    {L(dict_size), 48}, {L(dict_ma_used), 16}, {L(dict_ma_keys), 32},
    {L(dict_ma_values), 40},
    {L(float_size), 24}, {L(float_ob_fval), 16},
    {L(long_size), 32}, {L(long_lv_tag), 16}, {L(long_ob_digit), 24},
    {L(bytes_size), 40}, {L(bytes_ob_size), 16}, {L(bytes_ob_sval), 32},
    {L(str_size), 64}, {L(str_length), 16}, {L(str_state), 32},
    {L(str_ascii_size), 40}, {L(str_compact_size), 56},
};

/* CPython 3.10 and 3.9, measured from the DWARF of pyenv's 3.10.13 and
 * 3.9.18 (release builds, the runtime in libpython).  Their frames are
 * PyFrameObjects (Include/cpython/frameobject.h), not frames of a data
 * stack: the thread state names the current one (`frame`), each its
 * caller (f_back), its code (f_code) and its last instruction (f_lasti);
 * pyu_offsets.object_frames says so.  The runtime does not embed the main
 * interpreter; the GIL is the runtime's (ceval.gil at 352: last_holder,
 * locked), as 3.11's; the interpreter lists its threads in tstate_head;
 * an exception being raised is curexc_type; _PyErr_StackItem still has
 * exc_type, exc_value, exc_traceback before previous_item.  There is no
 * co_qualname: co_name stands in its place.  Strings keep their wstr
 * fields (48- and 72-byte headers), ints their signed digit count. */
#define LAYOUT_39_310_COMMON                                                \
    {L(rt_finalizing), 16}, {L(rt_interpreters_head), 32},                  \
    {L(rt_main_thread), 72}, {L(rt_gil_holder), 352 + 8},                   \
    {L(rt_gil_locked), 352 + 16},                                           \
    {L(is_next), 0}, {L(is_threads_head), 8}, {L(is_runtime), 16},          \
    {L(is_id), 24}, {L(is_gc), 616}, {L(is_imports_modules), 856},          \
    {L(is_sysdict), 872}, {L(is_builtins), 880},                            \
    {L(gc_size), 240}, {L(gc_collecting), 200},                             \
    {L(ts_prev), 0}, {L(ts_next), 8}, {L(ts_interp), 16},                   \
    {L(ts_current_frame), 24 /* frame */},                                  \
    {L(ts_current_exception), 88 /* curexc_type */},                        \
    {L(ts_exc_state), 112}, {L(ts_exc_info), 144}, {L(ts_thread_id), 176},  \
    {L(err_exc_value), 8}, {L(err_previous_item), 24},                      \
    {L(fr_size), 120}, {L(fr_previous), 24 /* f_back */},                   \
    {L(fr_executable), 32 /* f_code */}, {L(fr_builtins), 40},              \
    {L(fr_globals), 48}, {L(fr_locals), 56},                                \
    {L(co_size), 176}, {L(co_argcount), 16}, {L(co_kwonlyargcount), 24},    \
    {L(co_stacksize), 32}, {L(co_flags), 36}, {L(co_firstlineno), 40},      \
    {L(co_code), 48}, {L(co_names), 64}, {L(co_varnames), 72},              \
    {L(co_freevars), 80}, {L(co_cellvars), 88}, {L(co_filename), 104},      \
    {L(co_name), 112}, {L(co_qualname), 112 /* co_name */},                 \
    {L(co_linetable), 120 /* 3.9: co_lnotab */},                            \
    {L(co_code_adaptive), 0 /* (see pyu_frame_raw_take) */},                \
    {L(ob_size), 16}, {L(ob_type), 8},                                      \
    {L(tp_size), 408}, {L(tp_name), 24}, {L(tp_basicsize), 32},             \
    {L(tp_repr), 88}, {L(tp_flags), 168}, {L(tp_dictoffset), 288},          \
    {L(tuple_size), 32}, {L(tuple_ob_size), 16}, {L(tuple_ob_item), 24},    \
    {L(list_size), 40}, {L(list_ob_size), 16}, {L(list_ob_item), 24},       \
    {L(set_size), 200}, {L(set_used), 24}, {L(set_mask), 32},               \
    {L(set_table), 40},                                                     \
    {L(dict_size), 48}, {L(dict_ma_used), 16}, {L(dict_ma_keys), 32},       \
    {L(dict_ma_values), 40},                                                \
    {L(float_size), 24}, {L(float_ob_fval), 16},                            \
    {L(long_size), 32}, {L(long_lv_tag), 16}, {L(long_ob_digit), 24},       \
    {L(bytes_size), 40}, {L(bytes_ob_size), 16}, {L(bytes_ob_sval), 32},    \
    {L(str_size), 80}, {L(str_length), 16}, {L(str_state), 32},             \
    {L(str_ascii_size), 48}, {L(str_compact_size), 72}

static const known layout_310[] = {
    LAYOUT_39_310_COMMON,
    {L(rt_size), 672}, {L(is_size), 113528}, {L(ts_size), 280},
    {L(fr_instr_ptr), 96 /* f_lasti */}, {L(fr_localsplus), 352},
    {L(fr_state), 108 /* f_state */}, {L(fr_gen), 88 /* f_gen */},
    {L(ht_size), 888}, {L(ht_cached_keys), 872},
};

static const known layout_39[] = {
    LAYOUT_39_310_COMMON,
    {L(rt_size), 656}, {L(is_size), 5656}, {L(ts_size), 264},
    {L(fr_instr_ptr), 104 /* f_lasti */}, {L(fr_localsplus), 360},
    {L(fr_state), 116 /* f_executing */}, {L(fr_gen), 96 /* f_gen */},
    {L(ht_size), 880}, {L(ht_cached_keys), 864},
};

/* The built-in layouts, by minor version. */
static const struct {
    int minor;
    const known *fields;
    size_t n;
} builtin[] = {
    {9, layout_39, sizeof layout_39 / sizeof *layout_39},
    {10, layout_310, sizeof layout_310 / sizeof *layout_310},
    {11, layout_311, sizeof layout_311 / sizeof *layout_311},
    {12, layout_312, sizeof layout_312 / sizeof *layout_312},
};

int pyu_offsets_builtin(pyu_session *s, uint64_t hex, pyu_offsets *o)
{
    char ver[32];
    size_t b = 0;
    pyu_version_string(hex, ver, sizeof ver);
    while (b < sizeof builtin / sizeof *builtin &&
           (PY_MAJOR(hex) != 3 || PY_MINOR(hex) != builtin[b].minor))
        b++;
    if (b == sizeof builtin / sizeof *builtin)
        return pyu_err_set(&s->err, PYU_E_VERSION,
                           "CPython %s is not a version pyunwind reads; "
                           "it reads " PYU_VERSIONS_READ, ver);
    memset(o, 0, sizeof *o);
    for (size_t i = 0; i < PYU_F_COUNT; i++)
        o->v[i] = PYU_ABSENT;
    for (size_t i = 0; i < builtin[b].n; i++)
        o->v[builtin[b].fields[i].field] = builtin[b].fields[i].value;
    o->version_hex = hex;
    o->builtin = true;
    /* (3.12: ints have lv_tag; 3.11 and 3.12 keep a split dict's order
     * before its values, and a frame's last code unit run) */
    int minor = builtin[b].minor;
    o->long_size_signed = minor <= 11;
    o->dict_order_before = minor >= 11;
    o->instr_in_caches = minor >= 11;
    o->object_frames = minor < 11;
    o->dict_keys_old = minor < 11;
    o->lasti_scale = minor == 9 ? 2 : 1;
    o->frame_state_kind = minor == 9    ? PYU_STATE_EXECUTING
                          : minor == 10 ? PYU_STATE_310
                                        : 0;
    o->linetable_kind = minor == 9    ? PYU_LINES_LNOTAB
                        : minor == 10 ? PYU_LINES_310
                                      : PYU_LINES_LOCATIONS;
    add_known_facts(o);
    return validate(s, o, ver);
}

/* The shape of a 3.11 or 3.12 runtime, for a scan of memory without
 * files: the main interpreter lies inside _PyRuntimeState (its
 * _main_interpreter member: at 58936 in 3.11, 76392 in 3.12) and
 * interpreters.main (at 48) points at it, with interpreters.head (at 40)
 * set (internal/pycore_runtime.h, pystate.c's
 * _PyInterpreterState_Enable). */
#define INTERPRETERS_MAIN_OLD 48
#define INTERPRETERS_HEAD_OLD 40
static const struct {
    uint64_t main_interp, version;
} shapes[] = {{58936, 0x030b0000u}, {76392, 0x030c0000u}};

uint64_t pyu_builtin_runtime_at(const uint8_t *buf, size_t len, size_t k,
                                uint64_t addr)
{
    uint64_t main, head;
    if (k > len || len - k < INTERPRETERS_MAIN_OLD + 8 ||
        addr > UINT64_MAX - (1u << 20))
        return 0;
    memcpy(&main, buf + k + INTERPRETERS_MAIN_OLD, 8);
    memcpy(&head, buf + k + INTERPRETERS_HEAD_OLD, 8);
    /* (an uninitialised runtime is of no use: its interpreter list must
     * be there, and the caller checks that it points back); the micro
     * version is unknown: "3.11" */
    for (size_t i = 0; head && i < sizeof shapes / sizeof *shapes; i++)
        if (main == addr + shapes[i].main_interp)
            return shapes[i].version;
    return 0;
}
