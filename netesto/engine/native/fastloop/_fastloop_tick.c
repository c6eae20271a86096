/* The sampler's tick in C (netesto's _fastloop extension, see fastloop.py): row_take takes one flow end's
 * row from its slots (RR rows with their latency part: lat_summary, in _fastloop_lat.c), block_out has its
 * due block written (flush_one, in _fastloop_block.c, when zlib is there), fl_row_one does both for one
 * flow end; fl_tick_rows (sample_tick's, and the whole sweep's in _fastloop_sweep.c) takes the rows of many
 * flow ends, their objects prefetched ahead, and then writes their due blocks. The row itself is built in
 * _fastloop_row.c, the hot rows of the C loops (end_sample, which calls fl_row_one too) in _fastloop_hot.c,
 * the module in _fastloop.c; shared: _fastloop_row.h.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_fastloop_row.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_fastloop.h"
#include "_fastloop_mod.h"

static PyObject *s_count, *s_fold_done; /* names the tick uses */
NETESTO_HIDDEN const struct fl_name fl_tick_names[] = {
    {&s_count, "count"}, {&s_fold_done, "_fold_done"}, {NULL, NULL},
};

static int64_t *lat_work; /* lat_summary's scratch (the GIL is held) */
static size_t lat_work_cap;

/* v[from..to) = the flow end's slots of those attributes, new references (fileno() runs code: what
 * the tick reads stays alive). 0, or -1 with an exception set (a slot not set). */
static int read_slots(PyObject *flow, PyObject **v, int from, int to)
{
    for (int i = from; i < to; i++) {
        v[i] = SLOT(flow, i);
        if (v[i] == NULL) {
            PyErr_Format(PyExc_AttributeError, "sample_tick: %s has no %s", Py_TYPE(flow)->tp_name, attr_names[i]);
            return -1;
        }
        Py_INCREF(v[i]);
    }
    return 0;
}

/* The interval's latencies of an RR flow end (its lat_raw, a buffer of native int64) summarized into part
 * (LAT_SIZE bytes); *n their number. 1: done (zeros for none), 0: the Python twin must do this row (values
 * lat_summary leaves to it), -1: an exception is set. */
static int rr_part(PyObject *lat_raw, char *part, Py_ssize_t *n)
{
    Py_buffer lv;
    if (PyObject_GetBuffer(lat_raw, &lv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return -1;
    int out = 0;
    if (lv.itemsize != 8 || !native_int64(lv.format)) {
        PyErr_SetString(PyExc_TypeError, "latencies must be a buffer of native int64 (array('q'))");
        out = -1;
        goto done;
    }
    *n = lv.len / 8;
    if (*n == 0) {
        memset(part, 0, LAT_SIZE);
        out = 1;
        goto done;
    }
    if ((size_t)*n > lat_work_cap) {
        int64_t *grown = PyMem_Realloc(lat_work, (size_t)*n * sizeof(int64_t));
        if (grown == NULL) {
            PyErr_NoMemory();
            out = -1;
            goto done;
        }
        lat_work = grown;
        lat_work_cap = (size_t)*n;
    }
    out = lat_summary(lv.buf, (size_t)*n, lat_work, part);
done:
    PyBuffer_Release(&lv);
    return out;
}

/* What an RR row's latency part leaves behind (FlowRecord._latency_record): the n latencies move from
 * lat_raw to lat_done, which folds into the flow's histogram once it holds lat_batch. 0 or -1. */
static int rr_done(PyObject *flow, PyObject *lat_raw, PyObject *lat_done, Py_ssize_t n)
{
    if (n == 0) return 0;
    PyObject *same = PySequence_InPlaceConcat(lat_done, lat_raw); /* array += array: one memcpy */
    if (same == NULL) return -1;
    Py_DECREF(same);
    if (PySequence_DelSlice(lat_raw, 0, n) < 0) return -1;
    Py_ssize_t have = PySequence_Size(lat_done);
    if (have < 0) return -1;
    if (have >= lat_batch) {
        PyObject *r = PyObject_CallMethodNoArgs(flow, s_fold_done);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* Whether an RR flow end's row must go through Python (FlowRecord.sample): rows waiting for their latency
 * part, or latencies already folded into this interval's histogram. 1 or 0, -1 with an exception set. */
static int rr_in_python(PyObject *pending, PyObject *ihist)
{
    if (!PyList_Check(pending)) return 1;
    if (PyList_GET_SIZE(pending)) return 1;
    PyObject *count = PyObject_GetAttr(ihist, s_count);
    if (count == NULL) return -1;
    int folded = PyObject_IsTrue(count);
    Py_DECREF(count);
    return folded;
}

/* The flow end's next due instant (due_at) once its row is in, taken at mono: the next point of its grid
 * (steps of due_every), already past when the row came late (next_point: the rows it owes). */
static int advance_due(PyObject *flow, double mono)
{
    PyObject *at = SLOT(flow, A_DUEAT), *every = SLOT(flow, A_DUEEVERY);
    if (at == NULL || every == NULL || !PyFloat_Check(at) || !PyFloat_Check(every)) return 0; /* not gridded */
    double d = PyFloat_AS_DOUBLE(at), e = PyFloat_AS_DOUBLE(every);
    if (!(e > 0.0) || !(d <= mono)) return 0;
    PyObject *n = PyFloat_FromDouble(next_point(d, mono, e));
    if (n == NULL) return -1;
    Py_XSETREF(SLOT(flow, A_DUEAT), n);
    return 0;
}

/* One flow end's row (see sample_tick), its counters tx, rx, trans from ctr3 when not NULL (a C loop's, not
 * yet in the flow end), else from its slots. 1: its block is due, 0: not yet, 2: the row must be built
 * in Python (nothing done), -1: an exception is set. A row built moves due_at on (advance_due). */
static int row_take(PyObject *flow, const double stamps[2], const long long *ctr3)
{
    PyObject *v[A_N] = {NULL};
    int out = -1;
    if (!PyObject_TypeCheck(flow, flow_type)) {
        PyErr_Format(PyExc_TypeError, "sample_tick: a %s is not a %s", Py_TYPE(flow)->tp_name, flow_type->tp_name);
        return -1;
    }
    if (read_slots(flow, v, 0, A_LATRAW) < 0) goto done; /* the RR ones only for RR rows: cold lines */
    long parts;
    if (check_row_args("sample_tick", v[A_REC], v[A_PARTS], v[A_LAST], v[A_GAPS], &parts) < 0) goto done;
    long long counters[6];
    if (get_counters(v + A_TX, counters) < 0) goto done;
    if (ctr3 != NULL) memcpy(counters, ctr3, 3 * sizeof(long long));
    Py_ssize_t nrows = PyLong_AsSsize_t(v[A_NROWS]), rec_len = PyLong_AsSsize_t(v[A_RECLEN]);
    Py_ssize_t flush_at = PyLong_AsSsize_t(v[A_FLUSHAT]);
    if (PyErr_Occurred()) goto done;
    Py_ssize_t base = row_size(parts);
    int rr = rec_len == base + LAT_SIZE; /* an RR flow end's rows end in their latency part */
    if (rec_len != base && !rr) {
        PyErr_Format(PyExc_ValueError, "sample_tick: %zd-byte records, but rows of %zd bytes (+ %d for RR)",
                     rec_len, base, LAT_SIZE);
        goto done;
    }
    char part[LAT_SIZE];
    Py_ssize_t nlat = 0;
    if (rr) {
        if (read_slots(flow, v, A_LATRAW, A_DUEAT) < 0) goto done;
        int py = rr_in_python(v[A_LATPEND], v[A_IHIST]);
        if (py == 0) {
            int got = rr_part(v[A_LATRAW], part, &nlat);
            py = got < 0 ? -1 : !got;
        }
        if (py != 0) {
            out = py < 0 ? -1 : 2;
            goto done;
        }
    }
    int fd = parts > 0 ? fl_sock_fd(v[A_SOCK]) : -1;
    if (fd == -2) goto done;
    char *row = row_at(v[A_REC], nrows * rec_len, rec_len);
    if (row == NULL) goto done;
    fl_build_row(row, fd, parts, stamps, counters, PyByteArray_AS_STRING(v[A_LAST]), PyByteArray_AS_STRING(v[A_GAPS]));
    if (rr) memcpy(row + base, part, LAT_SIZE);
    PyObject *n = PyLong_FromSsize_t(nrows + 1);
    if (n == NULL) goto done;
    Py_XSETREF(SLOT(flow, A_NROWS), n);
    if (rr && rr_done(flow, v[A_LATRAW], v[A_LATDONE], nlat) < 0) goto done;
    if (advance_due(flow, stamps[1]) < 0) goto done;
    out = nrows + 1 >= flush_at;
done:
    for (int i = 0; i < A_N; i++) Py_XDECREF(v[i]);
    return out;
}

/* A flow end's due block (its nrows rows of b_rec) written here (flush_one) when it can be: 0, or 1 (Python
 * must write it, *written bytes of it out), -1 with an exception set. */
static int block_out(PyObject *flow, Py_ssize_t *written)
{
    *written = 0;
#ifdef NETESTO_ZLIB
    PyObject *rec = SLOT(flow, A_REC), *n = SLOT(flow, A_NROWS), *len = SLOT(flow, A_RECLEN);
    if (rec == NULL || n == NULL || len == NULL || !PyByteArray_Check(rec)) return 1; /* Python's flush says why */
    Py_ssize_t rows = PyLong_AsSsize_t(n), rec_len = PyLong_AsSsize_t(len);
    if (PyErr_Occurred()) return -1;
    Py_INCREF(rec); /* the flush calls the writer: the block stays what it writes */
    int flushed = fl_flush_one(flow, rec, rows, rec_len, written);
    Py_DECREF(rec);
    return flushed < 0 ? -1 : !flushed;
#else
    return 1;
#endif
}

/* One flow end's row now (row_take) and its block when due (block_out): 0, 1 (Python must write the block,
 * *written bytes of it out), 2 (the row must be built in Python, nothing done) or -1 with an exception set. */
NETESTO_HIDDEN int fl_row_one(PyObject *flow, const double stamps[2], const long long *ctr3, Py_ssize_t *written)
{
    *written = 0;
    int out = row_take(flow, stamps, ctr3);
    return out == 1 ? block_out(flow, written) : out;
}

/* Prefetches of the flow ends a tick will come to (sample_tick), in three stages so that each stage's
 * addresses are already in the cache when it reads them: a spaced tick finds them all cold, and a row's
 * objects are a chain (instance -> slot -> bytearray -> its bytes) whose misses would come one after
 * another; prefetched, they overlap the getsockopt of the rows before. Only reads: no effect on rows. */

static void prefetch_instance(PyObject *flow)
{
    const char *p = (const char *)flow;
    __builtin_prefetch(p);
    for (Py_ssize_t at = slot_lo & ~(Py_ssize_t)63; at < slot_hi; at += 64) __builtin_prefetch(p + at);
}

static void prefetch_objects(PyObject *flow)
{
    if (!PyObject_TypeCheck(flow, flow_type)) return;
    for (int i = 0; i < A_LATRAW; i++) {
        PyObject *o = SLOT(flow, i);
        if (o != NULL) __builtin_prefetch(o);
    }
}

static void prefetch_bytes(PyObject *flow)
{
    if (!PyObject_TypeCheck(flow, flow_type)) return;
    PyObject *rec = SLOT(flow, A_REC), *last = SLOT(flow, A_LAST), *gaps = SLOT(flow, A_GAPS);
    PyObject *nrows = SLOT(flow, A_NROWS), *rec_len = SLOT(flow, A_RECLEN);
    if (gaps != NULL && PyByteArray_CheckExact(gaps)) __builtin_prefetch(PyByteArray_AS_STRING(gaps), 1);
    if (last != NULL && PyByteArray_CheckExact(last)) {
        const char *b = PyByteArray_AS_STRING(last);
        for (Py_ssize_t at = 0; at < PyByteArray_GET_SIZE(last); at += 64) __builtin_prefetch(b + at, 1);
    }
    if (rec == NULL || !PyByteArray_CheckExact(rec) || nrows == NULL || !PyLong_CheckExact(nrows) || rec_len == NULL
        || !PyLong_CheckExact(rec_len))
        return;
    Py_ssize_t n = PyLong_AsSsize_t(nrows), len = PyLong_AsSsize_t(rec_len);
    if (n < 0 || len < 0) {
        PyErr_Clear();
        return;
    }
    Py_ssize_t at = n * len, have = PyByteArray_GET_SIZE(rec);
    const char *b = PyByteArray_AS_STRING(rec);
    for (Py_ssize_t k = at & ~(Py_ssize_t)63; k < at + len && k < have; k += 64) __builtin_prefetch(b + k, 1);
}

PyDoc_STRVAR(lat_summary_doc,
"lat_summary(values) -> bytes or None\n\n"
"The latency part of an RR row (records.LAT) for one interval's latencies\n"
"(ns, a buffer of native int64): records.interval_summary's bytes. None\n"
"where that twin must do it: no values, a negative one, a value of 2**52 ns\n"
"or more or a sum of 2**53 or more (doubles would no longer be exact).");

static PyObject *lat_summary_py(PyObject *self, PyObject *values)
{
    char part[LAT_SIZE];
    Py_ssize_t n = 0;
    int got = rr_part(values, part, &n);
    if (got < 0) return NULL;
    if (got == 0 || n == 0) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(part, LAT_SIZE);
}

PyDoc_STRVAR(sample_tick_doc,
"sample_tick(flows, wall, mono) -> (due, failed, python)\n\n"
"One sampler tick over a list of flow ends (instances of the class given to\n"
"sample_setup): for each,\n"
"the row sample_row would build, put at nrows * rec_len of its b_rec (from\n"
"its sock, rec_parts, counters, last_tcp and gaps), and nrows + 1. An RR flow\n"
"end's row (rec_len is the row's plus records.LAT) ends in its interval's\n"
"latency part (lat_summary of lat_raw, whose values then move to lat_done),\n"
"as FlowRecord.sample would put it; python lists the RR flow ends whose row\n"
"the tick left to FlowRecord.sample (rows waiting for their latency part,\n"
"latencies folded into ihist, values lat_summary leaves to its twin).\n"
"A flow end whose nrows reaches flush_at has a block due: built with zlib,\n"
"the tick writes it as FlowEnd.flush would (the block to its writer's\n"
"direct_fd(rec_len), then writer.rows and samples + n, nrows 0, flush_at\n"
"flush_rows). due lists (flow end, bytes written) for the blocks Python must\n"
"write (FlowEnd.flush(written)): every due block without zlib, else those\n"
"with no direct fd or whose writev fell short. failed lists (flow end,\n"
"exception) for those whose row could not be built or written (the others\n"
"are sampled all the same).");

/* (flow, the exception set) appended to failed, the exception cleared. 0 or -1. */
static int take_failed(PyObject *flow, PyObject *failed)
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyObject *pair = value != NULL ? PyTuple_Pack(2, flow, value) : NULL;
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    int bad = pair == NULL || PyList_Append(failed, pair) < 0;
    Py_XDECREF(pair);
    return bad ? -1 : 0;
}

/* Whether flow (a flow end) has a row due at or before due_by (its due_at). */
static int due_by_(PyObject *flow, double due_by)
{
    PyObject *at = PyObject_TypeCheck(flow, flow_type) ? SLOT(flow, A_DUEAT) : NULL;
    return at != NULL && PyFloat_Check(at) && PyFloat_AS_DOUBLE(at) <= due_by;
}

/* The rows of the flow ends in the list flows at stamps, as sample_tick takes them: every row first
 * (row_take), then the blocks due (block_out); into due, failed and python as it returns them, *rows
 * counting those taken. Where due_by is not NaN, only the flow ends whose due_at is at or before it (the
 * sweep's hot ends still due), with the rows each still owes for points up to it. 0, or -1 with an
 * exception set. */
NETESTO_HIDDEN int fl_tick_rows(PyObject *flows, const double stamps[2], double due_by, PyObject *due, PyObject *failed,
                                PyObject *python, Py_ssize_t *rows)
{
    int all = isnan(due_by);
    PyObject *blocks = PyList_New(0); /* the flow ends whose block is due: written after the rows, which stay
                                       * within a row's time of the stamps, and the write path stays warm */
    if (blocks == NULL) return -1;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(flows); i++) {
        Py_ssize_t n = PyList_GET_SIZE(flows);
        if (i == 0) {
            for (Py_ssize_t k = 0; k < 3 && k < n; k++) prefetch_instance(PyList_GET_ITEM(flows, k));
            for (Py_ssize_t k = 0; k < 2 && k < n; k++) prefetch_objects(PyList_GET_ITEM(flows, k));
        }
        if (i + 3 < n) prefetch_instance(PyList_GET_ITEM(flows, i + 3));
        if (i + 2 < n) prefetch_objects(PyList_GET_ITEM(flows, i + 2));
        if (i + 1 < n) prefetch_bytes(PyList_GET_ITEM(flows, i + 1));
        PyObject *flow = PyList_GET_ITEM(flows, i);
        if (!all && !due_by_(flow, due_by)) continue;
        Py_INCREF(flow); /* fileno() runs code, which could drop it from the list */
        int got = row_take(flow, stamps, NULL);
        *rows += 1;
        /* a hot end still due (stalled, and behind since a late sweep: no idle point of its own comes to take
         * them) owes the rows of the points it passed: now, each at its own instant */
        if (!all) {
            double own[2] = {stamps[0], stamps[1]};
            for (int owed = 0; got == 0 && owed < TICK_BACKLOG && due_by_(flow, fmin(due_by, own[1])); owed++) {
                fl_stamps_at(own, now_ns()); /* (a point already past: a sweep run early owes nothing more) */
                got = row_take(flow, own, NULL);
                *rows += 1;
            }
        }
        int bad = got == 1   ? PyList_Append(blocks, flow) < 0 /* written once every row is read */
                  : got == 2 ? PyList_Append(python, flow) < 0
                  : got < 0  ? take_failed(flow, failed) < 0
                             : 0;
        Py_DECREF(flow);
        if (bad) goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(blocks); i++) {
        PyObject *flow = PyList_GET_ITEM(blocks, i);
        Py_ssize_t written;
        int got = block_out(flow, &written);
        PyObject *pair = NULL;
        int bad = 0;
        if (got == 1) {
            pair = Py_BuildValue("(On)", flow, written);
            bad = pair == NULL || PyList_Append(due, pair) < 0;
        } else if (got < 0) {
            bad = take_failed(flow, failed) < 0;
        }
        Py_XDECREF(pair);
        if (bad) goto fail;
    }
    Py_DECREF(blocks);
    return 0;
fail:
    Py_DECREF(blocks);
    return -1;
}

static PyObject *sample_tick(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "sample_tick takes a list of flow ends, wall and mono");
        return NULL;
    }
    if (flow_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "sample_tick: no sample_setup(cls) yet");
        return NULL;
    }
    double stamps[2];
    for (int i = 0; i < 2; i++) {
        stamps[i] = PyFloat_AsDouble(args[1 + i]);
        if (stamps[i] == -1.0 && PyErr_Occurred()) return NULL;
    }
    PyObject *due = PyList_New(0), *failed = PyList_New(0), *python = PyList_New(0);
    Py_ssize_t rows = 0;
    if (due == NULL || failed == NULL || python == NULL
        || fl_tick_rows(args[0], stamps, NAN, due, failed, python, &rows) < 0) {
        Py_XDECREF(due);
        Py_XDECREF(failed);
        Py_XDECREF(python);
        return NULL;
    }
    return Py_BuildValue("(NNN)", due, failed, python);
}

NETESTO_HIDDEN PyMethodDef fastloop_tick_methods[] = {
    {"sample_tick", (PyCFunction)(void (*)(void))sample_tick, METH_FASTCALL, sample_tick_doc},
    {"lat_summary", lat_summary_py, METH_O, lat_summary_doc},
    {NULL, NULL, 0, NULL},
};
