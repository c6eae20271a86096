/* The hot rows of netesto's _fastloop extension (see fastloop.py): a flow end's row taken at its idle point,
 * by the Sampler (sample_end: Sampler.hot), by the lone TCP_RR loops (_fastloop_rr.c) and, through the
 * module's SAMPLE_API capsule, by the other C loops. The row itself comes from the tick's fl_row_one
 * (_fastloop_tick.c); the module (_fastloop.c) adds sample_end and the capsule. Shared: _fastloop_row.h,
 * _fastloop_mod.h.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_fastloop_row.h"

#include <stdint.h>

#include "_fastloop_mod.h"

static PyObject *s_frombytes; /* interned by the module's init (fl_hot_names) */
NETESTO_HIDDEN const struct fl_name fl_hot_names[] = {{&s_frombytes, "frombytes"}, {NULL, NULL}};

/* Whether a flow end (an instance of sample_setup's class) has a row due at mono (due_at <= mono). */
static int end_due(PyObject *flow, double mono)
{
    if (flow_type == NULL || !PyObject_TypeCheck(flow, flow_type)) return 0;
    PyObject *at = SLOT(flow, A_DUEAT);
    return at != NULL && PyFloat_Check(at) && PyFloat_AS_DOUBLE(at) <= mono;
}

/* A C loop's nlat latencies (ns) of an RR flow end into its lat_raw (array.frombytes). 0, or -1 with an
 * exception set. */
int end_take_lat(PyObject *flow, const int64_t *lat, Py_ssize_t nlat)
{
    if (nlat <= 0) return 0;
    if (flow_type == NULL || !PyObject_TypeCheck(flow, flow_type) || SLOT(flow, A_LATRAW) == NULL) {
        PyErr_SetString(PyExc_TypeError, "end_take_lat: not a flow end with lat_raw");
        return -1;
    }
    PyObject *mv = PyMemoryView_FromMemory((char *)lat, nlat * (Py_ssize_t)sizeof(int64_t), PyBUF_READ);
    if (mv == NULL) return -1;
    PyObject *r = PyObject_CallMethodOneArg(SLOT(flow, A_LATRAW), s_frombytes, mv);
    Py_DECREF(mv);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

#define PROBE_EVERY 8 /* hot rows per one whose thread CPU is read (ACC_PROBED) */
static int64_t probe_ns = -1; /* what two fl_thread_ns() back to back differ by: the reads' own part */


/* One flow end's row now, at its own instant (a hot sample: Sampler.hot, the C loops' idle points): stamps
 * read here, its counters tx, rx, trans from ctr3 (or its slots: NULL). Returns row_one's 0, 1 (*written),
 * 2 or -1. acc (ACC_N int64) counts the row, and for every PROBE_EVERY-th row its thread CPU time (less the
 * two reads' own part, probe_ns) goes into ACC_PROBED (ACC_PROBED_ROWS of them): the Sampler counts every
 * hot row at their mean, and the probes' own reads (ACC_NS, 2 probe_ns each) on top. The clock is a syscall
 * (~1.5 us here): two a row would cost as much as the row; elapsed time (vDSO) would count the time the
 * thread is preempted, 2x the CPU on a CPU shared by two. */
int end_sample(PyObject *flow, const long long *ctr3, int64_t *acc, Py_ssize_t *written)
{
    int probe = acc[ACC_ROWS] % PROBE_EVERY == 0;
    if (probe && probe_ns < 0) {
        int64_t best = INT64_MAX;
        for (int i = 0; i < 16; i++) {
            int64_t a = fl_thread_ns(), b = fl_thread_ns();
            best = b - a < best ? b - a : best;
        }
        probe_ns = best;
    }
    int64_t cpu0 = probe ? fl_thread_ns() : 0;
    *written = 0;
    int out;
    if (flow_type == NULL || !PyObject_TypeCheck(flow, flow_type)) {
        PyErr_SetString(PyExc_TypeError, "a hot sample of an object that is not a flow end");
        out = -1;
    } else {
        double stamps[2];
        fl_stamps_at(stamps, now_ns());
        Py_INCREF(flow);
        out = fl_row_one(flow, stamps, ctr3, written);
        Py_DECREF(flow);
    }
    acc[ACC_ROWS] += 1;
    if (probe) {
        int64_t used = fl_thread_ns() - cpu0 - probe_ns;
        acc[ACC_PROBED] += used > 0 ? used : 0;
        acc[ACC_PROBED_ROWS] += 1;
        acc[ACC_NS] += 2 * probe_ns; /* the probe's own two reads: the sampler's cost too */
    }
    return out;
}

/* what the module's capsule SAMPLE_API lends the other C loops */
NETESTO_HIDDEN const struct sample_api fastloop_sample_api = {SAMPLE_API_VERSION, end_due, end_take_lat,
                                                            end_sample};

PyDoc_STRVAR(sample_end_doc,
"sample_end(flow, acc) -> 0, 1 or 2\n\nOne flow end's row now, stamped at its own instant (a hot row: Sampler.hot), the\n"
"row sample_tick would build for it; its due_at moves past the stamp by due_every. 0: done; 1: its block is due\n"
"and Python must write it (FlowEnd.flush(acc[2])); 2: Python must build the row (FlowRecord.sample; nothing done).\n"
"acc (int64 [probes_ns, rows, written, probed_ns, probed_rows]) takes the row, and every PROBE_EVERY-th row's thread\n"
"CPU and the probe's own: all rows cost probed_ns * rows / probed_rows + probes_ns.");

static PyObject *sample_end_py(PyObject *self, PyObject *args)
{
    PyObject *flow, *acc_obj;
    Py_buffer av;
    if (!PyArg_ParseTuple(args, "OO", &flow, &acc_obj) || get_state(acc_obj, &av, ACC_N, "acc") < 0) return NULL;
    int64_t *acc = av.buf;
    Py_ssize_t written = 0;
    int out = end_sample(flow, NULL, acc, &written);
    if (out == 1) acc[ACC_WRITTEN] = written;
    PyBuffer_Release(&av);
    return out < 0 ? NULL : PyLong_FromLong(out);
}

NETESTO_HIDDEN PyMethodDef fastloop_hot_methods[] = {
    {"sample_end", sample_end_py, METH_VARARGS, sample_end_doc},
    {NULL, NULL, 0, NULL},
};

NETESTO_HIDDEN const struct int_constant fastloop_hot_constants[] = {{"PROBE_EVERY", PROBE_EVERY}, {NULL, 0}};
