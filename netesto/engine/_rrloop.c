/* Many TCP_RR flow ends on one worker in C: an epoll loop over their sockets (see rrgroup.py).
 *
 * One call serves every ready socket of the group's epoll, one step each per
 * round (a client: one read of its reply, then its next request once the
 * reply is whole; a server: one read, then the replies to the whole requests
 * in it), round after round, until something needs Python: the loop's next
 * timer is due, the Python loop's own epoll fd (registered in the group's
 * epoll) is readable, a flow end hit EOF, an error or a partial send, or a
 * latency buffer is full. Ready sockets are served in turn (epoll's ready
 * list is a queue: a level-triggered socket still ready goes back to its
 * tail), so no flow is served in a burst while others wait.
 *
 * The flows' counters live in a caller-owned int64 table, F_N values a slot,
 * updated in place after every syscall, so the caller sees exactly what went
 * over the wire on every exit, exceptions included. Client latencies (ns) go
 * to a caller-owned int64 buffer, cap values a slot. Payloads are zeros, as
 * the Python loops send. Single-threaded callers: the GIL is kept.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_loops.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#define CHUNK 65536
#define MAX_EVENTS 64
#define CHECK_EVERY 64 /* steps between signal checks */
#define PY_SLOT UINT64_MAX /* epoll data of the Python loop's epoll fd */

/* a slot: fd, role, request and reply sizes, then the flow's state (in and out) */
enum {
    F_FD, F_ROLE, F_REQ, F_REPLY, F_GOT, F_RX, F_TX, F_TRANS, F_T0, F_NLAT, F_STATUS, F_ERRNO, F_LEFT, F_DIRTY,
    F_HELD, F_N
};
enum { R_FREE = 0, R_CLIENT = 1, R_SERVER = 2 };
/* a slot's status: running, or why Python must take the flow end back */
enum { S_RUN = 0, S_EOF = 1, S_PARTIAL = 2, S_ERROR = 3 };
/* why the call returned */
enum { W_DEADLINE = 0, W_PYTHON = 1, W_FLOW = 2, W_LATFULL = 3 };

static const char zeros[CHUNK];  /* what requests and replies carry */
static char scratch[CHUNK];       /* where received payload goes, to be discarded */

/* Send n zero bytes (non-blocking). 0: all went, 1: a partial send (s[F_LEFT] = what is left), -1: an error. */
static int send_zeros(int64_t *s, int64_t n)
{
    while (n > 0) {
        size_t size = n < CHUNK ? (size_t)n : CHUNK;
        ssize_t m = send((int)s[F_FD], zeros, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (m < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) m = 0;
            else {
                s[F_ERRNO] = errno;
                s[F_LEFT] = n;
                return -1;
            }
        }
        s[F_TX] += m;
        n -= m;
        if (m < (ssize_t)size) {
            s[F_LEFT] = n;
            return n > 0 ? 1 : 0;
        }
    }
    return 0;
}

/* The members' rows at their idle points (see rr_wait): _fastloop's sample_api, the members by slot, the
 * sampler's acc and the list of what Python must finish; api NULL: no hot samples (the sweep takes them). */
struct hot {
    const struct sample_api *api;
    PyObject *flows;
    int64_t *acc;
    PyObject *out;
};

/* A member's row now if it is due (at an idle point: nothing of its own in flight), its latencies and
 * counters from its slot. What Python must finish (its block to write, the row to build in Python, an
 * error) goes to out as (flow, code, written or exception) and holds the slot's samples (HELD) until then. */
static void member_sample(struct hot *h, uint64_t slot, int64_t *s, int64_t *lat, double at)
{
    if (h->api == NULL || s[F_HELD] || slot >= (uint64_t)PyList_GET_SIZE(h->flows)) return;
    PyObject *flow = PyList_GET_ITEM(h->flows, (Py_ssize_t)slot);
    if (flow == Py_None || !h->api->due(flow, at)) return;
    Py_INCREF(flow);
    long long ctr3[3] = {s[F_TX], s[F_RX], s[F_TRANS]};
    Py_ssize_t written = 0;
    int got = h->api->take_lat(flow, lat, (Py_ssize_t)s[F_NLAT]);
    if (got == 0) {
        s[F_NLAT] = 0;
        got = h->api->sample(flow, ctr3, h->acc, &written);
    }
    if (got != 0) {
        s[F_HELD] = 1;
        PyObject *what = NULL;
        if (got < 0) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyErr_NormalizeException(&type, &value, &tb);
            what = value;
            Py_XDECREF(type);
            Py_XDECREF(tb);
        } else {
            what = PyLong_FromSsize_t(written);
        }
        PyObject *item = what != NULL ? Py_BuildValue("(OiO)", flow, got, what) : NULL;
        if (item == NULL || PyList_Append(h->out, item) < 0) PyErr_Clear();
        Py_XDECREF(item);
        Py_XDECREF(what);
    }
    Py_DECREF(flow);
}

/* One step of a client: one read; the next request once the reply is whole. 1 when a latency went in. */
static int client_step(int64_t *s, int64_t *lat, Py_ssize_t cap, struct hot *h, uint64_t slot)
{
    int64_t want = s[F_REPLY] - s[F_GOT];
    ssize_t n = recv((int)s[F_FD], scratch, want < CHUNK ? (size_t)want : CHUNK, MSG_DONTWAIT);
    if (n == 0) {
        s[F_STATUS] = S_EOF;
        return 0;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            s[F_ERRNO] = errno;
            s[F_STATUS] = S_ERROR;
        }
        return 0;
    }
    s[F_RX] += n;
    s[F_GOT] += n;
    if (s[F_GOT] < s[F_REPLY]) return 0;
    int64_t now = now_ns();
    if (s[F_NLAT] < cap) lat[s[F_NLAT]++] = now - s[F_T0];
    s[F_TRANS] += 1;
    s[F_GOT] -= s[F_REPLY];
    if (h->api != NULL) { /* its reply is whole, its next request not out: its row if due */
        member_sample(h, slot, s, lat, (double)now / 1e9);
        now = now_ns();
    }
    s[F_T0] = now;
    int r = send_zeros(s, s[F_REQ]);
    if (r != 0) s[F_STATUS] = r > 0 ? S_PARTIAL : S_ERROR;
    return 1;
}

/* One step of a server: one read; the replies to the whole requests in it. */
static void server_step(int64_t *s, struct hot *h, uint64_t slot)
{
    ssize_t n = recv((int)s[F_FD], scratch, CHUNK, MSG_DONTWAIT);
    if (n == 0) {
        s[F_STATUS] = S_EOF;
        return;
    }
    if (n < 0) {
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            s[F_ERRNO] = errno;
            s[F_STATUS] = S_ERROR;
        }
        return;
    }
    s[F_RX] += n;
    s[F_GOT] += n;
    if (s[F_GOT] < s[F_REQ]) return;
    int64_t count = s[F_GOT] / s[F_REQ];
    s[F_GOT] -= count * s[F_REQ];
    s[F_TRANS] += count;
    int r = send_zeros(s, count * s[F_REPLY]);
    if (r != 0) s[F_STATUS] = r > 0 ? S_PARTIAL : S_ERROR;
    else if (h->api != NULL) member_sample(h, slot, s, NULL, (double)now_ns() / 1e9); /* its replies are out: its row if due */
}

/* Writable views of n buffers (all or none: -1 with an exception set). */
static int get_buffers(PyObject *const *objs, Py_buffer *views, int n)
{
    for (int i = 0; i < n; i++) {
        if (PyObject_GetBuffer(objs[i], &views[i], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            while (i-- > 0) PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    return 0;
}

static void release_buffers(Py_buffer *views, int n)
{
    for (int i = 0; i < n; i++) PyBuffer_Release(&views[i]);
}

/* _fastloop's sample_api (imported once; NULL where it is missing or of another version: no hot samples) */
static const struct sample_api *get_api(void)
{
    static const struct sample_api *api;
    static int tried;
    if (!tried) {
        tried = 1;
        const struct sample_api *got = PyCapsule_Import(SAMPLE_API_NAME, 0);
        if (got == NULL) PyErr_Clear();
        else if (got->version == SAMPLE_API_VERSION) api = got;
    }
    return api;
}

PyDoc_STRVAR(rr_ctl_doc,
"ctl(epfd, op, fd, slot)\n\n"
"epoll_ctl(epfd, op, fd) for EPOLLIN with the slot as the event's data\n"
"(slot -1: the Python loop's epoll fd). op: CTL_ADD or CTL_DEL.");

static PyObject *rr_ctl(PyObject *self, PyObject *args)
{
    int epfd, op, fd;
    long long slot;
    if (!PyArg_ParseTuple(args, "iiiL", &epfd, &op, &fd, &slot)) return NULL;
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = slot < 0 ? PY_SLOT : (uint64_t)slot;
    if (epoll_ctl(epfd, op, fd, &ev) < 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(rr_wait_doc,
"wait(epfd, deadline, table, lat, cap, touched[, flows, acc, out[, sweep]]) -> why\n\n"
"Serve the group's ready sockets in turn until DEADLINE (time.monotonic()\n"
"seconds; inf: none), PYTHON (the loop's epoll fd is readable), FLOW (a\n"
"slot's status is not RUN: EOF, ERROR with its errno, or PARTIAL with\n"
"LEFT bytes unsent) or LATFULL (a client slot holds cap latencies).\n"
"table: writable int64 buffer, FIELDS values a slot; lat: writable int64\n"
"buffer, cap values a slot, NLAT of them filled. touched: writable int64\n"
"buffer [n, slot...] to which the slots served are added (DIRTY set), so\n"
"the caller copies out only theirs (and clears DIRTY and n).\n"
"flows (a list: the flow end of each slot, or None), acc (writable int64\n"
"buffer of _fastloop.ACC_FIELDS values) and out (a list): a member whose row is due\n"
"(_fastloop.SAMPLE_API) gets it at its idle point (a client once its reply is\n"
"whole, before its next request; a server once its replies are out), with\n"
"the slot's counters and latencies (NLAT back to 0); the row and its cost\n"
"row go into acc. What Python must finish goes to out as (flow end, code,\n"
"written bytes or the exception) and sets the slot's HELD, which stops its\n"
"samples until the caller clears it. sweep (writable array('d') [at, every]):\n"
"the sampler's sweep of the members' interval, handed to this loop: at it,\n"
"every member whose row is still due (due_at <= at) gets it then, whatever\n"
"it has in flight, and at moves on by every (at <= 0: none).");

static PyObject *rr_wait(PyObject *self, PyObject *args)
{
    int epfd;
    double deadline;
    PyObject *objs[4] = {NULL, NULL, NULL, NULL}; /* table, lat, touched[, acc] */
    PyObject *flows = NULL, *out = NULL, *sweep_obj = NULL;
    Py_ssize_t cap;
    Py_buffer views[4], sv = {0};
    double *sweep = NULL; /* [at, every]: the members' sweep, when handed to this loop */
    if (!PyArg_ParseTuple(args, "idOOnO|OOOO", &epfd, &deadline, &objs[0], &objs[1], &cap, &objs[2], &flows, &objs[3],
                          &out, &sweep_obj))
        return NULL;
    struct hot h = {NULL, NULL, NULL, NULL};
    int nviews = 3;
    if (flows != NULL && flows != Py_None) {
        if (!PyList_Check(flows) || objs[3] == NULL || out == NULL || !PyList_Check(out)) {
            PyErr_SetString(PyExc_TypeError, "flows and out must be lists, with acc");
            return NULL;
        }
        h.api = get_api();
        h.flows = flows;
        h.out = out;
        nviews = h.api != NULL ? 4 : 3;
    }
    if (cap < 1) {
        PyErr_SetString(PyExc_ValueError, "cap must be >= 1");
        return NULL;
    }
    if (get_buffers(objs, views, nviews) < 0) return NULL;
    int64_t *table = views[0].buf, *lat = views[1].buf, *touched = views[2].buf;
    if (nviews == 4) {
        if (views[3].len < ACC_N * (Py_ssize_t)sizeof(int64_t)) {
            PyErr_SetString(PyExc_ValueError, "acc needs room for _fastloop.ACC_FIELDS int64 values");
            release_buffers(views, nviews);
            return NULL;
        }
        h.acc = views[3].buf;
    }
    Py_ssize_t nslots = views[0].len / (Py_ssize_t)(F_N * sizeof(int64_t));
    int why = -1; /* -1: an exception is set */
    if (views[1].len < nslots * cap * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "lat needs cap values for every slot of the table");
        goto out;
    }
    if (views[2].len < (nslots + 1) * (Py_ssize_t)sizeof(int64_t) || touched[0] < 0 || touched[0] > nslots) {
        PyErr_SetString(PyExc_ValueError, "touched needs a count (0..slots) and room for every slot");
        goto out;
    }
    /* a loop with no timer gives inf */
    int64_t until = deadline < 9.0e9 ? (int64_t)(deadline * 1e9) : INT64_MAX;
    if (h.api != NULL && nviews == 4 && sweep_obj != NULL && sweep_obj != Py_None) {
        if (PyObject_GetBuffer(sweep_obj, &sv, PyBUF_WRITABLE | PyBUF_FORMAT) < 0) goto out;
        if (sv.len < 2 * (Py_ssize_t)sizeof(double) || sv.itemsize != sizeof(double) || strcmp(sv.format, "d") != 0) {
            PyErr_SetString(PyExc_ValueError, "sweep must be an array('d') [at, every]");
            goto out;
        }
        sweep = sv.buf;
    }
    unsigned steps = 0;
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        /* A deadline already past still gets one round of what is ready (timeout 0), as the Python
         * loop runs the ready handlers between two due timers (the sampler's fill chunks are such) */
        int64_t now = now_ns();
        int timeout = -1, past = until != INT64_MAX && now >= until;
        int64_t wake = sweep != NULL && sweep[0] > 0 && deadline_ns(sweep[0]) < until ? deadline_ns(sweep[0]) : until;
        if (wake != INT64_MAX) {
            int64_t ms = wake > now ? (wake - now + 999999) / 1000000 : 0; /* rounded up, as epoll.poll */
            timeout = ms > 1000000 ? 1000000 : (int)ms;
        }
        int n = epoll_wait(epfd, events, MAX_EVENTS, timeout);
        if (n < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto out;
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            goto out;
        }
        int python = 0, flow = 0, full = 0;
        for (int i = 0; i < n; i++) {
            uint64_t slot = events[i].data.u64;
            if (slot == PY_SLOT) {
                python = 1;
                continue;
            }
            if (slot >= (uint64_t)nslots) continue;
            int64_t *s = table + slot * F_N;
            if (s[F_ROLE] == R_FREE || s[F_STATUS] != S_RUN) continue;
            if (!s[F_DIRTY]) {
                s[F_DIRTY] = 1;
                touched[1 + touched[0]++] = (int64_t)slot;
            }
            if (s[F_ROLE] == R_CLIENT) {
                if (client_step(s, lat + slot * cap, cap, &h, slot) && s[F_NLAT] >= cap) full = 1;
            } else {
                server_step(s, &h, slot);
            }
            if (s[F_STATUS] != S_RUN) flow = 1;
        }
        if (flow) {
            why = W_FLOW;
            break;
        }
        if (full) {
            why = W_LATFULL;
            break;
        }
        if (python) {
            why = W_PYTHON;
            break;
        }
        if (sweep != NULL && sweep[0] > 0 && now_ns() >= deadline_ns(sweep[0])) {
            /* the sweep: every member still due gets its row now (stalled: nothing of it came round) */
            for (Py_ssize_t slot = 0; slot < nslots; slot++) {
                int64_t *s = table + slot * F_N;
                if (s[F_ROLE] == R_FREE || s[F_STATUS] != S_RUN) continue;
                if (!s[F_DIRTY]) {
                    s[F_DIRTY] = 1;
                    touched[1 + touched[0]++] = (int64_t)slot;
                }
                member_sample(&h, (uint64_t)slot, s, s[F_ROLE] == R_CLIENT ? lat + slot * cap : NULL, sweep[0]);
            }
            double at = sweep[0] + sweep[1], mono = (double)now_ns() / 1e9;
            if (sweep[1] > 0 && at <= mono) at += sweep[1] * (floor((mono - at) / sweep[1]) + 1); /* behind: skip */
            sweep[0] = sweep[1] > 0 ? at : 0;
        }
        if (past || (until != INT64_MAX && now_ns() >= until)) {
            why = W_DEADLINE;
            break;
        }
        steps += (unsigned)n;
        if (steps >= CHECK_EVERY) {
            steps = 0;
            if (PyErr_CheckSignals() < 0) goto out; /* e.g. SIGTERM's handler raised */
        }
    }
out:
    if (sv.obj != NULL) PyBuffer_Release(&sv);
    release_buffers(views, nviews);
    return why < 0 ? NULL : PyLong_FromLong(why);
}

PyDoc_STRVAR(rr_hot_doc,
"hot() -> bool\n\n"
"Whether wait() takes the members' rows itself (_fastloop's SAMPLE_API found).");

static PyObject *rr_hot(PyObject *self, PyObject *args)
{
    return PyBool_FromLong(get_api() != NULL);
}

#define RR_METHOD(name, fn) {.ml_name = name, .ml_meth = fn, .ml_flags = METH_VARARGS, .ml_doc = fn##_doc}
static PyMethodDef rrloop_methods[] = {RR_METHOD("ctl", rr_ctl), RR_METHOD("wait", rr_wait), RR_METHOD("hot", rr_hot),
                                       {0}};

static struct PyModuleDef rrloop_module = {
    .m_base = PyModuleDef_HEAD_INIT,
    .m_name = "_rrloop",
    .m_doc = "Many TCP_RR flow ends of one worker in one C epoll loop.",
    .m_size = -1,
    .m_methods = rrloop_methods,
};

/* the table's layout, the roles, statuses and reasons, as module constants */
static const struct int_constant consts[] = {
    {"FIELDS", F_N}, {"FD", F_FD}, {"ROLE", F_ROLE}, {"REQ", F_REQ}, {"REPLY", F_REPLY}, {"GOT", F_GOT},
    {"RX", F_RX}, {"TX", F_TX}, {"TRANS", F_TRANS}, {"T0", F_T0}, {"NLAT", F_NLAT}, {"STATUS", F_STATUS},
    {"ERRNO", F_ERRNO}, {"LEFT", F_LEFT}, {"DIRTY", F_DIRTY}, {"HELD", F_HELD}, {"FREE", R_FREE}, {"CLIENT", R_CLIENT},
    {"SERVER", R_SERVER},
    {"RUN", S_RUN}, {"EOF", S_EOF}, {"PARTIAL", S_PARTIAL}, {"ERROR", S_ERROR}, {"DEADLINE", W_DEADLINE},
    {"PYTHON", W_PYTHON}, {"FLOW", W_FLOW}, {"LATFULL", W_LATFULL}, {"MAX_MESSAGE", CHUNK},
    {"CTL_ADD", EPOLL_CTL_ADD}, {"CTL_DEL", EPOLL_CTL_DEL}, {NULL, 0},
};

PyMODINIT_FUNC PyInit__rrloop(void)
{
    PyObject *m = PyModule_Create(&rrloop_module);
    if (m == NULL) return NULL;
    if (add_int_constants(m, consts) < 0) Py_CLEAR(m);
    return m;
}
