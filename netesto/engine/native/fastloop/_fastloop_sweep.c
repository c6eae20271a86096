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

/* Python's float floor division a // b (floatobject.c's float_floor_div), for b > 0: the grid's steps as
 * Sampler._tick counts them. */
static double floor_div(double a, double b)
{
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0.0 && mod < 0.0) div -= 1.0; /* b > 0: the remainder takes b's sign */
    if (div == 0.0) return copysign(0.0, a / b);
    double fl = floor(div);
    return div - fl > 0.5 ? fl + 1.0 : fl;
}

/* The hot ends whose row the sweep took or that had none due (due_at past point, or inf): due at when. 0 or -1. */
static int hot_due(PyObject *hot, double point, double when)
{
    PyObject *next = NULL;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(hot); i++) {
        PyObject *flow = PyList_GET_ITEM(hot, i);
        if (!PyObject_TypeCheck(flow, flow_type)) continue; /* (fl_tick_rows took no row of it either) */
        PyObject *at = SLOT(flow, A_DUEAT);
        double d = at != NULL && PyFloat_Check(at) ? PyFloat_AS_DOUBLE(at) : NAN;
        if (!(d <= point) && !isinf(d)) continue;
        if (next == NULL && (next = PyFloat_FromDouble(when)) == NULL) return -1;
        Py_INCREF(next);
        Py_XSETREF(SLOT(flow, A_DUEAT), next);
    }
    Py_XDECREF(next);
    return 0;
}

PyDoc_STRVAR(sweep_doc,
"sweep(fast, hot, point, interval, acc) -> when, or (when, mono, wall, due, failed, python)\n\n"
"One sweep of the Sampler (Sampler._tick's, without --sample-duty): stamped now (time.time() and\n"
"time.monotonic()), the rows sample_tick would take of every flow end of the list fast and of those of\n"
"the list hot whose due_at is at or before the grid point point; then the hot ends whose row it took, or\n"
"that have none due (due_at inf), are due at when: the next grid point after point (interval on, past\n"
"now). acc (int64 [thread CPU ns, rows]) takes the sweep's thread CPU time, clocks included, and its rows.\n"
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
    double when = point + interval, now = stamps[1];
    if (when <= now) when += (floor_div(now - when, interval) + 1.0) * interval; /* behind: skip grid points */
    if (hot_due(args[1], point, when) < 0) goto done;
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
