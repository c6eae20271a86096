/* The module of netesto's _fastloop extension (see fastloop.py): PyInit__fastloop adds what the other files
 * lend it, and nothing in them calls back here. The hot rows (sample_end: one flow end's row at its idle
 * point, also lent to the other C loops as SAMPLE_API) are in _fastloop_hot.c. The sampler's rows are built
 * in _fastloop_row.c (sample_row, sample_setup), its tick in _fastloop_tick.c (sample_tick, RR rows' latency
 * part: lat_summary, in _fastloop_lat.c), a whole sweep in _fastloop_sweep.c (sweep), the tick's block writes
 * in _fastloop_block.c (with zlib) (what these share: _fastloop_row.h). The lone TCP_RR loops are in
 * _fastloop_rr.c, the histogram's counting in _fastloop_hist.c (_fastloop_mod.h).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_fastloop_row.h"

#include <stdint.h>

#include "_fastloop.h"
#include "_fastloop_mod.h"
#ifdef NETESTO_ZLIB
#define TICK_WRITES 1 /* sample_tick writes the due blocks itself */
#else
#define TICK_WRITES 0
#endif

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastloop", "The flow engine's loops and sampler rows in C.", -1, NULL, /* the files' */
    NULL, NULL, NULL, NULL,
};

static const struct int_constant constants[] = {
    {"ROW_HEAD", ROW_HEAD}, {"ROW_INFO", ROW_INFO}, {"ROW_CC_SLOT", ROW_CC_SLOT}, {"ROW_LAT", LAT_SIZE},
    {"TICK_WRITES", TICK_WRITES}, {"ACC_FIELDS", ACC_N}, {"TICK_BACKLOG", TICK_BACKLOG}, {"BACKLOG_MS", BACKLOG_MS}, {NULL, 0},
};

PyMODINIT_FUNC PyInit__fastloop(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (add_int_constants(m, constants) < 0 || PyModule_AddFunctions(m, fastloop_hot_methods) < 0
        || add_int_constants(m, fastloop_hot_constants) < 0 || fl_intern(fl_hot_names) < 0
        || add_int_constants(m, fastloop_rr_constants) < 0
        || add_int_constants(m, fastloop_hist_constants) < 0 || PyModule_AddFunctions(m, fastloop_rr_methods) < 0
        || PyModule_AddFunctions(m, fastloop_hist_methods) < 0 || PyModule_AddFunctions(m, fastloop_row_methods) < 0
        || PyModule_AddFunctions(m, fastloop_tick_methods) < 0 || fl_intern(fl_tick_names) < 0
        || PyModule_AddFunctions(m, fastloop_sweep_methods) < 0 || add_int_constants(m, fastloop_sweep_constants) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *api = PyCapsule_New((void *)&fastloop_sample_api, SAMPLE_API_NAME, NULL);
    if (api == NULL || PyModule_AddObject(m, "SAMPLE_API", api) < 0) {
        Py_XDECREF(api);
        Py_DECREF(m);
        return NULL;
    }
    PyObject *qs = Py_BuildValue("(dddd)", lat_quantiles[0], lat_quantiles[1], lat_quantiles[2], lat_quantiles[3]);
    if (qs == NULL || PyModule_AddObject(m, "LAT_QUANTILES", qs) < 0) {
        Py_XDECREF(qs);
        Py_DECREF(m);
        return NULL;
    }
#ifdef NETESTO_ZLIB
    if (PyModule_AddIntConstant(m, "CRC32_FAST", block_crc32_fast()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    if (fl_intern(fl_block_names) < 0 || PyModule_AddFunctions(m, fastloop_block_methods) < 0) {
        Py_DECREF(m);
        return NULL;
    }
#endif
    return m;
}
