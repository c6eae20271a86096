/* Many TCP_RR flow ends on one worker in C: an epoll loop over their sockets (see rrgroup.py), and the
 * module netesto.engine.native._rrloop. A member's step (its read, its request or replies) is in
 * _rrloop_steps.c, the members' sampler rows (parked clients, servers' quiet moments, the sweep,
 * holds()) in _rrloop_rows.c, what the files share in _rrloop.h.
 *
 * One call serves every ready socket of the group's epoll, one step each per
 * round (a client: one read of its reply, then its next request once the
 * reply is whole; a server: one read, then the replies to the whole requests
 * in it), round after round, until something needs Python: the loop's next
 * timer is due, the Python loop's own epoll fd (registered in the group's
 * epoll) is readable, a flow end hit EOF, an error or a partial send, or a
 * latency buffer is full. Ready sockets are served in turn, in the order
 * their data came: the members' sockets are edge-triggered, so a socket
 * joins the tail of epoll's ready list when data comes to it. (Level-triggered,
 * a socket served in one round stays linked in the ready list until the next
 * wait rechecks it, and data coming meanwhile keeps that early place: the
 * flow served first after a park was served again in every round, ahead of
 * the flows whose data came before its own, and flow 0 of 16 completed ~15 %
 * more transactions than flow 15.) A socket that may hold more after its
 * one read (MORE: the read filled the buffer) is served again in the next
 * round, before that round's events, without waiting for new data.
 *
 * The flows' counters live in a caller-owned int64 table, F_N values a slot,
 * updated in place after every syscall, so the caller sees exactly what went
 * over the wire on every exit, exceptions included. Client latencies (ns) go
 * to a caller-owned int64 buffer, cap values a slot. Payloads are zeros, as
 * the Python loops send. Single-threaded callers: the GIL is kept.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_rrloop.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <time.h>

#define MAX_EVENTS 64
#define CHECK_EVERY 64 /* steps between signal checks */
#define PY_SLOT UINT64_MAX /* epoll data of the Python loop's epoll fd */

/* The slot into the next round's more[] (*at) if its socket may hold more: 1, else 0 (its MORE cleared). */
static inline int requeue(int64_t *s, Py_ssize_t *at, Py_ssize_t slot)
{
    if (s[F_MORE] && s[F_ROLE] != R_FREE && s[F_STATUS] == S_RUN) {
        *at = slot;
        return 1;
    }
    s[F_MORE] = 0;
    return 0;
}

/* Whether the parked clients may take their rows: no client member of the group has a transaction in
 * flight whose row is due (one not due, e.g. HELD, goes on: it would never come to a stop), or they waited
 * park_max (a slow or stalled one: its row is taken with its transaction in flight). */
static int park_done(struct hot *h, int64_t *table, Py_ssize_t nslots, int64_t now)
{
    double mono = (double)now / 1e9;
    if (now - h->park_t0 >= h->park_max) return 1;
    for (Py_ssize_t slot = 0; slot < nslots; slot++) {
        int64_t *s = table + slot * F_N;
        if (s[F_ROLE] == R_CLIENT && s[F_STATUS] == S_RUN && !s[F_PARKED] && member_due(h, (uint64_t)slot, s, mono))
            return 0;
    }
    return 1;
}


PyDoc_STRVAR(rr_ctl_doc,
"ctl(epfd, op, fd, slot[, edge=True])\n\n"
"epoll_ctl(epfd, op, fd) for EPOLLIN, edge-triggered (edge false: level-\n"
"triggered, for benches' A/B), with the slot as the event's data (slot -1:\n"
"the Python loop's epoll fd, level-triggered). op: CTL_ADD or CTL_DEL.");

static PyObject *rr_ctl(PyObject *self, PyObject *args)
{
    int epfd, op, fd, edge = 1;
    long long slot;
    if (!PyArg_ParseTuple(args, "iiiL|p", &epfd, &op, &fd, &slot, &edge)) return NULL;
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u64 = slot < 0 ? PY_SLOT : (uint64_t)slot;
    if (slot >= 0 && edge) ev.events |= EPOLLET | EPOLLRDHUP; /* (see the top of this file, and M_HUP) */
    if (epoll_ctl(epfd, op, fd, &ev) < 0) return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(rr_wait_doc,
"wait(epfd, deadline, table, lat, cap, touched[, flows, acc, out[, sweep[, park_max, quiet_ns, pend_max]]]) -> why\n\n"
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
"it has in flight, and at moves on by every (at <= 0: none).\n"
"park_max (ns, > 0): a client whose row is due parks at its idle point\n"
"instead (PARKED: no request out) until no client member whose row is due\n"
"has a transaction in flight, or for park_max at most; then the parked take\n"
"their rows, all of them before their requests go (no client transaction\n"
"waits for a row). Parked clients go on before every return.\n"
"quiet_ns (> 0): a server whose row is due at its idle point waits (PEND)\n"
"for a quiet moment: quiet_ns with no socket ready (its clients parked);\n"
"then the waiting rows are taken one at a time while nothing is ready.\n"
"One that waited pend_max (ns) takes it at its next idle point; the sweep\n"
"leaves servers to a quiet moment (a stalled one's comes at once).");

static PyObject *rr_wait(PyObject *self, PyObject *args)
{
    int epfd;
    double deadline;
    PyObject *objs[4] = {NULL, NULL, NULL, NULL}; /* table, lat, touched[, acc] */
    PyObject *flows = NULL, *out = NULL, *sweep_obj = NULL;
    Py_ssize_t cap;
    Py_buffer views[4], sv = {0};
    double *sweep = NULL; /* [at, every]: the members' sweep, when handed to this loop */
    long long park_max = 0, quiet_ns = 0, pend_max = 0;
    if (!PyArg_ParseTuple(args, "idOOnO|OOOOLLL", &epfd, &deadline, &objs[0], &objs[1], &cap, &objs[2], &flows,
                          &objs[3], &out, &sweep_obj, &park_max, &quiet_ns, &pend_max))
        return NULL;
    struct hot h = {0};
    int nviews = 3;
    if (flows != NULL && flows != Py_None) {
        if (!PyList_Check(flows) || objs[3] == NULL || out == NULL || !PyList_Check(out)) {
            PyErr_SetString(PyExc_TypeError, "flows and out must be lists, with acc");
            return NULL;
        }
        h.api = get_api();
        h.park_max = park_max;
        h.quiet_ns = quiet_ns;
        h.pend_max = pend_max;
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
    Py_ssize_t *more = NULL, nmore = 0; /* the slots whose socket may hold more, for the next round */
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
    /* the slots still MORE from an earlier call go to the first round */
    more = PyMem_Malloc((size_t)(nslots > 0 ? nslots : 1) * sizeof(Py_ssize_t));
    if (more == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t slot = 0; slot < nslots; slot++) { /* and servers whose row waits since an earlier call */
        int64_t *s = table + slot * F_N;
        if (s[F_PEND] && (s[F_ROLE] != R_SERVER || h.api == NULL)) s[F_PEND] = 0;
        h.pending += s[F_PEND] != 0;
        nmore += requeue(s, more + nmore, slot);
    }
    unsigned steps = 0;
    int still = 0; /* a quiet moment goes on (see quiet_rows) */
    int64_t round1 = held_ns; /* held_ns when this round began */
    h.round0 = held_ns;
    struct epoll_event events[MAX_EVENTS];
    for (;;) {
        /* A deadline already past still gets one round of what is ready (timeout 0), as the Python
         * loop runs the ready handlers between two due timers (the sampler's fill chunks are such) */
        int64_t now = now_ns();
        int timeout = -1, past = until != INT64_MAX && now >= until;
        int64_t wake = sweep != NULL && sweep[0] > 0 && deadline_ns(sweep[0]) < until ? deadline_ns(sweep[0]) : until;
        if (h.parked > 0) /* (the sweep waits for the park's end) */
            wake = h.park_t0 + h.park_max < until ? h.park_t0 + h.park_max : until;
        if (wake != INT64_MAX) {
            int64_t ms = wake > now ? (wake - now + 999999) / 1000000 : 0; /* rounded up, as epoll.poll */
            timeout = ms > 1000000 ? 1000000 : (int)ms;
        }
        if (nmore > 0) timeout = 0; /* (a socket may hold more: ready already) */
        /* a server's row waits: a wait of quiet_ns with nothing ready is the quiet moment it waits for */
        int quiet = nmore == 0 && h.pending > 0 && h.quiet_ns > 0 && (wake == INT64_MAX || wake - now > h.quiet_ns);
        int n;
        if (quiet) { /* (quiet already: the next row if nothing came during the last) */
            long wait = still ? 0 : (long)(h.quiet_ns < 999999999 ? h.quiet_ns : 999999999);
            struct timespec ts = {.tv_sec = 0, .tv_nsec = wait};
            n = epoll_pwait2(epfd, events, MAX_EVENTS, &ts, NULL);
            if (n < 0 && errno == ENOSYS) /* (no epoll_pwait2: any moment with nothing ready) */
                n = epoll_wait(epfd, events, MAX_EVENTS, 0);
            still = n == 0;
            if (still) quiet_rows(&h, table, nslots, 1);
        } else {
            n = epoll_wait(epfd, events, MAX_EVENTS, timeout);
        }
        if (n < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) goto out;
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            goto out;
        }
        int python = 0, got = 0;
        h.round0 = round1;
        round1 = held_ns;
        /* first the sockets that may hold more (ready before these events came), then the events; a slot
         * MORE again goes to the next round (more[] is rewritten from its start, behind the reading) */
        Py_ssize_t m = nmore;
        nmore = 0;
        for (Py_ssize_t j = 0; j < m; j++) {
            Py_ssize_t slot = more[j];
            got |= serve(table, (uint64_t)slot, lat, cap, touched, &h);
            nmore += requeue(table + slot * F_N, more + nmore, slot);
        }
        for (int i = 0; i < n; i++) {
            uint64_t slot = events[i].data.u64;
            if (slot == PY_SLOT) {
                python = 1;
                continue;
            }
            if (slot >= (uint64_t)nslots) continue;
            int64_t *s = table + slot * F_N;
            int queued = s[F_MORE] != 0; /* (served above; in more[] for the next round) */
            if (events[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) s[F_MORE] |= M_HUP;
            if (queued) continue;
            got |= serve(table, slot, lat, cap, touched, &h);
            nmore += requeue(s, more + nmore, (Py_ssize_t)slot);
        }
        int flow = (got >> W_FLOW) & 1, full = (got >> W_LATFULL) & 1;
        if (h.parked > 0 && !flow && !full && !python && park_done(&h, table, nslots, now_ns()))
            flow = unpark(&h, table, nslots, lat, cap, 1); /* nothing due in flight: the parked clients' rows */
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
        if (sweep != NULL && sweep[0] > 0 && h.parked == 0 && now_ns() >= deadline_ns(sweep[0]))
            sweep_rows(&h, table, nslots, lat, cap, touched, sweep); /* the sweep, once no client is parked */
        if (past || (until != INT64_MAX && now_ns() >= until)) {
            why = W_DEADLINE;
            break;
        }
        steps += (unsigned)n + (unsigned)m;
        if (steps >= CHECK_EVERY) {
            steps = 0;
            if (PyErr_CheckSignals() < 0) goto out; /* e.g. SIGTERM's handler raised */
        }
    }
out:
    if (h.parked > 0 && unpark(&h, table, nslots, lat, cap, why >= 0) && why >= 0)
        why = W_FLOW; /* (a parked client's request could not go: Python takes it over) */
    PyMem_Free(more); /* (the slots still MORE are in the table, for the next call) */
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
                                       {0}}; /* and holds (_rrloop_rows.c) */

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
    {"ERRNO", F_ERRNO}, {"LEFT", F_LEFT}, {"DIRTY", F_DIRTY}, {"HELD", F_HELD}, {"H0", F_H0}, {"PARKED", F_PARKED}, {"PEND", F_PEND}, {"MORE", F_MORE}, {"FREE", R_FREE}, {"CLIENT", R_CLIENT},
    {"SERVER", R_SERVER}, {"TICK_BACKLOG", TICK_BACKLOG}, {"BACKLOG_MS", BACKLOG_MS},
    {"RUN", S_RUN}, {"EOF", S_EOF}, {"PARTIAL", S_PARTIAL}, {"ERROR", S_ERROR}, {"DEADLINE", W_DEADLINE},
    {"PYTHON", W_PYTHON}, {"FLOW", W_FLOW}, {"LATFULL", W_LATFULL}, {"MAX_MESSAGE", CHUNK},
    {"CTL_ADD", EPOLL_CTL_ADD}, {"CTL_DEL", EPOLL_CTL_DEL}, {NULL, 0},
};

PyMODINIT_FUNC PyInit__rrloop(void)
{
    PyObject *m = PyModule_Create(&rrloop_module);
    if (m == NULL) return NULL;
    if (add_int_constants(m, consts) < 0 || PyModule_AddFunctions(m, rrloop_rows_methods) < 0) Py_CLEAR(m);
    return m;
}
