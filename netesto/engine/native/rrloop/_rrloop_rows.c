/* The sampler's rows of the members of netesto's C loop of many TCP_RR flow ends (module
 * netesto.engine.native._rrloop: the wait loop and the module are in _rrloop.c, what both share in _rrloop.h).
 *
 * The sampler's rows stay out of the transactions' latencies: every row held
 * the transactions in flight of the other members for its time (a row is
 * ~7-10 us of cold code, its block write 25-70 us), and the rows of a grid
 * point came together in one round. So a client whose row is due parks at its
 * idle point (no request out); once no client member is in flight, the parked
 * take their rows in one batch (warm code) and then send. A server cannot stop
 * its peers: its due rows wait for a quiet moment (nothing ready for quiet_ns:
 * its clients parked) and are taken one at a time while nothing is ready.
 * What the rows held the transactions is counted (holds()).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_rrloop.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

NETESTO_HIDDEN const char rr_zeros[CHUNK]; /* what requests and replies carry (send_zeros, for the steps too) */
NETESTO_HIDDEN int64_t held_ns;
NETESTO_HIDDEN uint64_t holds[2][HOLD_N];
NETESTO_HIDDEN int64_t places[P_N][2];

/* A member's row now (its row is due: member_due), its latencies and counters from its slot. What Python
 * must finish (its block to write, the row to build in Python, an error) goes to out as (flow, code,
 * written or exception) and holds the slot's samples (HELD) until then. Its time goes into held_ns. */
NETESTO_HIDDEN void member_row(struct hot *h, PyObject *flow, int64_t *s, int64_t *lat, int where)
{
    int64_t t = now_ns();
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
    t = now_ns() - t;
    held_ns += t;
    places[where][0] += 1;
    places[where][1] += t;
}

/* A member's row now if it is due (see member_row). */
static void member_sample(struct hot *h, uint64_t slot, int64_t *s, int64_t *lat, double at, int where)
{
    PyObject *flow = member_due(h, slot, s, at);
    if (flow != NULL) member_row(h, flow, s, lat, where);
}

/* A member's row now if it is due at at, then the rows it still owes for points up to at (stalled, and
 * behind since a late sweep: no idle point of its own comes to take them), each at its own instant. */
static void member_rows(struct hot *h, uint64_t slot, int64_t *s, int64_t *lat, double at, int where)
{
    PyObject *flow = member_due(h, slot, s, at);
    for (int n = 0; flow != NULL && n <= TICK_BACKLOG; n++) {
        member_row(h, flow, s, lat, where);
        double now = (double)now_ns() / 1e9; /* (owed: for a point already past) */
        flow = member_due(h, slot, s, at < now ? at : now);
    }
}

/* The rows of the servers whose row waits: one = 1, the first one's (a quiet moment: one at a time, the
 * loop looks for ready sockets between two), else those that waited pend_max (the sweep). */
NETESTO_HIDDEN void quiet_rows(struct hot *h, int64_t *table, Py_ssize_t nslots, int one)
{
    int64_t now = now_ns();
    for (Py_ssize_t slot = 0; slot < nslots && h->pending > 0; slot++) {
        int64_t *s = table + slot * F_N;
        if (!s[F_PEND] || (!one && now - s[F_PEND] < h->pend_max)) continue;
        s[F_PEND] = 0;
        h->pending--;
        if (s[F_ROLE] == R_SERVER && s[F_STATUS] == S_RUN) {
            member_sample(h, (uint64_t)slot, s, NULL, (double)now_ns() / 1e9, one ? P_QUIET : P_LATE);
            if (!s[F_HELD] && member_due(h, (uint64_t)slot, s, (double)now_ns() / 1e9) != NULL) {
                s[F_PEND] = now_ns(); /* it owes the row of a point already past: at the next quiet moment */
                h->pending++;
            }
        }
        if (one) return;
    }
}

/* The parked clients' rows (rows 0: none, an exception is set), all of them before any request goes (a
 * request out would be held by the rows after it), and those of the clients still in flight whose row is
 * due (slower than park_max: else they would park again), and those of the servers whose row is due (a
 * quiet moment for this loop's clients), then the parked clients' next requests. 1 when one of them needs
 * Python (its send failed), else 0. */
NETESTO_HIDDEN int unpark(struct hot *h, int64_t *table, Py_ssize_t nslots, int64_t *lat, Py_ssize_t cap, int rows)
{
    int flow = 0;
    for (Py_ssize_t slot = 0; rows && slot < nslots; slot++) { /* (in flight and due: slower than park_max) */
        int64_t *s = table + slot * F_N;
        if (s[F_ROLE] == R_CLIENT && s[F_STATUS] == S_RUN)
            member_sample(h, (uint64_t)slot, s, lat + slot * cap, (double)now_ns() / 1e9, P_PARKED);
    }
    for (Py_ssize_t slot = 0; rows && slot < nslots; slot++) { /* (the servers of this loop's clients) */
        int64_t *s = table + slot * F_N;
        if (s[F_ROLE] != R_SERVER) continue;
        h->pending -= s[F_PEND] != 0;
        s[F_PEND] = 0;
        if (s[F_STATUS] == S_RUN) member_sample(h, (uint64_t)slot, s, NULL, (double)now_ns() / 1e9, P_QUIET);
    }
    /* the requests go in turn from a slot one further each park: the first out is served first in the
     * round after it (in slot order every time, flow 0 of 16 completed ~1.4 % more than flow 15) */
    static size_t turn;
    Py_ssize_t first = nslots > 0 ? (Py_ssize_t)(turn++ % (size_t)nslots) : 0;
    for (Py_ssize_t i = 0; i < nslots && h->parked > 0; i++) {
        Py_ssize_t slot = (first + i) % nslots;
        int64_t *s = table + slot * F_N;
        if (!s[F_PARKED]) continue;
        s[F_PARKED] = 0;
        h->parked--;
        if (s[F_ROLE] != R_CLIENT || s[F_STATUS] != S_RUN) continue;
        client_send(s, now_ns());
        if (s[F_STATUS] != S_RUN) flow = 1;
    }
    if (rows) {
        places[P_PARK][0] += 1;
        places[P_PARK][1] += now_ns() - h->park_t0;
    }
    h->parked = 0;
    return flow;
}

/* The sweep (once no client is parked): every member still due gets its row now (stalled: nothing of it
 * came round; with the rows it owes), but servers waiting for a quiet moment; sweep[0] (at) moves on by
 * sweep[1] (every). */
NETESTO_HIDDEN void sweep_rows(struct hot *h, int64_t *table, Py_ssize_t nslots, int64_t *lat, Py_ssize_t cap,
                               int64_t *touched, double *sweep)
{
    quiet_rows(h, table, nslots, 0);
    for (Py_ssize_t slot = 0; slot < nslots; slot++) {
        int64_t *s = table + slot * F_N;
        if (s[F_ROLE] == R_FREE || s[F_STATUS] != S_RUN || s[F_PEND]) continue; /* (PEND: at a quiet moment) */
        if (s[F_ROLE] == R_CLIENT && h->park_max > 0 && now_ns() - s[F_T0] < h->park_max)
            continue; /* (in flight, not slow: it parks when its reply is in) */
        if (s[F_ROLE] == R_SERVER && h->quiet_ns > 0) { /* a server's row: at a quiet moment too */
            if (member_due(h, (uint64_t)slot, s, sweep[0]) != NULL) {
                s[F_PEND] = now_ns();
                h->pending++;
            }
            continue;
        }
        if (!s[F_DIRTY]) {
            s[F_DIRTY] = 1;
            touched[1 + touched[0]++] = (int64_t)slot;
        }
        member_rows(h, (uint64_t)slot, s, s[F_ROLE] == R_CLIENT ? lat + slot * cap : NULL, sweep[0], P_SWEEP);
    }
    /* the next sweep: the next point (next_point: already past when this one came late, the sweep it owes) */
    sweep[0] = sweep[1] > 0 ? next_point(sweep[0], (double)now_ns() / 1e9, sweep[1]) : 0;
}

/* _fastloop's sample_api (imported once; NULL where it is missing or of another version: no hot samples) */
NETESTO_HIDDEN const struct sample_api *get_api(void)
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

PyDoc_STRVAR(rr_holds_doc,
"holds(reset=False) -> (bucket width ns, (clients' counts, servers' counts), places)\n\n"
"What the sampler's rows held the transactions of this process's C loops of RR\n"
"flow ends: per transaction, the elapsed time of the rows the loop took while\n"
"it was out (a client's: from its request out to its reply whole; a server's:\n"
"an upper bound, from the round before the one that served it): counts[0]\n"
"none, counts[k] (k - 1) to k bucket widths, the last one that and more.\n"
"places: where the rows were taken\n"
"(idle: a member's idle point; parked: the parked clients' batch; quiet: a\n"
"server's, at a quiet moment; late: a server's that waited pend_max for one;\n"
"sweep) as (rows, their elapsed ns), and park: (parks, their ns from the\n"
"first client parked to the requests out). reset: all back to 0.");

static PyObject *rr_holds(PyObject *self, PyObject *args)
{
    int reset = 0;
    if (!PyArg_ParseTuple(args, "|p", &reset)) return NULL;
    PyObject *counts = PyTuple_New(2);
    if (counts == NULL) return NULL;
    for (int r = 0; r < 2; r++) {
        PyObject *role = PyTuple_New(HOLD_N);
        if (role == NULL) {
            Py_DECREF(counts);
            return NULL;
        }
        PyTuple_SET_ITEM(counts, r, role);
        for (int i = 0; i < HOLD_N; i++) {
            PyObject *c = PyLong_FromUnsignedLongLong(holds[r][i]);
            if (c == NULL) {
                Py_DECREF(counts);
                return NULL;
            }
            PyTuple_SET_ITEM(role, i, c);
        }
    }
    PyObject *where = Py_BuildValue("{s(LL)s(LL)s(LL)s(LL)s(LL)s(LL)}", "idle", places[P_IDLE][0], places[P_IDLE][1],
                                    "parked", places[P_PARKED][0], places[P_PARKED][1], "quiet", places[P_QUIET][0],
                                    places[P_QUIET][1], "late", places[P_LATE][0], places[P_LATE][1], "sweep",
                                    places[P_SWEEP][0], places[P_SWEEP][1], "park", places[P_PARK][0],
                                    places[P_PARK][1]);
    if (where == NULL) {
        Py_DECREF(counts);
        return NULL;
    }
    if (reset) {
        memset(holds, 0, sizeof holds);
        memset(places, 0, sizeof places);
    }
    return Py_BuildValue("(iNN)", HOLD_BUCKET_NS, counts, where);
}

NETESTO_HIDDEN PyMethodDef rrloop_rows_methods[] = {
    {.ml_name = "holds", .ml_meth = rr_holds, .ml_flags = METH_VARARGS, .ml_doc = rr_holds_doc}, {0}};
