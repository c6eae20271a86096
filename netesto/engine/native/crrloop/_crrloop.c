/* The TCP_CRR client loop of netesto's flow engine in C, and the module netesto.engine.native._crrloop (see
 * crrfast.py, CRRClient._run_c). The server side (crr_accept, crr_take: ServerWorker._on_accept) is in
 * _crrloop_accept.c, what both share in _crrloop.h.
 *
 * crr_client runs whole transactions of a CRR flow alone in its worker:
 * socket, (options), connect, send the join and the request, poll, recv the
 * reply (and the server's EOF when the server closes first), close, stamp
 * the latency after the close. It stops when the loop's next timer is due,
 * between two transactions: one under way then goes on for up to `grace`
 * more (as an RR flow's blocking recv waits up to 1 ms for its reply), its
 * tcp_info read before its close for the sample (what Python's read_info
 * keeps); one not done by then is left open, so Python can finish it on its
 * event loop (the twin of this loop, CRRClient._on_conn).
 * The flow's counters live in a caller-owned int64 state buffer written back
 * on every exit, exceptions included, so Python always sees exactly what
 * went over the wire. Single-threaded callers: the GIL is kept.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_crrloop.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_MAX_PACING_RATE
#define SO_MAX_PACING_RATE 47
#endif
#ifndef TCP_CC_INFO
#define TCP_CC_INFO 26
#endif
#define CC_SLOT 24 /* a cc info's slot in the flow's last-known buffer (records.CC_SLOT) */

/* what crr_client returns */
enum { ST_IDLE = 0, ST_OPEN = 1, ST_LATFULL = 2, ST_CONNFAIL = 3 };
/* crr_client's options */
enum { F_RESET = 1, F_WAIT_EOF = 2, F_NODELAY = 4 };
/* client state: counters in/out; the open connection out (fd -1: none) */
enum { C_RX, C_TX, C_TRANS, C_CONNS, C_FD, C_GOT, C_SENT, C_T0, C_CONNECTED, C_NLAT, C_ERRNO, C_N };

/* Wait for events on fd until `until` (ns): 1 ready, 0 the deadline came, -1 an exception is set. */
static int wait_for(int fd, short events, int64_t until)
{
    for (;;) {
        int64_t left = until - now_ns();
        if (left <= 0) return 0;
        int ms = left > 1000000000 ? 1000 : (int)((left + 999999) / 1000000);
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, ms);
        if (n > 0) return 1;
        if (n < 0) {
            if (errno != EINTR) {
                PyErr_SetFromErrno(PyExc_OSError);
                return -1;
            }
            if (PyErr_CheckSignals() < 0) return -1;
        }
    }
}

/* The connection's tcp_info (and with parts 2 its cc info) into the flow's last known values, `known`:
 * info_len bytes, then CC_SLOT; left as they were where a read fails (records.sample_row_py's rules). */
static void read_known(int fd, int parts, char *known, socklen_t info_len)
{
    if (parts > 0 && tcp_opt_padded(fd, TCP_INFO, known, info_len, info_len) && parts == 2)
        tcp_opt_padded(fd, TCP_CC_INFO, known + info_len, CC_SLOT, CC_SLOT);
}

static int client_socket(int family, int flags, const char *ca, Py_ssize_t calen, int buffer, long long pacing)
{
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    struct linger lin = {1, 0};
    uint64_t rate = (uint64_t)pacing / 8;
    if ((calen > 0 && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, ca, (socklen_t)calen) < 0)
        || (buffer > 0 && (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer) < 0
                           || setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer) < 0))
        || (pacing > 0 && setsockopt(fd, SOL_SOCKET, SO_MAX_PACING_RATE, &rate, sizeof rate) < 0)
        || ((flags & F_NODELAY) && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) < 0)
        || ((flags & F_RESET) && setsockopt(fd, SOL_SOCKET, SO_LINGER, &lin, sizeof lin) < 0)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    return fd;
}

static int make_addr(const char *host, int port, int family, unsigned scope, struct sockaddr_storage *ss,
                     socklen_t *len)
{
    memset(ss, 0, sizeof *ss);
    if (family == AF_INET) {
        struct sockaddr_in *a = (struct sockaddr_in *)ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        *len = sizeof *a;
        return inet_pton(AF_INET, host, &a->sin_addr) == 1 ? 0 : -1;
    }
    if (family == AF_INET6) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        a->sin6_scope_id = scope;
        *len = sizeof *a;
        return inet_pton(AF_INET6, host, &a->sin6_addr) == 1 ? 0 : -1;
    }
    return -1;
}

PyDoc_STRVAR(crr_client_doc,
"crr_client(host, port, family, scope, first, reqlen, replylen, flags, ca, buffer, pacing, deadline,\n"
"           state, lat, known, parts, info_len, grace) -> status\n\n"
"Run TCP_CRR client transactions until deadline (time.monotonic() seconds); one under way then may take\n"
"grace seconds more, its tcp_info (parts 1; parts 2: and its cc info) read into known (writable: info_len\n"
"bytes, then 24 for the cc info) before its close.\n"
"Each next connection's socket (with the flow's options) is made while the one before waits for its\n"
"reply, and closed unused when the call returns.\n"
"first: the join and the request (its last reqlen bytes count as tx); flags: RESET (SO_LINGER 0),\n"
"WAIT_EOF (read to the server's close), NODELAY; ca (bytes, b'': none), buffer, pacing (bits/s): as\n"
"the flow's options. state: writable int64 buffer [rx, tx, trans, conns, fd, got, sent, t0_ns,\n"
"connected, nlat, errno], fd -1 on entry. lat: writable int64 buffer for latencies (ns), nlat of them.\n"
"Returns IDLE (deadline, no connection open), OPEN (deadline and grace, connection fd open: sent bytes of\n"
"first out, got bytes of the reply in; its transaction not counted), LATFULL, or CONNFAIL (errno: connect\n"
"failed, the socket closed). An error on a connection closes it and raises OSError.");

static PyObject *crr_client(PyObject *self, PyObject *args)
{
    const char *host, *first, *ca;
    Py_ssize_t firstlen, calen, reqlen, replylen;
    int port, family, flags, buffer;
    unsigned int scope;
    long long pacing;
    double deadline, grace_s;
    int parts, info_len;
    PyObject *state_obj, *lat_obj;
    Py_buffer sv, lv, kv;
    if (!PyArg_ParseTuple(args, "siiIy#nniy#iLdOOw*iid", &host, &port, &family, &scope, &first, &firstlen, &reqlen,
                          &replylen, &flags, &ca, &calen, &buffer, &pacing, &deadline, &state_obj, &lat_obj, &kv,
                          &parts, &info_len, &grace_s))
        return NULL;
    if (reqlen < 1 || reqlen > firstlen || replylen < 1 || parts < 0 || parts > 2 || info_len < 1
        || info_len > 512 || kv.len < (Py_ssize_t)info_len + (parts == 2 ? CC_SLOT : 0) || !(grace_s >= 0.0)
        || grace_s > 1.0) {
        PyBuffer_Release(&kv);
        PyErr_SetString(PyExc_ValueError, "reqlen must be 1..len(first), replylen >= 1, parts 0..2, info_len "
                        "1..512 with known holding it (and 24 bytes more for parts 2), grace 0..1 s");
        return NULL;
    }
    struct sockaddr_storage addr;
    socklen_t addrlen;
    if (make_addr(host, port, family, scope, &addr, &addrlen) < 0) {
        PyBuffer_Release(&kv);
        PyErr_Format(PyExc_ValueError, "not a numeric address of family %d: %s", family, host);
        return NULL;
    }
    if (get_state(state_obj, &sv, C_N, "state") < 0) {
        PyBuffer_Release(&kv);
        return NULL;
    }
    if (PyObject_GetBuffer(lat_obj, &lv, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&sv);
        PyBuffer_Release(&kv);
        return NULL;
    }
    int64_t *st = sv.buf;
    int64_t *lat = lv.buf;
    Py_ssize_t cap = lv.len / (Py_ssize_t)sizeof(int64_t);
    int64_t rx = st[C_RX], tx = st[C_TX], trans = st[C_TRANS], conns = st[C_CONNS];
    int64_t until = deadline_ns(deadline);
    int64_t grace = (int64_t)(grace_s * 1e9); /* how far a transaction under way may run past until */
    int64_t late = until > INT64_MAX - grace ? INT64_MAX : until + grace; /* (until: INT64_MAX with no timer) */
    int64_t got = 0, sent = 0, t0 = 0, connected = 0, err = 0;
    Py_ssize_t nlat = 0;
    int fd = -1;
    int spare = -1; /* the next connection's socket, made while this one waits for its reply */
    int status = -1; /* -1: an exception is set */

    if (cap < 1 || st[C_FD] >= 0) {
        PyErr_SetString(PyExc_ValueError, "an empty latency buffer or a connection open on entry");
        goto out;
    }
    t0 = now_ns();
    for (;;) {
        if (t0 >= until) {
            status = ST_IDLE;
            goto out;
        }
        got = sent = connected = 0;
        fd = spare >= 0 ? spare : client_socket(family, flags, ca, calen, buffer, pacing);
        spare = -1;
        if (fd < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto out;
        }
        if (connect(fd, (struct sockaddr *)&addr, addrlen) < 0 && errno != EINPROGRESS) {
            err = errno;
            close(fd);
            fd = -1;
            status = ST_CONNFAIL;
            goto out;
        }
        /* the join and the request; a connection still in SYN_SENT says when it is up */
        while (sent < firstlen) {
            ssize_t n = send(fd, first + sent, (size_t)(firstlen - sent), MSG_NOSIGNAL);
            if (n >= 0) {
                if (!connected) {
                    connected = 1;
                    conns++;
                }
                sent += n;
                continue;
            }
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto out;
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) goto fail;
            int ready = wait_for(fd, POLLOUT, late);
            if (ready < 0) goto out;
            if (ready == 0) {
                status = ST_OPEN;
                goto out;
            }
        }
        tx += reqlen;
        /* the next connection's socket and options while the server works on this one (nothing is sent yet:
         * off the transaction's critical path; one that fails is made again, and its error raised, above) */
        if (spare < 0)
            spare = client_socket(family, flags, ca, calen, buffer, pacing);
        /* the reply, and with WAIT_EOF the server's close after it; it cannot be in yet: wait first */
        int ready = wait_for(fd, POLLIN, late);
        if (ready < 0) goto out;
        if (ready == 0) {
            status = ST_OPEN;
            goto out;
        }
        for (;;) {
            int64_t want = replylen - got;
            if (want <= 0 && !(flags & F_WAIT_EOF)) break;
            size_t size = want > 0 && want < CHUNK ? (size_t)want : CHUNK;
            ssize_t n = recv(fd, crr_scratch, size, 0);
            if (n > 0) {
                rx += n;
                got += n;
                continue;
            }
            if (n == 0) {
                if (want > 0) {
                    errno = ECONNRESET;
                    goto fail;
                }
                break;
            }
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto out;
                continue;
            }
            if (errno != EAGAIN && errno != EWOULDBLOCK) goto fail;
            ready = wait_for(fd, POLLIN, late);
            if (ready < 0) goto out;
            if (ready == 0) {
                status = ST_OPEN;
                goto out;
            }
        }
        if (now_ns() >= until) /* the sample's tick is due: it keeps this connection's tcp_info */
            read_known(fd, parts, kv.buf, (socklen_t)info_len);
        close(fd);
        fd = -1;
        int64_t now = now_ns(); /* a transaction is connect + request + reply + close */
        lat[nlat++] = now - t0;
        t0 = now; /* the next one starts here */
        trans++;
        if (nlat == cap) {
            status = ST_LATFULL;
            goto out;
        }
        if (trans % CHECK_EVERY == 0 && PyErr_CheckSignals() < 0) goto out;
    }
fail:
    PyErr_SetFromErrno(PyExc_OSError);
    close(fd);
    fd = -1;
out:
    if (spare >= 0) close(spare);
    if (status == -1 && !PyErr_Occurred()) PyErr_SetString(PyExc_SystemError, "crr_client lost its error");
    st[C_RX] = rx;
    st[C_TX] = tx;
    st[C_TRANS] = trans;
    st[C_CONNS] = conns;
    st[C_FD] = fd;
    st[C_GOT] = got;
    st[C_SENT] = sent;
    st[C_T0] = t0;
    st[C_CONNECTED] = connected;
    st[C_NLAT] = nlat;
    st[C_ERRNO] = err;
    PyBuffer_Release(&lv);
    PyBuffer_Release(&sv);
    PyBuffer_Release(&kv);
    return status < 0 ? NULL : PyLong_FromLong(status);
}

static PyMethodDef methods[] = {
    {"crr_client", crr_client, METH_VARARGS, crr_client_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_crrloop", "The TCP_CRR loops of the flow engine in C.", -1, methods,
    NULL, NULL, NULL, NULL,
};

static const struct int_constant constants[] = {
    {"IDLE", ST_IDLE}, {"OPEN", ST_OPEN}, {"LATFULL", ST_LATFULL}, {"CONNFAIL", ST_CONNFAIL},
    {"RESET", F_RESET}, {"WAIT_EOF", F_WAIT_EOF}, {"NODELAY", F_NODELAY},
    {"CLIENT_STATE", C_N}, {"SERVER_STATE", S_N}, {NULL, 0},
};

PyMODINIT_FUNC PyInit__crrloop(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (add_int_constants(m, constants) < 0 || PyModule_AddFunctions(m, crrloop_accept_methods) < 0))
        Py_CLEAR(m);
    return m;
}
