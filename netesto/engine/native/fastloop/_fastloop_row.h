/* What the sampler's C files of netesto's _fastloop extension share: _fastloop_row.c (a row: build_row,
 * sample_row, sample_setup and the flow ends' slots it finds), _fastloop_tick.c (the tick: a flow end's row
 * from its slots, row_one, and sample_tick), _fastloop_block.c (the tick's block writes, with zlib),
 * _fastloop_hot.c (the hot rows of the C loops: end_sample, the SAMPLE_API capsule's functions) and
 * _fastloop.c (the module). The small helpers both row builders call are static inline here (each file its
 * own copy, as when they were one). */
#ifndef NETESTO_FASTLOOP_ROW_H
#define NETESTO_FASTLOOP_ROW_H

#include "../_loops.h"

#include <stdint.h>
#include <time.h>

/* A sampler row (flowend._record_layout): t_wall, t_mono and six uint64 counters, then
 * struct tcp_info, then tcp_bbr_info padded to 8-byte alignment. */
#define ROW_HEAD (2 * 8 + 6 * 8)
#define ROW_INFO 280 /* tcpinfo.TCP_INFO_LEN */
#define ROW_CC 20    /* tcpinfo.CC_INFO_LEN */
#define ROW_CC_SLOT 24

/* FlowEnd attributes sample_tick reads (the six counters in a row, as get_counters takes them) */
enum { A_SOCK, A_PARTS, A_TX, A_RX, A_TRANS, A_CONNS, A_LOST, A_REORD, A_LAST, A_GAPS, A_REC, A_NROWS,
       A_RECLEN, A_FLUSHAT, A_LATRAW, A_LATDONE, A_IHIST, A_LATPEND, A_DUEAT, A_DUEEVERY, A_N };
NETESTO_HIDDEN extern const char *const attr_names[A_N]; /* their names (_fastloop_row.c) */
/* FlowEnd (sample_setup) and where its __slots__ for those attributes are in an instance: a tick reads
 * them directly (getattr through the instance dict would cost as much as the Python loop it replaces) */
NETESTO_HIDDEN extern PyTypeObject *flow_type;
NETESTO_HIDDEN extern Py_ssize_t slot_at[A_N];
NETESTO_HIDDEN extern Py_ssize_t slot_lo, slot_hi; /* the instance's bytes holding the slots read for every row */
/* FlowRecord.LAT_BATCH: lat_done folds into the flow's histogram at this length */
NETESTO_HIDDEN extern Py_ssize_t lat_batch;

#define SLOT(flow, i) (*(PyObject **)((char *)(flow) + slot_at[i]))

static inline Py_ssize_t row_size(long parts)
{
    return ROW_HEAD + (parts > 0 ? ROW_INFO : 0) + (parts == 2 ? ROW_CC_SLOT : 0);
}

/* The checks both row builders make on rec, last and gaps; parts out. 0 or -1 with an exception set. */
static inline int check_row_args(const char *fn, PyObject *rec, PyObject *parts_obj, PyObject *last, PyObject *gaps,
                                 long *parts)
{
    if (!PyByteArray_Check(rec) || !PyByteArray_Check(last) || !PyByteArray_Check(gaps)) {
        PyErr_Format(PyExc_TypeError, "%s: rec, last and gaps must be bytearrays", fn);
        return -1;
    }
    if (PyByteArray_GET_SIZE(gaps) != 5 * (Py_ssize_t)sizeof(double)) {
        PyErr_Format(PyExc_ValueError, "%s: gaps must hold 5 doubles", fn);
        return -1;
    }
    *parts = PyLong_AsLong(parts_obj);
    if (*parts == -1 && PyErr_Occurred()) return -1;
    if (*parts < 0 || *parts > 2) {
        PyErr_Format(PyExc_ValueError, "%s: parts must be 0, 1 or 2", fn);
        return -1;
    }
    if (*parts > 0 && PyByteArray_GET_SIZE(last) != ROW_INFO + ROW_CC_SLOT) {
        PyErr_Format(PyExc_ValueError, "%s: last must hold %d bytes", fn, ROW_INFO + ROW_CC_SLOT);
        return -1;
    }
    return 0;
}

/* The six counters of a row from six ints. 0 or -1 with an exception set. */
static inline int get_counters(PyObject *const *objs, long long counters[6])
{
    for (int i = 0; i < 6; i++) {
        counters[i] = PyLong_AsLongLong(objs[i]);
        if (counters[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* Room for size bytes at offset at of rec (at <= len(rec); rec grows, never shrinks): the row's address. */
static inline char *row_at(PyObject *rec, Py_ssize_t at, Py_ssize_t size)
{
    Py_ssize_t have = PyByteArray_GET_SIZE(rec);
    if (at < 0 || at > have) {
        PyErr_Format(PyExc_ValueError, "a row at %zd of a %zd-byte buffer", at, have);
        return NULL;
    }
    if (at + size > have && PyByteArray_Resize(rec, at + size) < 0) return NULL;
    return PyByteArray_AS_STRING(rec) + at;
}

/* time.time() and time.monotonic() (from mono_ns) as Python computes them from the clocks' ns: a row's stamps */
static inline void fl_stamps_at(double stamps[2], int64_t mono_ns)
{
    struct timespec w;
    clock_gettime(CLOCK_REALTIME, &w);
    stamps[0] = (double)((int64_t)w.tv_sec * 1000000000 + w.tv_nsec) / 1e9;
    stamps[1] = (double)mono_ns / 1e9;
}

/* Thread CPU time (ns): a syscall (CLOCK_THREAD_CPUTIME_ID, ~1.5 us on a KVM guest, several times that cold) */
static inline int64_t fl_thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Python names a file interns once (the module's init): a table ended by {NULL, NULL}. 0 or -1 with an
 * exception set. */
struct fl_name {
    PyObject **at;
    const char *name;
};
static inline int fl_intern(const struct fl_name *n)
{
    for (; n->at != NULL; n++)
        if ((*n->at = PyUnicode_InternFromString(n->name)) == NULL) return -1;
    return 0;
}

/* A row's parts at row (_fastloop_row.c: see there) */
NETESTO_HIDDEN long fl_build_row(char *row, int fd, long parts, const double stamps[2], const long long counters[6],
                                 char *known, char *gaps);
/* The socket's fd, or -1 for None or a closed socket; -2 with an exception set (_fastloop_row.c) */
NETESTO_HIDDEN int fl_sock_fd(PyObject *sock);
/* One flow end's row from its slots (_fastloop_tick.c: see there); the names the tick uses, interned */
NETESTO_HIDDEN int fl_row_one(PyObject *flow, const double stamps[2], const long long *ctr3, Py_ssize_t *written);
NETESTO_HIDDEN extern const struct fl_name fl_tick_names[];
/* The names the hot rows use, interned (_fastloop_hot.c) */
NETESTO_HIDDEN extern const struct fl_name fl_hot_names[];
/* The rows of a list of flow ends (all, or those due by due_by), as sample_tick takes them (_fastloop_tick.c) */
NETESTO_HIDDEN int fl_tick_rows(PyObject *flows, const double stamps[2], double due_by, PyObject *due, PyObject *failed,
                                PyObject *python, Py_ssize_t *rows);
#ifdef NETESTO_ZLIB
/* A due block written in C (_fastloop_block.c: see there); the names the flush uses, interned */
NETESTO_HIDDEN int fl_flush_one(PyObject *flow, PyObject *b_rec, Py_ssize_t n, Py_ssize_t rec_len,
                                Py_ssize_t *written);
NETESTO_HIDDEN extern const struct fl_name fl_block_names[];
#endif

#endif
