/* The solo TCP_RR loops of netesto's flow engine in C (see fastloop.py, RRClient._spin, RRServer._spin);
 * part of the _fastloop extension (_fastloop_mod.h).
 *
 * Each function runs blocking transactions on a socket whose SO_RCVTIMEO is
 * set (1 ms) until something needs Python: the loop's next timer is due, no
 * data within the receive timeout (EAGAIN), EOF, a full latency buffer or a
 * partial send. The flow's counters live in a caller-owned int64 state
 * buffer that is written back on every exit, exceptions included, so Python
 * always sees exactly what went over the wire. Payloads are zeros, like the
 * Python loops send. Single-threaded callers: the GIL is kept.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#include "_fastloop_mod.h"
#include "_fastloop_row.h"

#define CHUNK 65536
#define CHECK_EVERY 16 /* transactions (client) or reads (server) between signal checks */
/* reads between the server's deadline checks (the client reads the clock every transaction):
 * at ~17k transactions/s across CPUs, 16 reads let a 1 ms sampling tick slip by up to 0.9 ms */
#define DEADLINE_EVERY 4

enum { ST_AGAIN = 0, ST_EOF = 1, ST_DEADLINE = 2, ST_LATFULL = 3, ST_PARTIAL = 4, ST_IDLE = 5, ST_DUE = 6, ST_ROW = 7 };

/* client state: got, rx, tx, trans, t0 (ns) in; the same out, plus nlat and sent (of a partial request) */
enum { C_GOT, C_RX, C_TX, C_TRANS, C_T0, C_NLAT, C_SENT, C_N };
/* server state: got, rx, tx, trans in/out; pending (bytes of replies still to send) out */
enum { S_GOT, S_RX, S_TX, S_TRANS, S_PENDING, S_N };

/* on cache lines: the kernel's copy of a buffer off a line costs more per byte (see notes/s23/stream.md) */
static const char zeros[CHUNK] __attribute__((aligned(64)));
static char scratch[CHUNK] __attribute__((aligned(64))); /* received payload is discarded */

/* The lone loops' hot row (the flow end's row at its idle point, as Sampler.hot takes it, without a
 * return to Python): the client's nlat latencies into its lat_raw (lat NULL: a server's), then its row
 * with the loop's counters tx, rx, trans (end_sample, into the sampler's acc). 0: done, *due moved to
 * the flow end's next due_at; 1: its block is due for Python (acc[ACC_WRITTEN] bytes of it out); 2:
 * Python builds the row; -1: an exception is set. */
static int lone_row(PyObject *flow, int64_t *acc, const int64_t *lat, Py_ssize_t *nlat, int64_t tx, int64_t rx,
                    int64_t trans, int64_t *due)
{
    if (lat != NULL) {
        if (end_take_lat(flow, lat, *nlat) < 0) return -1;
        *nlat = 0;
    }
    long long ctr3[3] = {tx, rx, trans};
    Py_ssize_t written = 0;
    int code = end_sample(flow, ctr3, acc, &written);
    if (code == 1) acc[ACC_WRITTEN] = written;
    if (code != 0) return code;
    PyObject *at = SLOT(flow, A_DUEAT); /* end_sample found flow a flow end and moved its due_at */
    double d = at != NULL && PyFloat_Check(at) ? PyFloat_AS_DOUBLE(at) : INFINITY;
    *due = deadline_ns(d);
    return 0;
}

/* flow and acc of the lone loops' optional arguments: both given (acc with ACC_N values) or neither.
 * 0, or -1 with an exception set; *have whether acc's view is held. */
static int lone_args(PyObject **flow, PyObject *acc_obj, Py_buffer *av, int *have)
{
    *have = 0;
    if (*flow == Py_None) *flow = NULL;
    if (*flow == NULL) return 0;
    if (acc_obj == NULL || acc_obj == Py_None) {
        PyErr_SetString(PyExc_TypeError, "a flow end needs the sampler's acc");
        return -1;
    }
    if (get_state(acc_obj, av, ACC_N, "acc") < 0) return -1;
    *have = 1;
    return 0;
}

PyDoc_STRVAR(rr_client_doc,
"rr_client(fd, reqlen, replylen, deadline, state, lat[, idle[, due_at[, flow, acc]]]) -> status\n\n"
"Run TCP_RR client transactions on blocking fd (a request is out).\n"
"state: writable int64 buffer [got, rx, tx, trans, t0_ns, nlat, sent];\n"
"lat: writable int64 buffer that receives latencies (ns), nlat of them.\n"
"deadline: time.monotonic() seconds. Returns AGAIN, EOF, DEADLINE, LATFULL\n"
"or PARTIAL (sent bytes of the next request went out; tx not counted yet).\n"
"idle true: the deadline is checked when a reply is in, before the next request:\n"
"IDLE returns with no request out, so the loop's timers (the sampler) run while\n"
"nothing is in flight and no transaction's latency holds them.\n"
"due_at (time.monotonic() seconds, default inf): at a reply in with due_at\n"
"past, DUE returns as IDLE does (no request out): the flow end's row is due\n"
"and taken there (Sampler.hot), hot and with nothing in flight.\n"
"flow (the flow end) and acc (its Sampler's acc): the row is taken here instead\n"
"(the latencies so far into its lat_raw, nlat back to 0) and the loop goes on;\n"
"ROW returns (no request out) when the row left work to Python: sent holds 1\n"
"(its block to write, acc[2] bytes out) or 2 (the row to build); a row that\n"
"raised leaves sent -1.");

static PyObject *rr_client(PyObject *self, PyObject *args)
{
    int fd;
    Py_ssize_t reqlen, replylen;
    double deadline;
    PyObject *state_obj, *lat_obj;
    int idle = 0;
    double due_at = INFINITY;
    PyObject *flow = NULL, *acc_obj = NULL;
    Py_buffer sv, lv, av;
    int have_acc;
    if (!PyArg_ParseTuple(args, "inndOO|pdOO", &fd, &reqlen, &replylen, &deadline, &state_obj, &lat_obj, &idle,
                          &due_at, &flow, &acc_obj))
        return NULL;
    if (reqlen < 1 || reqlen > CHUNK || replylen < 1) {
        PyErr_SetString(PyExc_ValueError, "reqlen must be 1..65536 and replylen >= 1");
        return NULL;
    }
    if (lone_args(&flow, acc_obj, &av, &have_acc) < 0) return NULL;
    if (get_state(state_obj, &sv, C_N, "state") < 0) {
        if (have_acc) PyBuffer_Release(&av);
        return NULL;
    }
    if (PyObject_GetBuffer(lat_obj, &lv, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&sv);
        if (have_acc) PyBuffer_Release(&av);
        return NULL;
    }
    int64_t *acc = have_acc ? av.buf : NULL;
    int64_t *st = sv.buf;
    int64_t *lat = lv.buf;
    Py_ssize_t cap = lv.len / (Py_ssize_t)sizeof(int64_t);
    int64_t got = st[C_GOT], rx = st[C_RX], tx = st[C_TX], trans = st[C_TRANS], t0 = st[C_T0];
    int64_t until = deadline_ns(deadline), due = deadline_ns(due_at);
    Py_ssize_t nlat = 0;
    int64_t sent = 0;
    int status = -1; /* -1: an exception is set */

    if (cap < 1) {
        PyErr_SetString(PyExc_ValueError, "the latency buffer is empty");
        goto out;
    }
    for (;;) {
        while (got < replylen) {
            int64_t want = replylen - got;
            ssize_t n = recv(fd, scratch, want < CHUNK ? (size_t)want : CHUNK, 0);
            if (n > 0) {
                rx += n;
                got += n;
            } else if (n == 0) {
                status = ST_EOF;
                goto out;
            } else if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto out; /* e.g. SIGTERM's handler raised */
            } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
                status = ST_AGAIN; /* nothing within SO_RCVTIMEO: the loop waits */
                goto out;
            } else {
                PyErr_SetFromErrno(PyExc_OSError);
                goto out;
            }
        }
        int64_t now = now_ns();
        lat[nlat++] = now - t0;
        trans++;
        got -= replylen;
        if (idle && now >= until) {
            status = ST_IDLE;
            goto out;
        }
        if (now >= due) {
            if (flow == NULL) {
                status = ST_DUE;
                goto out;
            }
            int code = lone_row(flow, acc, lat, &nlat, tx, rx, trans, &due); /* nothing in flight */
            if (code != 0) {
                sent = code;
                status = code < 0 ? -1 : ST_ROW;
                goto out;
            }
            now = now_ns();
        }
        t0 = now;
        for (;;) {
            ssize_t n = send(fd, zeros, (size_t)reqlen, MSG_NOSIGNAL);
            if (n == reqlen) break;
            if (n < 0 && errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto out;
                continue;
            }
            if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                PyErr_SetFromErrno(PyExc_OSError);
                goto out;
            }
            sent = n < 0 ? 0 : n; /* Python sends the rest and counts the request */
            status = ST_PARTIAL;
            goto out;
        }
        tx += reqlen;
        if (nlat == cap) {
            status = ST_LATFULL;
            goto out;
        }
        if (now >= until) {
            status = ST_DEADLINE;
            goto out;
        }
        if (trans % CHECK_EVERY == 0 && PyErr_CheckSignals() < 0) goto out;
    }
out:
    st[C_GOT] = got;
    st[C_RX] = rx;
    st[C_TX] = tx;
    st[C_TRANS] = trans;
    st[C_T0] = t0;
    st[C_NLAT] = nlat;
    st[C_SENT] = sent;
    PyBuffer_Release(&lv);
    PyBuffer_Release(&sv);
    if (have_acc) PyBuffer_Release(&av);
    return status < 0 ? NULL : PyLong_FromLong(status);
}

PyDoc_STRVAR(rr_server_doc,
"rr_server(fd, reqlen, replylen, deadline, state[, due_at[, flow, acc[, wake_fd, wake_every]]]) -> status\n\n"
"Answer every reqlen bytes with replylen zero bytes on blocking fd.\n"
"state: writable int64 buffer [got, rx, tx, trans, pending].\n"
"Returns AGAIN, EOF, DEADLINE or PARTIAL (pending bytes of replies not sent;\n"
"their transactions are counted), or DUE right after a reply went out once\n"
"due_at (time.monotonic() seconds, default inf) is past: the flow end's row is\n"
"due and taken there (Sampler.hot), hot, before the next request is in.\n"
"flow (the flow end) and acc (its Sampler's acc): the row is taken here instead\n"
"and the loop goes on; ROW returns when the row left work to Python: pending\n"
"holds 1 (its block to write, acc[2] bytes out) or 2 (the row to build); a row\n"
"that raised leaves pending -1.\n"
"wake_fd (e.g. the loop's epoll fd, fd not in it) is polled every wake_every\n"
"seconds: readable (a new connection, a message for Python), DEADLINE returns.");

static PyObject *rr_server(PyObject *self, PyObject *args)
{
    int fd;
    Py_ssize_t reqlen, replylen;
    double deadline;
    PyObject *state_obj;
    double due_at = INFINITY;
    PyObject *flow = NULL, *acc_obj = NULL;
    Py_buffer sv, av;
    int have_acc, wake_fd = -1;
    double wake_every = 0.0;
    if (!PyArg_ParseTuple(args, "inndO|dOOid", &fd, &reqlen, &replylen, &deadline, &state_obj, &due_at, &flow,
                          &acc_obj, &wake_fd, &wake_every))
        return NULL;
    if (reqlen < 1 || replylen < 1 || replylen > CHUNK) {
        PyErr_SetString(PyExc_ValueError, "reqlen must be >= 1 and replylen 1..65536");
        return NULL;
    }
    if (lone_args(&flow, acc_obj, &av, &have_acc) < 0) return NULL;
    if (get_state(state_obj, &sv, S_N, "state") < 0) {
        if (have_acc) PyBuffer_Release(&av);
        return NULL;
    }
    int64_t *acc = have_acc ? av.buf : NULL;
    int64_t *st = sv.buf;
    int64_t got = st[S_GOT], rx = st[S_RX], tx = st[S_TX], trans = st[S_TRANS];
    int64_t until = deadline_ns(deadline), due = deadline_ns(due_at);
    int64_t wake_ns = wake_every > 0 ? (int64_t)(wake_every * 1e9) : 0;
    int64_t wake_at = wake_fd >= 0 && wake_ns > 0 ? now_ns() + wake_ns : INT64_MAX;
    int64_t pending = 0;
    unsigned reads = 0;
    int status = -1;

    for (;;) {
        ssize_t n = recv(fd, scratch, CHUNK, 0);
        if (n == 0) {
            status = ST_EOF;
            goto out;
        }
        if (n < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto out;
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                status = ST_AGAIN;
                goto out;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            goto out;
        }
        rx += n;
        got += n;
        if (got >= reqlen) {
            int64_t count = got / reqlen;
            got -= count * reqlen;
            trans += count;
            int64_t left = count * replylen;
            while (left > 0) {
                /* SO_SNDTIMEO bounds a blocked send: a partial count or EAGAIN, never a hang */
                size_t size = left < CHUNK ? (size_t)left : CHUNK;
                ssize_t m = send(fd, zeros, size, MSG_NOSIGNAL);
                if (m < 0 && errno == EINTR) {
                    if (PyErr_CheckSignals() < 0) {
                        pending = left;
                        goto out;
                    }
                    continue;
                }
                if (m < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                    pending = left;
                    PyErr_SetFromErrno(PyExc_OSError);
                    goto out;
                }
                if (m > 0) {
                    tx += m;
                    left -= m;
                }
                if (m == (ssize_t)size) continue;
                pending = left; /* the rare case: Python sends the rest (blocking, as before) */
                status = ST_PARTIAL;
                goto out;
            }
            if (due != INT64_MAX && now_ns() >= due) {
                if (flow == NULL) {
                    status = ST_DUE;
                    goto out;
                }
                int code = lone_row(flow, acc, NULL, NULL, tx, rx, trans, &due); /* its replies are out */
                if (code != 0) {
                    pending = code;
                    status = code < 0 ? -1 : ST_ROW;
                    goto out;
                }
            }
        }
        if (++reads % DEADLINE_EVERY == 0) {
            int64_t now = now_ns();
            if (now >= until) {
                status = ST_DEADLINE;
                goto out;
            }
            if (now >= wake_at) { /* one poll an interval: does Python have something else to do? */
                struct pollfd pfd = {wake_fd, POLLIN, 0};
                if (poll(&pfd, 1, 0) > 0) {
                    status = ST_DEADLINE;
                    goto out;
                }
                wake_at = now + wake_ns;
            }
            if (reads % CHECK_EVERY == 0 && PyErr_CheckSignals() < 0) goto out;
        }
    }
out:
    st[S_GOT] = got;
    st[S_RX] = rx;
    st[S_TX] = tx;
    st[S_TRANS] = trans;
    st[S_PENDING] = pending;
    PyBuffer_Release(&sv);
    if (have_acc) PyBuffer_Release(&av);
    return status < 0 ? NULL : PyLong_FromLong(status);
}

PyMethodDef fastloop_rr_methods[] = {
    {"rr_client", rr_client, METH_VARARGS, rr_client_doc},
    {"rr_server", rr_server, METH_VARARGS, rr_server_doc},
    {NULL, NULL, 0, NULL},
};

const struct int_constant fastloop_rr_constants[] = {
    {"AGAIN", ST_AGAIN}, {"EOF", ST_EOF}, {"DEADLINE", ST_DEADLINE}, {"LATFULL", ST_LATFULL}, {"PARTIAL", ST_PARTIAL},
    {"IDLE", ST_IDLE}, {"DUE", ST_DUE}, {"ROW", ST_ROW}, {"CLIENT_STATE", C_N}, {"SERVER_STATE", S_N}, {NULL, 0},
};
