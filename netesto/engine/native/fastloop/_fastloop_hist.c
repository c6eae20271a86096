/* The latencies' histogram counting of netesto's flow engine in C (Histogram.record_many); part of the
 * _fastloop extension (_fastloop_mod.h). */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

#include "_fastloop_mod.h"

/* Histogram buckets exactly as histogram.bucket_index: values below EXACT have their own
 * bucket; above, each octave [2^k, 2^(k+1)) has SUB buckets. The largest int64 has
 * bit length 63, so no value of a buffer of int64 reaches index HIST_BUCKETS. */
#define SUB_BITS 7
#define SUB (1 << SUB_BITS)
#define EXACT (2 * SUB)
#define HIST_BUCKETS (SUB * (63 - SUB_BITS - 1) + 2 * SUB)

static int bit_length(uint64_t v)
{
#if defined(__GNUC__)
    return v ? 64 - __builtin_clzll(v) : 0;
#else
    int n = 0;
    while (v) {
        n++;
        v >>= 1;
    }
    return n;
#endif
}

static Py_ssize_t bucket_of(int64_t v)
{
    if (v < EXACT) return (Py_ssize_t)v;
    int shift = bit_length((uint64_t)v) - SUB_BITS - 1;
    return (Py_ssize_t)SUB * shift + (Py_ssize_t)(v >> shift);
}

int native_int64(const char *fmt)
{
    /* array('q'), array('l') on LP64, memoryview casts, numpy int64 */
    if (fmt == NULL) return 0;
    if (*fmt == '@' || *fmt == '=' || *fmt == (PY_LITTLE_ENDIAN ? '<' : '>')) fmt++;
    return (fmt[0] == 'q' || (fmt[0] == 'l' && sizeof(long) == 8)) && fmt[1] == '\0';
}

static PyObject *sum_to_long(uint64_t hi, uint64_t lo)
{
    if (hi == 0) return PyLong_FromUnsignedLongLong(lo);
    PyObject *h = PyLong_FromUnsignedLongLong(hi), *l = PyLong_FromUnsignedLongLong(lo);
    PyObject *s64 = PyLong_FromLong(64), *shifted = NULL, *out = NULL;
    if (h && l && s64 && (shifted = PyNumber_Lshift(h, s64)) != NULL) out = PyNumber_Or(shifted, l);
    Py_XDECREF(h);
    Py_XDECREF(l);
    Py_XDECREF(s64);
    Py_XDECREF(shifted);
    return out;
}

PyDoc_STRVAR(hist_record_doc,
"hist_record(values, counts) -> (min, max, total) or None\n\n"
"Count a buffer of native int64 values (array('q')) into the dict counts\n"
"{bucket index: count} exactly as histogram.bucket_index buckets them;\n"
"negative values count as 0. Returns their min, max and sum (after that\n"
"clamping), or None (counts untouched) when values is empty.");

static PyObject *hist_record(PyObject *self, PyObject *args)
{
    PyObject *values_obj, *counts;
    Py_buffer vv;
    if (!PyArg_ParseTuple(args, "OO!", &values_obj, &PyDict_Type, &counts)) return NULL;
    if (PyObject_GetBuffer(values_obj, &vv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return NULL;
    if (vv.itemsize != 8 || !native_int64(vv.format)) {
        PyErr_Format(PyExc_TypeError, "values must be a buffer of native int64 (format 'q'), not '%s'",
                     vv.format ? vv.format : "B");
        PyBuffer_Release(&vv);
        return NULL;
    }
    const int64_t *v = vv.buf;
    Py_ssize_t n = vv.len / 8;
    if (n == 0) {
        PyBuffer_Release(&vv);
        Py_RETURN_NONE;
    }
    /* pass 1: min, max and a 128-bit sum (n non-negative int64 values cannot overflow it) */
    int64_t low = INT64_MAX, high = 0;
    uint64_t sum_lo = 0, sum_hi = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t x = v[i] < 0 ? 0 : v[i];
        if (x < low) low = x;
        if (x > high) high = x;
        uint64_t before = sum_lo;
        sum_lo += (uint64_t)x;
        sum_hi += sum_lo < before;
    }
    /* pass 2: bucket_of is monotonic, so a value in [low, high] has its bucket in [first, last];
     * the clamp keeps that true even if something outside the GIL rewrote the buffer meanwhile */
    Py_ssize_t first = bucket_of(low), span = bucket_of(high) - first + 1;
    uint64_t *tally = PyMem_Calloc((size_t)span, sizeof(uint64_t));
    if (tally == NULL) {
        PyBuffer_Release(&vv);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t x = v[i] < low ? low : v[i];
        tally[bucket_of(x > high ? high : x) - first]++;
    }
    PyBuffer_Release(&vv);

    /* fold the tallies into the dict: one dict update per bucket hit, not per value */
    PyObject *out = NULL;
    for (Py_ssize_t i = 0; i < span; i++) {
        if (tally[i] == 0) continue;
        PyObject *key = PyLong_FromSsize_t(first + i);
        PyObject *add = PyLong_FromUnsignedLongLong(tally[i]);
        PyObject *old, *sum = NULL;
        int failed = key == NULL || add == NULL;
        if (!failed) {
            old = PyDict_GetItemWithError(counts, key); /* borrowed */
            if (old != NULL) sum = PyNumber_Add(old, add);
            else if (!PyErr_Occurred()) {
                Py_INCREF(add);
                sum = add;
            }
            failed = sum == NULL || PyDict_SetItem(counts, key, sum) < 0;
        }
        Py_XDECREF(key);
        Py_XDECREF(add);
        Py_XDECREF(sum);
        if (failed) goto done; /* MemoryError: the dict may hold part of this batch */
    }
    PyObject *total = sum_to_long(sum_hi, sum_lo);
    if (total != NULL) out = Py_BuildValue("(LLN)", (long long)low, (long long)high, total);
done:
    PyMem_Free(tally);
    return out;
}

PyMethodDef fastloop_hist_methods[] = {
    {"hist_record", hist_record, METH_VARARGS, hist_record_doc},
    {NULL, NULL, 0, NULL},
};

const struct int_constant fastloop_hist_constants[] = {{"HIST_BUCKETS", HIST_BUCKETS}, {NULL, 0}};
