/* What the Python-facing C files of netesto's _fastloop extension share: _fastloop.c (the sampler's rows
 * and the module), _fastloop_rr.c (the lone TCP_RR loops) and _fastloop_hist.c (the latencies' histogram).
 * Each of the last two lends the module its functions and constants (PyInit__fastloop adds them). */
#ifndef NETESTO_FASTLOOP_MOD_H
#define NETESTO_FASTLOOP_MOD_H

#include "_loops.h"

/* A flow end's row taken by a C loop at its idle point (_fastloop.c; what the SAMPLE_API capsule lends the
 * other extensions): see struct sample_api in _loops.h. */
int end_take_lat(PyObject *flow, const int64_t *lat, Py_ssize_t nlat);
int end_sample(PyObject *flow, const long long *ctr3, int64_t *acc, Py_ssize_t *written);

/* Whether a buffer's struct format is native int64 (_fastloop_hist.c) */
int native_int64(const char *fmt);

extern PyMethodDef fastloop_rr_methods[];
extern const struct int_constant fastloop_rr_constants[];
extern PyMethodDef fastloop_hist_methods[];
extern const struct int_constant fastloop_hist_constants[];

#endif
