/* What the C files of netesto's _rrloop extension share: _rrloop.c (the wait loop over the group's
 * sockets, the module), _rrloop_steps.c (a member's step: its clients' and servers' reads, requests and
 * replies) and _rrloop_rows.c (the members' sampler rows: at their idle points, the parked clients', the
 * servers' quiet moments, the sweep, and holds()). The calls go one way: _rrloop.c into the other two,
 * _rrloop_steps.c into _rrloop_rows.c. The small helpers the steps call on every transaction are static
 * inline here. */
#ifndef NETESTO_RRLOOP_H
#define NETESTO_RRLOOP_H

#include "../_loops.h"

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define CHUNK 65536

/* a slot: fd, role, request and reply sizes, then the flow's state (in and out) */
enum {
    F_FD, F_ROLE, F_REQ, F_REPLY, F_GOT, F_RX, F_TX, F_TRANS, F_T0, F_NLAT, F_STATUS, F_ERRNO, F_LEFT, F_DIRTY,
    F_HELD, F_H0, F_PARKED, F_PEND, F_MORE, F_N
};
enum { R_FREE = 0, R_CLIENT = 1, R_SERVER = 2 };
/* a slot's MORE: its last read filled the buffer; its peer closed or failed (epoll said so: read on until
 * EOF or the error, which came with data still to read and will not be announced again) */
enum { M_FULL = 1, M_HUP = 2 };
/* a slot's status: running, or why Python must take the flow end back */
enum { S_RUN = 0, S_EOF = 1, S_PARTIAL = 2, S_ERROR = 3 };

/* what requests and replies carry (_rrloop_rows.c, the file the other two call into) */
NETESTO_HIDDEN extern const char rr_zeros[CHUNK];

/* Send n zero bytes (non-blocking). 0: all went, 1: a partial send (s[F_LEFT] = what is left), -1: an error. */
static inline int send_zeros(int64_t *s, int64_t n)
{
    while (n > 0) {
        size_t size = n < CHUNK ? (size_t)n : CHUNK;
        ssize_t m = send((int)s[F_FD], rr_zeros, size, MSG_NOSIGNAL | MSG_DONTWAIT);
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
    int64_t park_max; /* > 0: clients whose row is due park at their idle point, for this long at most (park_done) */
    int parked;       /* how many are parked */
    int64_t park_t0;  /* when the first of them parked */
    int64_t quiet_ns; /* > 0: servers' rows wait for this long a quiet (no socket ready) (see server_step) */
    int64_t pend_max; /* ns a server's row waits for a quiet moment at most */
    int pending;      /* servers whose row waits */
    int64_t round0;   /* held_ns when the round before this one began (see server_step's hold) */
};

/* The hold: what the sampler's rows cost the members' transactions. held_ns grows by the elapsed time of
 * every row the loop takes; a slot's H0 is held_ns when its transaction went out (-1: none yet), and when
 * it comes back (a client's reply whole, a server's next replies out) held_ns - H0 (what its transaction
 * waited for rows) is counted in holds: 0, then 2 us wide buckets, the last 256 us and more. */
#define HOLD_BUCKET_NS 2000
#define HOLD_N 130
NETESTO_HIDDEN extern int64_t held_ns; /* (_rrloop_rows.c) */
NETESTO_HIDDEN extern uint64_t holds[2][HOLD_N]; /* clients', servers' */
/* where the rows were taken: a member's idle point, the parked clients' batch, a quiet moment, a server's
 * idle point after pend_max, the sweep; how many and their elapsed ns */
enum { P_IDLE, P_PARKED, P_QUIET, P_LATE, P_SWEEP, P_PARK, P_N }; /* P_PARK: the parks, first park to sends */
NETESTO_HIDDEN extern int64_t places[P_N][2];

static inline void hold_count(const int64_t *s)
{
    if (s[F_H0] < 0) return;
    int64_t d = held_ns - s[F_H0];
    int64_t b = d <= 0 ? 0 : 1 + d / HOLD_BUCKET_NS;
    holds[s[F_ROLE] == R_SERVER][b < HOLD_N - 1 ? b : HOLD_N - 1]++;
}

/* The member of slot whose row is due at mono, or NULL (no hot rows here, HELD, a free slot, not due). */
static inline PyObject *member_due(struct hot *h, uint64_t slot, const int64_t *s, double mono)
{
    if (h->api == NULL || s[F_HELD] || slot >= (uint64_t)PyList_GET_SIZE(h->flows)) return NULL;
    PyObject *flow = PyList_GET_ITEM(h->flows, (Py_ssize_t)slot);
    return flow != Py_None && h->api->due(flow, mono) ? flow : NULL;
}

/* A client's next request, its latency clock started at now. */
static inline void client_send(int64_t *s, int64_t now)
{
    s[F_T0] = now;
    s[F_H0] = held_ns;
    int r = send_zeros(s, s[F_REQ]);
    if (r != 0) s[F_STATUS] = r > 0 ? S_PARTIAL : S_ERROR;
}

/* why wait() returned */
enum { W_DEADLINE = 0, W_PYTHON = 1, W_FLOW = 2, W_LATFULL = 3 };

/* One step of the member in slot (_rrloop_steps.c) */
NETESTO_HIDDEN int serve(int64_t *table, uint64_t slot, int64_t *lat, Py_ssize_t cap, int64_t *touched,
                         struct hot *h);

/* The members' rows (_rrloop_rows.c) */
NETESTO_HIDDEN void member_row(struct hot *h, PyObject *flow, int64_t *s, int64_t *lat, int where);
NETESTO_HIDDEN void quiet_rows(struct hot *h, int64_t *table, Py_ssize_t nslots, int one);
NETESTO_HIDDEN int unpark(struct hot *h, int64_t *table, Py_ssize_t nslots, int64_t *lat, Py_ssize_t cap, int rows);
NETESTO_HIDDEN void sweep_rows(struct hot *h, int64_t *table, Py_ssize_t nslots, int64_t *lat, Py_ssize_t cap,
                               int64_t *touched, double *sweep);
NETESTO_HIDDEN const struct sample_api *get_api(void);
NETESTO_HIDDEN extern PyMethodDef rrloop_rows_methods[]; /* holds() */

#endif
