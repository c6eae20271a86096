/* What the Python-facing C files of netesto's _fastloop extension share: _fastloop.c (the module),
 * _fastloop_hot.c (the hot rows), _fastloop_rr.c (the lone TCP_RR loops), _fastloop_hist.c (the latencies'
 * histogram) and the sampler's _fastloop_row.c, _fastloop_tick.c, _fastloop_sweep.c, _fastloop_block.c.
 * Each of the others lends the module its functions (and constants): PyInit__fastloop adds them, and no
 * file calls into _fastloop.c. */
#ifndef NETESTO_FASTLOOP_MOD_H
#define NETESTO_FASTLOOP_MOD_H

#include "../_loops.h"

/* A flow end's row taken by a C loop at its idle point (_fastloop_hot.c; what the SAMPLE_API capsule,
 * fastloop_sample_api, lends the other extensions): see struct sample_api in _loops.h. */
int end_take_lat(PyObject *flow, const int64_t *lat, Py_ssize_t nlat);
int end_sample(PyObject *flow, const long long *ctr3, int64_t *acc, Py_ssize_t *written);
NETESTO_HIDDEN extern const struct sample_api fastloop_sample_api;
NETESTO_HIDDEN extern PyMethodDef fastloop_hot_methods[]; /* sample_end */
NETESTO_HIDDEN extern const struct int_constant fastloop_hot_constants[];

/* Whether a buffer's struct format is native int64 (_fastloop_hist.c) */
int native_int64(const char *fmt);

extern PyMethodDef fastloop_rr_methods[];
extern const struct int_constant fastloop_rr_constants[];
extern PyMethodDef fastloop_hist_methods[];
extern const struct int_constant fastloop_hist_constants[];
/* The sampler's functions (_fastloop_row.c, _fastloop_tick.c, _fastloop_sweep.c, _fastloop_block.c with zlib) */
NETESTO_HIDDEN extern PyMethodDef fastloop_row_methods[];
NETESTO_HIDDEN extern PyMethodDef fastloop_tick_methods[];
NETESTO_HIDDEN extern PyMethodDef fastloop_sweep_methods[];
NETESTO_HIDDEN extern const struct int_constant fastloop_sweep_constants[];
#ifdef NETESTO_ZLIB
NETESTO_HIDDEN extern PyMethodDef fastloop_block_methods[];
#endif

#endif
