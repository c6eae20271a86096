/* The Sampler's sweep in C (netesto's _fastloop extension, see sampler.py): sweep is one whole sweep of an
 * interval, from the clocks to the next grid point, so that a sweep runs no Python when nothing is left to
 * it. A sweep comes every 10 ms and finds the interpreter's code and data cold: the few lines of Python
 * around sample_tick cost about what 5 to 10 of its rows do. The rows are fl_tick_rows' (_fastloop_tick.c),
 * what the sampler's files share in _fastloop_row.h.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_fastloop_row.h"

#include <math.h>
#include <stdint.h>

#include "_fastloop_mod.h"

enum { SWEEP_NS, SWEEP_ROWS, SWEEP_N }; /* the sweep's acc: its thread CPU ns, the rows it took */

/* The hot ends that have no row due (due_at inf: after a --sample-duty window without rows): due at when.
 * A row taken moved its flow end's due_at on itself (next_point: maybe still at or before point, the rows
 * it owes), one left to Python moves it when built (FlowRecord.sample); a row taken before its due_at (a
 * sweep run before its point, at now) moves it on as if at point. 0 or -1. */
static int hot_due(PyObject *hot, double point, double now, double interval, double when)
{
    PyObject *next = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(hot); i++) {
        PyObject *flow = PyList_GET_ITEM(hot, i);
        if (!PyObject_TypeCheck(flow, flow_type)) continue; /* (fl_tick_rows took no row of it either) */
        PyObject *at = SLOT(flow, A_DUEAT);
        double d = at != NULL && PyFloat_Check(at) ? PyFloat_AS_DOUBLE(at) : NAN;
        PyObject *set;
        if (isinf(d)) {
            if (next == NULL && (next = PyFloat_FromDouble(when)) == NULL) return -1;
            Py_INCREF(next);
            set = next;
        } else if (now < d && d <= point) {
            if ((set = PyFloat_FromDouble(next_point(d, point, interval))) == NULL) {
                Py_XDECREF(next);
                return -1;
            }
        } else {
            continue;
        }
        Py_XSETREF(SLOT(flow, A_DUEAT), set);
    }
    Py_XDECREF(next);
    return 0;
}

PyDoc_STRVAR(sweep_doc,
"sweep(fast, hot, point, interval, acc) -> when, or (when, mono, wall, due, failed, python)\n\n"
"One sweep of the Sampler (Sampler._tick's, without --sample-duty): stamped now (time.time() and\n"
"time.monotonic()), the rows sample_tick would take of every flow end of the list fast and of those of\n"
"the list hot whose due_at is at or before the grid point point (each row moves its flow end's due_at on:\n"
"grid.next_point); the hot ends that have none due (due_at inf) are due at when, the sweep's next grid point\n"
"(grid.next_point of point: past now, or the next one owed when it came late). acc (int64 [thread CPU ns,\n"
"rows]) takes the sweep's thread CPU time, clocks included, and its rows.\n"
"Returns when, or, where something is left to Python, when with the stamps and sample_tick's three lists.");

static PyObject *sweep(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyList_Check(args[0]) || !PyList_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "sweep takes two lists of flow ends, point, interval and acc");
        return NULL;
    }
    if (flow_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "sweep: no sample_setup(cls) yet");
        return NULL;
    }
    int64_t cpu0 = fl_thread_ns();
    double point = PyFloat_AsDouble(args[2]), interval = PyFloat_AsDouble(args[3]);
    if ((point == -1.0 || interval == -1.0) && PyErr_Occurred()) return NULL;
    if (!(interval > 0.0)) {
        PyErr_SetString(PyExc_ValueError, "sweep: the interval must be > 0");
        return NULL;
    }
    Py_buffer av;
    if (get_state(args[4], &av, SWEEP_N, "acc") < 0) return NULL;
    int64_t *acc = av.buf;
    double stamps[2];
    fl_stamps_at(stamps, now_ns());
    PyObject *due = PyList_New(0), *failed = PyList_New(0), *python = PyList_New(0), *out = NULL;
    Py_ssize_t rows = 0;
    if (due == NULL || failed == NULL || python == NULL
        || fl_tick_rows(args[0], stamps, NAN, due, failed, python, &rows) < 0
        || fl_tick_rows(args[1], stamps, point, due, failed, python, &rows) < 0)
        goto done;
    double when = next_point(point, stamps[1], interval); /* (behind: maybe past, the rows owed come next) */
    if (hot_due(args[1], point, stamps[1], interval, when) < 0) goto done;
    if (PyList_GET_SIZE(due) || PyList_GET_SIZE(failed) || PyList_GET_SIZE(python))
        out = Py_BuildValue("(dddOOO)", when, stamps[1], stamps[0], due, failed, python);
    else
        out = PyFloat_FromDouble(when);
done:
    Py_XDECREF(due);
    Py_XDECREF(failed);
    Py_XDECREF(python);
    acc[SWEEP_ROWS] += rows;
    acc[SWEEP_NS] += fl_thread_ns() - cpu0;
    PyBuffer_Release(&av);
    return out;
}

NETESTO_HIDDEN PyMethodDef fastloop_sweep_methods[] = {
    {"sweep", (PyCFunction)(void (*)(void))sweep, METH_FASTCALL, sweep_doc},
    {NULL, NULL, 0, NULL},
};
NETESTO_HIDDEN const struct int_constant fastloop_sweep_constants[] = {{"SWEEP_FIELDS", SWEEP_N}, {NULL, 0}};
