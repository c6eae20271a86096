/* The _fastloop extension of netesto's flow engine (see fastloop.py): this file has the sampler's rows in
 * C and the module. sample_row: one sampler row of a flow end (FlowEnd.sample); sample_tick: one sampler
 * tick over many flow ends, their due blocks written (FlowWriter.write_records' bytes) when zlib is there,
 * RR rows with their latency part (lat_summary, in _fastloop_lat.c); sample_end: one flow end's row at its
 * idle point (hot), also lent to the other C loops (SAMPLE_API). The lone TCP_RR loops are in
 * _fastloop_rr.c, the histogram's counting in _fastloop_hist.c (_fastloop_mod.h).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_loops.h"
#include <structmember.h> /* T_OBJECT_EX: how __slots__ members are typed */

#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "_fastloop.h"
#include "_fastloop_mod.h"
#ifdef NETESTO_ZLIB
#include <zlib.h> /* crc32 of the records blocks (setup.py defines NETESTO_ZLIB when it finds zlib.h) */
#define TICK_WRITES 1 /* sample_tick writes the due blocks itself */
#else
#define TICK_WRITES 0
#endif

/* A sampler row (flowend._record_layout): t_wall, t_mono and six uint64 counters, then
 * struct tcp_info, then tcp_bbr_info padded to 8-byte alignment. */
#define ROW_HEAD (2 * 8 + 6 * 8)
#define ROW_INFO 280 /* tcpinfo.TCP_INFO_LEN */
#define ROW_CC 20    /* tcpinfo.CC_INFO_LEN */
#define ROW_CC_SLOT 24
#define SOCKOPT_TCP_INFO 11
#define SOCKOPT_TCP_CC_INFO 26

/* Read one socket option into dst (size bytes, zero-filled past what the kernel gave);
 * on failure copy the last known value instead. Returns 1 when read. */
static int read_opt(int fd, int opt, char *dst, socklen_t want, socklen_t size, char *last)
{
    socklen_t len = want;
    if (fd >= 0 && getsockopt(fd, IPPROTO_TCP, opt, dst, &len) == 0) {
        if (len < size) memset(dst + len, 0, (size_t)(size - len));
        memcpy(last, dst, size);
        return 1;
    }
    memcpy(dst, last, size);
    return 0;
}

/* Put one row at row (room for ROW_HEAD plus the parts): the stamps, the counters (negative
 * ones as 0), then for parts >= 1 the socket's tcp_info and for parts == 2 its cc info, or the
 * last values (known) where fd is -1 or cannot be read. g (first, last, count, min, max of the
 * gaps between rows' mono stamps) takes in the row's stamp. Returns the number of options read. */
static long build_row(char *row, int fd, long parts, const double stamps[2], const long long counters[6],
                      char *known, char *gaps)
{
    uint64_t c[6];
    for (int i = 0; i < 6; i++) c[i] = counters[i] < 0 ? 0 : (uint64_t)counters[i]; /* udp_lost is negative while late datagrams are ahead */
    memcpy(row, stamps, 2 * sizeof(double));
    memcpy(row + 2 * sizeof(double), c, sizeof c);
    double g[5]; /* kept per row so flushes need not */
    memcpy(g, gaps, sizeof g);
    if (g[2] == 0.0 && g[0] == 0.0 && g[1] == 0.0) {
        g[0] = g[1] = stamps[1];
    } else {
        double gap = stamps[1] - g[1];
        g[3] = g[2] == 0.0 || gap < g[3] ? gap : g[3];
        g[4] = g[2] == 0.0 || gap > g[4] ? gap : g[4];
        g[2] += 1.0;
        g[1] = stamps[1];
    }
    memcpy(gaps, g, sizeof g);
    long read = 0;
    if (parts > 0) {
        int ok = read_opt(fd, SOCKOPT_TCP_INFO, row + ROW_HEAD, ROW_INFO, ROW_INFO, known);
        read += ok;
        if (parts == 2)
            read += read_opt(ok ? fd : -1, SOCKOPT_TCP_CC_INFO, row + ROW_HEAD + ROW_INFO, ROW_CC, ROW_CC_SLOT,
                             known + ROW_INFO);
    }
    return read;
}

static Py_ssize_t row_size(long parts)
{
    return ROW_HEAD + (parts > 0 ? ROW_INFO : 0) + (parts == 2 ? ROW_CC_SLOT : 0);
}

/* CPython's socket object (socketmodule.h's PySocketSockObject) starts with its fd: a socket of a type
 * whose fileno() is _socket.socket's (checked once per type, and the fd read in place checked against it)
 * has its fd read there, not through a method call (a spaced tick finds that code cold). */
typedef struct {
    PyObject_HEAD
    int sock_fd;
} sock_head;
static PyTypeObject *sock_base, *sock_direct; /* _socket.socket; the last type found to qualify */
static PyObject *sock_fileno, *s_fileno;      /* _socket.socket.fileno (what its subtypes must not redefine) */

static void sock_trust(PyObject *sock, int fd)
{
    PyTypeObject *t = Py_TYPE(sock);
    if (sock_base == NULL || t->tp_dictoffset != 0 || !PyType_IsSubtype(t, sock_base)) return;
    if (_PyType_Lookup(t, s_fileno) != sock_fileno || ((sock_head *)sock)->sock_fd != fd) return;
    Py_INCREF(t);
    Py_XSETREF(sock_direct, t);
}

/* The socket's fd, or -1 for None or a closed socket (fileno() -1); -2 with an exception set. */
static int sock_fd(PyObject *sock)
{
    if (sock == Py_None) return -1;
    if (sock_direct != NULL && Py_IS_TYPE(sock, sock_direct)) {
        int fd = ((sock_head *)sock)->sock_fd;
        return fd < 0 ? -1 : fd;
    }
    int fd = PyObject_AsFileDescriptor(sock);
    if (fd >= 0) {
        sock_trust(sock, fd);
        return fd;
    }
    if (!PyErr_ExceptionMatches(PyExc_ValueError)) return -2;
    PyErr_Clear();
    return -1;
}

/* The checks both row builders make on rec, last and gaps; parts out. 0 or -1 with an exception set. */
static int check_row_args(const char *fn, PyObject *rec, PyObject *parts_obj, PyObject *last, PyObject *gaps,
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
static int get_counters(PyObject *const *objs, long long counters[6])
{
    for (int i = 0; i < 6; i++) {
        counters[i] = PyLong_AsLongLong(objs[i]);
        if (counters[i] == -1 && PyErr_Occurred()) return -1;
    }
    return 0;
}

/* Room for size bytes at offset at of rec (at <= len(rec); rec grows, never shrinks): the row's address. */
static char *row_at(PyObject *rec, Py_ssize_t at, Py_ssize_t size)
{
    Py_ssize_t have = PyByteArray_GET_SIZE(rec);
    if (at < 0 || at > have) {
        PyErr_Format(PyExc_ValueError, "a row at %zd of a %zd-byte buffer", at, have);
        return NULL;
    }
    if (at + size > have && PyByteArray_Resize(rec, at + size) < 0) return NULL;
    return PyByteArray_AS_STRING(rec) + at;
}

PyDoc_STRVAR(sample_row_doc,
"sample_row(rec, at, sock, parts, wall, mono, tx, rx, trans, conns, lost, reordered, last, gaps) -> read\n\n"
"Put one sampler row at byte offset at (<= len(rec)) of the bytearray rec,\n"
"which grows when the row does not fit: wall, mono, the six counters\n"
"(negative ones as 0), then for parts >= 1 the socket's struct tcp_info and\n"
"for parts == 2 its TCP_CC_INFO padded to 24 bytes. last (a bytearray of\n"
"280 + 24 bytes) holds the last values read: a read refreshes it, and when\n"
"sock is None, closed or cannot be read the row gets last's values instead.\n"
"gaps (a bytearray of 5 doubles: first, last, count, min, max of the mono\n"
"stamps' gaps) takes in this row's stamp. Returns the number of options read.");

static PyObject *sample_row(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 14) {
        PyErr_Format(PyExc_TypeError, "sample_row takes 14 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *rec = args[0], *last = args[12], *gaps = args[13];
    long parts;
    if (check_row_args("sample_row", rec, args[3], last, gaps, &parts) < 0) return NULL;
    Py_ssize_t at = PyLong_AsSsize_t(args[1]);
    if (at == -1 && PyErr_Occurred()) return NULL;
    double stamps[2];
    long long counters[6];
    for (int i = 0; i < 2; i++) {
        stamps[i] = PyFloat_AsDouble(args[4 + i]);
        if (stamps[i] == -1.0 && PyErr_Occurred()) return NULL;
    }
    if (get_counters(args + 6, counters) < 0) return NULL;
    int fd = parts > 0 ? sock_fd(args[2]) : -1;
    if (fd == -2) return NULL;
    char *row = row_at(rec, at, row_size(parts));
    if (row == NULL) return NULL;
    return PyLong_FromLong(build_row(row, fd, parts, stamps, counters, PyByteArray_AS_STRING(last),
                                     PyByteArray_AS_STRING(gaps)));
}

/* FlowEnd attributes sample_tick reads (the six counters in a row, as get_counters takes them) */
enum { A_SOCK, A_PARTS, A_TX, A_RX, A_TRANS, A_CONNS, A_LOST, A_REORD, A_LAST, A_GAPS, A_REC, A_NROWS,
       A_RECLEN, A_FLUSHAT, A_LATRAW, A_LATDONE, A_IHIST, A_LATPEND, A_DUEAT, A_DUEEVERY, A_N };
static const char *const attr_names[A_N] = {"sock", "rec_parts", "tx", "rx", "trans", "conns", "udp_lost",
                                            "udp_reord", "last_tcp", "gaps", "b_rec", "nrows", "rec_len",
                                            "flush_at", "lat_raw", "lat_done", "ihist", "lat_pending", "due_at",
                                            "due_every"};
/* FlowEnd (sample_setup) and where its __slots__ for those attributes are in an instance: a tick reads
 * them directly (getattr through the instance dict would cost as much as the Python loop it replaces) */
static PyTypeObject *flow_type;
static Py_ssize_t slot_at[A_N];
static Py_ssize_t slot_lo, slot_hi; /* the instance's bytes holding the slots read for every row */
static Py_ssize_t lat_batch; /* FlowRecord.LAT_BATCH: lat_done folds into the flow's histogram at this length */
static PyObject *s_count, *s_fold_done, *s_frombytes;
static int64_t *lat_work; /* lat_summary's scratch (the GIL is held) */
static size_t lat_work_cap;

#define SLOT(flow, i) (*(PyObject **)((char *)(flow) + slot_at[i]))

PyDoc_STRVAR(sample_setup_doc,
"sample_setup(cls, lat_batch)\n\n"
"Let sample_tick sample instances of cls, whose __slots__ must include every\n"
"attribute sample_tick reads (subclasses must not redefine them). An RR row's\n"
"latencies go to lat_done, which cls._fold_done() empties once it holds lat_batch.");

static PyObject *sample_setup(PyObject *self, PyObject *args)
{
    PyObject *cls;
    Py_ssize_t batch;
    if (!PyArg_ParseTuple(args, "On", &cls, &batch)) return NULL;
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "sample_setup takes a class");
        return NULL;
    }
    Py_ssize_t at[A_N];
    for (int i = 0; i < A_N; i++) {
        PyObject *d = PyObject_GetAttrString(cls, attr_names[i]);
        if (d == NULL) return NULL;
        int slot = Py_IS_TYPE(d, &PyMemberDescr_Type) && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX
                   && !(((PyMemberDescrObject *)d)->d_member->flags & READONLY);
        if (slot) at[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
        if (!slot) {
            PyErr_Format(PyExc_TypeError, "sample_setup: %s.%s is not a slot", ((PyTypeObject *)cls)->tp_name,
                         attr_names[i]);
            return NULL;
        }
    }
    if (sock_base == NULL) { /* without _socket, fds come from fileno() */
        PyObject *mod = PyImport_ImportModule("_socket");
        PyObject *base = mod != NULL ? PyObject_GetAttrString(mod, "socket") : NULL;
        s_fileno = s_fileno != NULL ? s_fileno : PyUnicode_InternFromString("fileno");
        if (base != NULL && PyType_Check(base) && s_fileno != NULL) {
            sock_fileno = _PyType_Lookup((PyTypeObject *)base, s_fileno);
            if (sock_fileno != NULL) {
                Py_INCREF(sock_fileno);
                sock_base = (PyTypeObject *)base;
                base = NULL;
            }
        }
        Py_XDECREF(base);
        Py_XDECREF(mod);
        PyErr_Clear();
    }
    memcpy(slot_at, at, sizeof at);
    slot_lo = slot_hi = at[0];
    for (int i = 0; i < A_LATRAW; i++) {
        slot_lo = at[i] < slot_lo ? at[i] : slot_lo;
        slot_hi = at[i] + (Py_ssize_t)sizeof(PyObject *) > slot_hi ? at[i] + (Py_ssize_t)sizeof(PyObject *) : slot_hi;
    }
    lat_batch = batch < 1 ? 1 : batch;
    Py_INCREF(cls);
    Py_XSETREF(flow_type, (PyTypeObject *)cls);
    Py_RETURN_NONE;
}

#ifdef NETESTO_ZLIB
static PyObject *s_writer, *s_direct_fd, *s_rows, *s_samples, *s_flush_rows; /* names the flush uses */

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
static int flush_one(PyObject *flow, PyObject *b_rec, Py_ssize_t n, Py_ssize_t rec_len, Py_ssize_t *written)
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
#endif

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

/* The flow end's next due instant (due_at) past mono, in steps of due_every (its grid), once a row is in. */
static int advance_due(PyObject *flow, double mono)
{
    PyObject *at = SLOT(flow, A_DUEAT), *every = SLOT(flow, A_DUEEVERY);
    if (at == NULL || every == NULL || !PyFloat_Check(at) || !PyFloat_Check(every)) return 0; /* not gridded */
    double d = PyFloat_AS_DOUBLE(at), e = PyFloat_AS_DOUBLE(every);
    if (!(e > 0.0) || !(d <= mono)) return 0;
    d += e * (floor((mono - d) / e) + 1.0);
    if (d <= mono) d += e; /* rounding */
    PyObject *n = PyFloat_FromDouble(d);
    if (n == NULL) return -1;
    Py_XSETREF(SLOT(flow, A_DUEAT), n);
    return 0;
}

/* One flow end's row (see sample_tick), its counters tx, rx, trans from ctr3 when not NULL (a C loop's, not
 * yet in the flow end), else from its slots. 1: its block is due, 0: not yet, 2: the row must be built
 * in Python (nothing done), -1: an exception is set. A due block is written here (flush_one) when it can be:
 * then 0, or 1 with *written bytes of it out. A row built moves due_at past its stamp (advance_due). */
static int row_one(PyObject *flow, const double stamps[2], const long long *ctr3, Py_ssize_t *written)
{
    PyObject *v[A_N] = {NULL};
    int out = -1;
    *written = 0;
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
    int fd = parts > 0 ? sock_fd(v[A_SOCK]) : -1;
    if (fd == -2) goto done;
    char *row = row_at(v[A_REC], nrows * rec_len, rec_len);
    if (row == NULL) goto done;
    build_row(row, fd, parts, stamps, counters, PyByteArray_AS_STRING(v[A_LAST]), PyByteArray_AS_STRING(v[A_GAPS]));
    if (rr) memcpy(row + base, part, LAT_SIZE);
    PyObject *n = PyLong_FromSsize_t(nrows + 1);
    if (n == NULL) goto done;
    Py_XSETREF(SLOT(flow, A_NROWS), n);
    if (rr && rr_done(flow, v[A_LATRAW], v[A_LATDONE], nlat) < 0) goto done;
    if (advance_due(flow, stamps[1]) < 0) goto done;
    out = nrows + 1 >= flush_at;
#ifdef NETESTO_ZLIB
    if (out == 1) {
        int flushed = flush_one(flow, v[A_REC], nrows + 1, rec_len, written);
        out = flushed < 0 ? -1 : !flushed;
    }
#endif
done:
    for (int i = 0; i < A_N; i++) Py_XDECREF(v[i]);
    return out;
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

#ifdef NETESTO_ZLIB
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
#endif

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
    PyObject *flows = args[0], *due = PyList_New(0), *failed = PyList_New(0), *python = PyList_New(0);
    if (due == NULL || failed == NULL || python == NULL) goto fail;
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
        Py_INCREF(flow); /* fileno() runs code, which could drop it from the list */
        Py_ssize_t written;
        int got = row_one(flow, stamps, NULL, &written);
        PyObject *pair = NULL;
        int bad = 0;
        if (got == 1) {
            pair = Py_BuildValue("(On)", flow, written);
            bad = pair == NULL || PyList_Append(due, pair) < 0;
        } else if (got == 2) {
            bad = PyList_Append(python, flow) < 0;
        } else if (got < 0) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            pair = value != NULL ? PyTuple_Pack(2, flow, value) : NULL;
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
            bad = pair == NULL || PyList_Append(failed, pair) < 0;
        }
        Py_XDECREF(pair);
        Py_DECREF(flow);
        if (bad) goto fail;
    }
    return Py_BuildValue("(NNN)", due, failed, python);
fail:
    Py_XDECREF(due);
    Py_XDECREF(failed);
    Py_XDECREF(python);
    return NULL;
}

/* time.time() and time.monotonic() (from mono_ns) as Python computes them from the clocks' ns */
static void stamps_at(double stamps[2], int64_t mono_ns)
{
    struct timespec w;
    clock_gettime(CLOCK_REALTIME, &w);
    stamps[0] = (double)((int64_t)w.tv_sec * 1000000000 + w.tv_nsec) / 1e9;
    stamps[1] = (double)mono_ns / 1e9;
}

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

/* Thread CPU time (ns): a syscall (CLOCK_THREAD_CPUTIME_ID, ~1.5 us on a KVM guest). */
static int64_t thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#define PROBE_EVERY 8 /* hot rows per one whose thread CPU is read (ACC_PROBED) */
static int64_t probe_ns = -1; /* what two thread_ns() back to back differ by: the reads' own part */


/* One flow end's row now, at its own instant (a hot sample: Sampler.hot, the C loops' idle points): stamps
 * read here, its counters tx, rx, trans from ctr3 (or its slots: NULL). Returns row_one's 0, 1 (*written),
 * 2 or -1. acc (ACC_N int64) counts the row, and for every PROBE_EVERY-th row its thread CPU time (less the
 * two reads' own part, probe_ns) goes into ACC_PROBED (ACC_PROBED_ROWS of them): the Sampler counts every
 * hot row at their mean, and the probes' own reads (ACC_NS, 2 probe_ns each) on top. The clock is a syscall (~1.5 us here): two a row would cost as much as the row;
 * elapsed time (vDSO) would count the time the thread is preempted, 2x the CPU on a CPU shared by two. */
int end_sample(PyObject *flow, const long long *ctr3, int64_t *acc, Py_ssize_t *written)
{
    int probe = acc[ACC_ROWS] % PROBE_EVERY == 0;
    if (probe && probe_ns < 0) {
        int64_t best = INT64_MAX;
        for (int i = 0; i < 16; i++) {
            int64_t a = thread_ns(), b = thread_ns();
            best = b - a < best ? b - a : best;
        }
        probe_ns = best;
    }
    int64_t cpu0 = probe ? thread_ns() : 0;
    *written = 0;
    int out;
    if (flow_type == NULL || !PyObject_TypeCheck(flow, flow_type)) {
        PyErr_SetString(PyExc_TypeError, "a hot sample of an object that is not a flow end");
        out = -1;
    } else {
        double stamps[2];
        stamps_at(stamps, now_ns());
        Py_INCREF(flow);
        out = row_one(flow, stamps, ctr3, written);
        Py_DECREF(flow);
    }
    acc[ACC_ROWS] += 1;
    if (probe) {
        int64_t used = thread_ns() - cpu0 - probe_ns;
        acc[ACC_PROBED] += used > 0 ? used : 0;
        acc[ACC_PROBED_ROWS] += 1;
        acc[ACC_NS] += 2 * probe_ns; /* the probe's own two reads: the sampler's cost too */
    }
    return out;
}

static const struct sample_api sample_api = {SAMPLE_API_VERSION, end_due, end_take_lat, end_sample};

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

static PyMethodDef methods[] = {
    {"sample_row", (PyCFunction)(void (*)(void))sample_row, METH_FASTCALL, sample_row_doc},
    {"sample_tick", (PyCFunction)(void (*)(void))sample_tick, METH_FASTCALL, sample_tick_doc},
    {"sample_setup", sample_setup, METH_VARARGS, sample_setup_doc},
    {"lat_summary", lat_summary_py, METH_O, lat_summary_doc},
    {"sample_end", sample_end_py, METH_VARARGS, sample_end_doc},
#ifdef NETESTO_ZLIB
    {"crc32", crc32_py, METH_VARARGS, crc32_doc},
#endif
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastloop", "The flow engine's loops and sampler rows in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

static const struct int_constant constants[] = {
    {"ROW_HEAD", ROW_HEAD}, {"ROW_INFO", ROW_INFO}, {"ROW_CC_SLOT", ROW_CC_SLOT}, {"ROW_LAT", LAT_SIZE},
    {"TICK_WRITES", TICK_WRITES}, {"ACC_FIELDS", ACC_N}, {"PROBE_EVERY", PROBE_EVERY}, {NULL, 0},
};

PyMODINIT_FUNC PyInit__fastloop(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (add_int_constants(m, constants) < 0 || add_int_constants(m, fastloop_rr_constants) < 0
        || add_int_constants(m, fastloop_hist_constants) < 0 || PyModule_AddFunctions(m, fastloop_rr_methods) < 0
        || PyModule_AddFunctions(m, fastloop_hist_methods) < 0
        || (s_count = PyUnicode_InternFromString("count")) == NULL
        || (s_fold_done = PyUnicode_InternFromString("_fold_done")) == NULL
        || (s_frombytes = PyUnicode_InternFromString("frombytes")) == NULL) {
        Py_DECREF(m);
        return NULL;
    }
    PyObject *api = PyCapsule_New((void *)&sample_api, SAMPLE_API_NAME, NULL);
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
    if ((s_writer = PyUnicode_InternFromString("writer")) == NULL
        || (s_direct_fd = PyUnicode_InternFromString("direct_fd")) == NULL
        || (s_rows = PyUnicode_InternFromString("rows")) == NULL
        || (s_samples = PyUnicode_InternFromString("samples")) == NULL
        || (s_flush_rows = PyUnicode_InternFromString("flush_rows")) == NULL) {
        Py_DECREF(m);
        return NULL;
    }
#endif
    return m;
}
