/* The sampler tick's block writes in C (netesto's _fastloop extension; built with zlib's header only):
 * flush_one writes a flow end's due block as FlowEnd.flush would, crc32 is the Python face of their crc.
 * The tick that calls flush_one is in _fastloop_tick.c, what the sampler's files share in _fastloop_row.h.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_fastloop_row.h"

#ifdef NETESTO_ZLIB
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <zlib.h> /* crc32 of the records blocks (setup.py defines NETESTO_ZLIB when it finds zlib.h) */

#include "_fastloop.h"
#include "_fastloop_mod.h"

static PyObject *s_writer, *s_direct_fd, *s_rows, *s_samples, *s_flush_rows; /* names the flush uses */
NETESTO_HIDDEN const struct fl_name fl_block_names[] = {
    {&s_writer, "writer"}, {&s_direct_fd, "direct_fd"}, {&s_rows, "rows"}, {&s_samples, "samples"},
    {&s_flush_rows, "flush_rows"}, {NULL, NULL},
};

static unsigned char *put_be(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

static void put_le32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* What FlowWriter.write_records puts before n records of size bytes: the block's length and crc32
 * (little-endian), then msgpack's {"type": "records", "n": n, "rec": and the bin's header (shortest
 * encodings, as msgpack writes them). h has room for 40 bytes; returns how many it holds. */
static size_t block_head(unsigned char *h, uint64_t n, uint64_t size, const char *rec)
{
    static const char rec_map[] = "\x83\xa4type\xa7records\xa1n", rec_key[] = "\xa3rec";
    unsigned char *p = h + 8;
    memcpy(p, rec_map, sizeof rec_map - 1);
    p += sizeof rec_map - 1;
    if (n < 0x80) p = put_be(p, n, 1);
    else if (n < 0x100) *p++ = 0xcc, p = put_be(p, n, 1);
    else if (n < 0x10000) *p++ = 0xcd, p = put_be(p, n, 2);
    else *p++ = 0xce, p = put_be(p, n, 4);
    memcpy(p, rec_key, sizeof rec_key - 1);
    p += sizeof rec_key - 1;
    if (size < 0x100) *p++ = 0xc4, p = put_be(p, size, 1);
    else if (size < 0x10000) *p++ = 0xc5, p = put_be(p, size, 2);
    else *p++ = 0xc6, p = put_be(p, size, 4);
    size_t plen = (size_t)(p - (h + 8));
    uint32_t crc = block_crc32(block_crc32(0, h + 8, plen), (const unsigned char *)rec, (size_t)size);
    put_le32(h, (uint32_t)(plen + size));
    put_le32(h + 4, (uint32_t)crc);
    return 8 + plen;
}

/* obj.name += n. 0 or -1 with an exception set. */
static int add_attr(PyObject *obj, PyObject *name, Py_ssize_t n)
{
    PyObject *old = PyObject_GetAttr(obj, name);
    if (old == NULL) return -1;
    PyObject *by = PyLong_FromSsize_t(n), *sum = by != NULL ? PyNumber_Add(old, by) : NULL;
    int rc = sum != NULL ? PyObject_SetAttr(obj, name, sum) : -1;
    Py_DECREF(old);
    Py_XDECREF(by);
    Py_XDECREF(sum);
    return rc;
}

/* FlowEnd.flush in C for a flow end whose block is due: its n rows (rec_len bytes each, at the start of
 * b_rec) go to its writer's fd as one records block (FlowWriter.write_records' bytes), then writer.rows and
 * samples grow by n, nrows is 0 and flush_at flush_rows again. 1: done; 0: Python must write the block,
 * *written bytes of it already gone out (no writer fd for these records, or a short or failed writev:
 * FlowWriter.write_records goes on from there and raises what the OS said); -1: an exception is set. */
NETESTO_HIDDEN int fl_flush_one(PyObject *flow, PyObject *b_rec, Py_ssize_t n, Py_ssize_t rec_len,
                                Py_ssize_t *written)
{
    *written = 0;
    PyObject *writer = PyObject_GetAttr(flow, s_writer);
    if (writer == NULL) return -1;
    int out = 0;
    PyObject *len = NULL, *fdo = NULL;
    if (writer == Py_None) goto done;
    len = PyLong_FromSsize_t(rec_len);
    fdo = len != NULL ? PyObject_CallMethodOneArg(writer, s_direct_fd, len) : NULL;
    if (fdo == NULL) goto fail;
    if (fdo == Py_None) goto done;
    int overflow;
    long fd = PyLong_AsLongAndOverflow(fdo, &overflow);
    if (fd == -1 && PyErr_Occurred()) goto fail;
    if (overflow || fd < 0 || fd > INT_MAX) goto done;
    Py_ssize_t size = n * rec_len;
    if (size > PyByteArray_GET_SIZE(b_rec) || size > 0x7fffffff - 64) goto done;
    unsigned char head[40];
    const char *rec = PyByteArray_AS_STRING(b_rec);
    size_t hlen = block_head(head, (uint64_t)n, (uint64_t)size, rec);
    struct iovec iov[2] = {{head, hlen}, {(void *)rec, (size_t)size}};
    ssize_t sent = writev((int)fd, iov, 2);
    if (sent != (ssize_t)hlen + size) {
        *written = sent > 0 ? sent : 0;
        goto done;
    }
    /* the rows are out: the buffer starts again whatever fails below (no block is written twice) */
    PyObject *zero = PyLong_FromLong(0), *flush_rows = PyObject_GetAttr(flow, s_flush_rows);
    if (zero != NULL) Py_XSETREF(SLOT(flow, A_NROWS), zero);
    if (flush_rows != NULL) Py_XSETREF(SLOT(flow, A_FLUSHAT), flush_rows);
    if (zero == NULL || flush_rows == NULL || add_attr(writer, s_rows, n) < 0 || add_attr(flow, s_samples, n) < 0)
        goto fail;
    out = 1;
    goto done;
fail:
    out = -1;
done:
    Py_DECREF(writer);
    Py_XDECREF(len);
    Py_XDECREF(fdo);
    return out;
}

PyDoc_STRVAR(crc32_doc,
"crc32(data, crc=0) -> int\n\n"
"zlib.crc32's value, computed as the tick's block writes compute it\n"
"(carry-less multiplication where the CPU has it: CRC32_FAST).");

static PyObject *crc32_py(PyObject *self, PyObject *args)
{
    Py_buffer b;
    unsigned int crc = 0;
    if (!PyArg_ParseTuple(args, "y*|I", &b, &crc)) return NULL;
    uint32_t got = block_crc32((uint32_t)crc, b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(got);
}

NETESTO_HIDDEN PyMethodDef fastloop_block_methods[] = {
    {"crc32", crc32_py, METH_VARARGS, crc32_doc},
    {NULL, NULL, 0, NULL},
};
#endif
