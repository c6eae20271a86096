/* The server side of the TCP_CRR loops in C (module netesto.engine.native._crrloop; the client loop and the module
 * are in _crrloop.c, what both share in _crrloop.h).
 *
 * crr_accept accepts the connections waiting on a listener and serves the
 * CRR joins whose session is known and whose request came with them
 * (nearly all on a short path): the reply is sent and the connection closed
 * in C. Anything else (a hello, a join still short of its request, an
 * unknown session, a reply that does not fit) goes back to Python with the
 * bytes read from it. crr_take takes the counters other workers added to an
 * entry of the workers' shared CRR table.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_crrloop.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#define JOIN_SIZE 16   /* b"NTCJ" version(2) 0(2) session(8): handshake.JOIN */
#define ACCEPT_BATCH 64
#define SMALL_REPLY 4096 /* replies up to this are served in C: a fresh connection takes them whole */

/* an entry of the workers' shared CRR table (balance.LoadBoard): written by the flow's owner ... */
enum { T_SESSION, T_REQ, T_REPLY, T_CLOSE_FIRST, T_RX, T_TX, T_TRANS, T_CONNS, T_N };
/* ... and its counters T_RX.. added to by any worker, atomically */
#define ADD(counter, n) __atomic_fetch_add(&(counter), (n), __ATOMIC_RELAXED)

static const char zeros[CHUNK]; /* what replies carry */
NETESTO_HIDDEN char crr_scratch[CHUNK]; /* received payload is discarded (both files) */

PyDoc_STRVAR(crr_accept_doc,
"crr_accept(listen_fd, magic, sessions[, deadline[, table]]) -> list of (fd, bytes)\n\n"
"Accept what waits on the non-blocking listener (at most 64); with a deadline (time.monotonic()\n"
"seconds) the listener is blocking, its SO_RCVTIMEO set: accept and serve until the deadline, the\n"
"receive timeout without a connection, or a connection for Python. A connection that\n"
"brought a whole join (magic: its first 8 bytes) of a session in sessions and the\n"
"request is served here: sessions maps the 8-byte session to (state, reqlen, replylen,\n"
"close_first), state a writable int64 buffer [rx, tx, trans, conns] of the flow; the\n"
"reply goes out and the connection is closed (close_first) when all of it fits.\n"
"table: the workers' shared CRR table (LoadBoard.table), for joins of other workers' sessions.\n"
"Every other connection is returned, non-blocking, with the bytes read from it\n"
"(b'' for none; its counters untouched) for Python's handshake path.");

/* The reply of a join; the connection closed (cut when the reply did not fit). Returns bytes sent. */
static int64_t reply_close(int fd, Py_ssize_t replylen)
{
    ssize_t w;
    do {
        w = send(fd, zeros, (size_t)replylen, MSG_NOSIGNAL);
    } while (w < 0 && errno == EINTR);
    /* A fresh connection takes a small reply whole; if it did not (or the client is gone), the
     * connection is cut: the client sees it fail, never a short reply counted as whole. */
    if (w != replylen) {
        struct linger lin = {1, 0};
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lin, sizeof lin);
    }
    close(fd);
    return w > 0 ? w : 0;
}

/* A join of another worker's flow, served with the counters of its entry in the shared table. */
static int serve_shared(int fd, const char *buf, ssize_t n, Py_buffer *table)
{
    int64_t session;
    memcpy(&session, buf + 8, 8);
    int64_t *t = table->buf;
    Py_ssize_t entries = table->len / (Py_ssize_t)(T_N * sizeof(int64_t));
    for (Py_ssize_t k = 0; k < entries; k++, t += T_N) {
        if (__atomic_load_n(&t[T_SESSION], __ATOMIC_ACQUIRE) != session) continue;
        int64_t reply = t[T_REPLY];
        if (n - JOIN_SIZE < t[T_REQ] || reply > SMALL_REPLY || !t[T_CLOSE_FIRST]) return 0;
        /* Every count is in before the reply leaves: the client may end the flow, and the owner
         * take the counts, as soon as it has the reply. A reply cut short is taken back after. */
        ADD(t[T_CONNS], 1);
        ADD(t[T_RX], n - JOIN_SIZE);
        ADD(t[T_TRANS], 1);
        ADD(t[T_TX], reply);
        int64_t sent = reply_close(fd, (Py_ssize_t)reply);
        if (sent != reply) ADD(t[T_TX], sent - reply);
        return 1;
    }
    return 0;
}

/* The session a crr_accept call served last, so the joins after it of the same session (all of them, for a flow
 * alone in its worker) skip the dict lookup, the entry's parse and the state's buffer request: the buffer is
 * held until the call ends (its array cannot be resized meanwhile) and dropped when a signal check may have run
 * Python. */
struct join_cache {
    char session[8];
    int held;
    Py_buffer sv;
    Py_ssize_t reqlen, replylen;
};

static void cache_drop(struct join_cache *c)
{
    if (c->held) {
        PyBuffer_Release(&c->sv);
        c->held = 0;
    }
}

/* A known session's join: counted as JoinConn counts (the connection, the request, the transaction, then what
 * was sent) and served. 0 when it is not for C (its request short, its reply large or kept open). */
static int serve_known(int fd, ssize_t n, struct join_cache *c)
{
    if (n - JOIN_SIZE < c->reqlen) return 0;
    int64_t *st = c->sv.buf;
    st[S_CONNS] += 1;
    st[S_RX] += n - JOIN_SIZE;
    st[S_TRANS] += 1;
    st[S_TX] += reply_close(fd, c->replylen);
    return 1;
}

/* Serve one join in C; 1 served (fd closed), 0 not for C (nothing counted). */
static int serve_join(int fd, const char *buf, ssize_t n, const char *magic, PyObject *sessions, Py_buffer *table,
                      struct join_cache *cache)
{
    if (n < JOIN_SIZE || memcmp(buf, magic, 8) != 0) return 0;
    if (cache->held && memcmp(buf + 8, cache->session, 8) == 0) return serve_known(fd, n, cache);
    PyObject *key = PyBytes_FromStringAndSize(buf + 8, 8);
    if (key == NULL) {
        PyErr_Clear();
        return 0;
    }
    PyObject *entry = PyDict_GetItemWithError(sessions, key); /* borrowed */
    Py_DECREF(key);
    if (entry == NULL && !PyErr_Occurred() && table != NULL) return serve_shared(fd, buf, n, table);
    PyObject *state_obj;
    Py_ssize_t reqlen, replylen;
    int close_first;
    if (entry == NULL || !PyArg_ParseTuple(entry, "Onnp", &state_obj, &reqlen, &replylen, &close_first)) {
        PyErr_Clear();
        return 0;
    }
    if (replylen > SMALL_REPLY || !close_first) return 0;
    cache_drop(cache);
    if (get_state(state_obj, &cache->sv, S_N, "state") < 0) {
        PyErr_Clear();
        return 0;
    }
    cache->held = 1;
    memcpy(cache->session, buf + 8, 8);
    cache->reqlen = reqlen;
    cache->replylen = replylen;
    return serve_known(fd, n, cache);
}

static PyObject *crr_accept(PyObject *self, PyObject *args)
{
    int lfd;
    const char *magic;
    Py_ssize_t magiclen;
    PyObject *sessions;
    double deadline = -1.0;
    PyObject *table_obj = Py_None;
    Py_buffer table;
    if (!PyArg_ParseTuple(args, "iy#O!|dO", &lfd, &magic, &magiclen, &PyDict_Type, &sessions, &deadline,
                          &table_obj))
        return NULL;
    if (table_obj != Py_None && PyObject_GetBuffer(table_obj, &table, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    Py_buffer *tp = table_obj != Py_None ? &table : NULL;
    int solo = deadline >= 0;
    int64_t until = solo ? deadline_ns(deadline) : 0;
    unsigned served = 0;
    struct join_cache cache = {.held = 0};
    PyObject *rest = NULL;
    if (magiclen != 8) {
        PyErr_SetString(PyExc_ValueError, "magic must be the join's first 8 bytes");
        goto done;
    }
    rest = PyList_New(0);
    if (rest == NULL) goto done;
    for (int i = 0; solo || i < ACCEPT_BATCH; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR) {
                cache_drop(&cache); /* (a handler may change the sessions) */
                if (PyErr_CheckSignals() < 0) goto stopped;
                continue;
            }
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EMFILE || errno == ENFILE
                || errno == ENOBUFS || errno == ENOMEM || errno == ECONNABORTED)
                break;
            PyErr_SetFromErrno(PyExc_OSError);
            goto error;
        }
        ssize_t n;
        do {
            n = recv(fd, crr_scratch, 4096, 0);
        } while (n < 0 && errno == EINTR);
        if (n > 0 && serve_join(fd, crr_scratch, n, magic, sessions, tp, &cache)) {
            if (solo && ++served % CHECK_EVERY == 0) {
                cache_drop(&cache); /* (a handler may change the sessions) */
                if (PyErr_CheckSignals() < 0) goto stopped;
            }
            if (solo && now_ns() >= until) break;
            continue;
        }
        PyObject *item = Py_BuildValue("(iy#)", fd, crr_scratch, (Py_ssize_t)(n > 0 ? n : 0));
        if (item == NULL || PyList_Append(rest, item) < 0) {
            Py_XDECREF(item);
            close(fd);
            goto error;
        }
        Py_DECREF(item);
        if (solo) break; /* Python's turn: a hello, or a join it serves */
    }
    goto done;
stopped:
    /* A handler raised (a stop): that is never swallowed below. The connections accepted
       for Python are closed here, as the stop would close them. */
    {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        for (Py_ssize_t k = 0; k < PyList_GET_SIZE(rest); k++)
            close((int)PyLong_AsLong(PyTuple_GET_ITEM(PyList_GET_ITEM(rest, k), 0)));
        PyErr_Restore(type, value, tb);
    }
    Py_CLEAR(rest);
    goto done;
error:
    /* the connections not handed to Python yet are closed by their sockets' owners: hand them over */
    if (PyList_GET_SIZE(rest) == 0) {
        Py_CLEAR(rest);
    } else {
        PyErr_Clear();
    }
done:
    cache_drop(&cache);
    if (tp != NULL) PyBuffer_Release(tp);
    return rest;
}

PyDoc_STRVAR(crr_take_doc,
"crr_take(table, entry) -> (rx, tx, trans, conns)\n\n"
"Take the counters other workers added to a CRR table entry (each left at 0, atomically).");

static PyObject *crr_take(PyObject *self, PyObject *args)
{
    PyObject *table_obj;
    Py_ssize_t k;
    Py_buffer table;
    if (!PyArg_ParseTuple(args, "On", &table_obj, &k)) return NULL;
    if (PyObject_GetBuffer(table_obj, &table, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (k < 0 || (k + 1) * (Py_ssize_t)(T_N * sizeof(int64_t)) > table.len) {
        PyBuffer_Release(&table);
        PyErr_SetString(PyExc_IndexError, "no such CRR table entry");
        return NULL;
    }
    int64_t *t = (int64_t *)table.buf + k * T_N;
    long long got[4];
    for (int i = 0; i < 4; i++) got[i] = __atomic_exchange_n(&t[T_RX + i], 0, __ATOMIC_RELAXED);
    PyBuffer_Release(&table);
    return Py_BuildValue("(LLLL)", got[0], got[1], got[2], got[3]);
}

NETESTO_HIDDEN PyMethodDef crrloop_accept_methods[] = {
    {"crr_accept", crr_accept, METH_VARARGS, crr_accept_doc},
    {"crr_take", crr_take, METH_VARARGS, crr_take_doc},
    {NULL, NULL, 0, NULL},
};
