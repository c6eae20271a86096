/* A sampler row in C (netesto's _fastloop extension, see fastloop.py): build_row puts a flow end's row,
 * sample_row is its Python face (FlowEnd.sample), sample_setup finds the flow ends' slots the tick reads.
 * The tick is in _fastloop_tick.c, its block writes in _fastloop_block.c, the hot rows of the C loops in
 * _fastloop_hot.c, the module in _fastloop.c; what they share in _fastloop_row.h.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_fastloop_row.h"
#include <structmember.h> /* T_OBJECT_EX: how __slots__ members are typed */

#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "_fastloop_mod.h"

#define SOCKOPT_TCP_INFO 11
#define SOCKOPT_TCP_CC_INFO 26

/* Read one socket option into dst (size bytes, zero-filled past what the kernel gave);
 * on failure copy the last known value instead. Returns 1 when read. */
static int read_opt(int fd, int opt, char *dst, socklen_t want, socklen_t size, char *last)
{
    if (tcp_opt_padded(fd, opt, dst, want, size)) {
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
NETESTO_HIDDEN long fl_build_row(char *row, int fd, long parts, const double stamps[2], const long long counters[6],
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
NETESTO_HIDDEN int fl_sock_fd(PyObject *sock)
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
    int fd = parts > 0 ? fl_sock_fd(args[2]) : -1;
    if (fd == -2) return NULL;
    char *row = row_at(rec, at, row_size(parts));
    if (row == NULL) return NULL;
    return PyLong_FromLong(fl_build_row(row, fd, parts, stamps, counters, PyByteArray_AS_STRING(last),
                                        PyByteArray_AS_STRING(gaps)));
}

NETESTO_HIDDEN const char *const attr_names[A_N] = {"sock", "rec_parts", "tx", "rx", "trans", "conns", "udp_lost",
                                                    "udp_reord", "last_tcp", "gaps", "b_rec", "nrows", "rec_len",
                                                    "flush_at", "lat_raw", "lat_done", "ihist", "lat_pending", "due_at",
                                                    "due_every"};
NETESTO_HIDDEN PyTypeObject *flow_type;
NETESTO_HIDDEN Py_ssize_t slot_at[A_N];
NETESTO_HIDDEN Py_ssize_t slot_lo, slot_hi;
NETESTO_HIDDEN Py_ssize_t lat_batch;

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

NETESTO_HIDDEN PyMethodDef fastloop_row_methods[] = {
    {"sample_row", (PyCFunction)(void (*)(void))sample_row, METH_FASTCALL, sample_row_doc},
    {"sample_setup", sample_setup, METH_VARARGS, sample_setup_doc},
    {NULL, NULL, 0, NULL},
};
