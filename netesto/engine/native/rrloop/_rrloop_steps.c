/* One member's step in netesto's C loop of many TCP_RR flow ends (module netesto.engine.native._rrloop, whose
 * wait loop in _rrloop.c calls serve for each socket ready, or still holding more, in a round): a client's
 * read of its reply and its next request, a server's read of requests and its replies. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_rrloop.h"

#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

static char scratch[CHUNK]; /* where received payload goes, to be discarded */

/* One read of what the member's socket holds, up to CHUNK, counted (RX, GOT), and whether the socket may
 * hold more (MORE): edge-triggered, what a read leaves is not announced again. The bytes read (> 0), or 0:
 * EOF or an error (its status says), or nothing there. */
static ssize_t take_in(int64_t *s)
{
    ssize_t n = recv((int)s[F_FD], scratch, CHUNK, MSG_DONTWAIT);
    if (n > 0) {
        s[F_RX] += n;
        s[F_GOT] += n;
        s[F_MORE] = (n == CHUNK ? M_FULL : 0) | (s[F_MORE] & M_HUP);
        return n;
    }
    if (n == 0) {
        s[F_STATUS] = S_EOF;
    } else if (errno == EINTR) {
        s[F_MORE] |= M_FULL; /* (read again in the next round) */
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
        s[F_MORE] = 0;
    } else {
        s[F_ERRNO] = errno;
        s[F_STATUS] = S_ERROR;
    }
    return 0;
}

/* One step of a client: one read; the next request once the reply is whole. 1 when a latency went in. */
static int client_step(int64_t *s, int64_t *lat, Py_ssize_t cap, struct hot *h, uint64_t slot)
{
    /* (what is there is its reply's: it has one request out) */
    if (take_in(s) == 0 || s[F_GOT] < s[F_REPLY]) return 0;
    int64_t now = now_ns();
    if (s[F_NLAT] < cap) lat[s[F_NLAT]++] = now - s[F_T0];
    s[F_TRANS] += 1;
    s[F_GOT] -= s[F_REPLY];
    hold_count(s);
    if (s[F_PARKED]) return 1; /* (a reply with no request out: a peer's stray bytes) */
    /* its reply is whole, its next request not out: its row if due, or it parks until no client member
     * of the group has a transaction in flight (park_done) and takes its row then */
    PyObject *flow = member_due(h, slot, s, (double)now / 1e9);
    if (flow != NULL && h->park_max > 0) {
        s[F_PARKED] = 1;
        if (h->parked++ == 0) h->park_t0 = now;
        return 1;
    }
    if (flow != NULL) {
        member_row(h, flow, s, lat, P_IDLE);
        now = now_ns();
    }
    client_send(s, now);
    return 1;
}

/* One step of a server: one read; the replies to the whole requests in it. */
static void server_step(int64_t *s, struct hot *h, uint64_t slot)
{
    if (take_in(s) == 0 || s[F_GOT] < s[F_REQ]) return;
    int64_t count = s[F_GOT] / s[F_REQ];
    s[F_GOT] -= count * s[F_REQ];
    s[F_TRANS] += count;
    int r = send_zeros(s, count * s[F_REPLY]);
    /* its hold: the rows since the round before this one began (its request came during them or after) */
    s[F_H0] = h->round0;
    hold_count(s);
    if (r != 0) {
        s[F_STATUS] = r > 0 ? S_PARTIAL : S_ERROR;
    } else if (h->api != NULL) { /* its replies are out: its row if due, or at the next quiet moment */
        int64_t now = now_ns();
        PyObject *flow = s[F_PEND] && now - s[F_PEND] < h->pend_max ? NULL : member_due(h, slot, s, (double)now / 1e9);
        if (flow != NULL && h->quiet_ns > 0 && !s[F_PEND]) {
            s[F_PEND] = now;
            h->pending++;
        } else if (flow != NULL) { /* (waited too long: the peer never pauses) */
            int late = s[F_PEND] != 0;
            h->pending -= late;
            s[F_PEND] = 0;
            member_row(h, flow, s, NULL, late ? P_LATE : P_IDLE);
        }
    }
}

/* One step of the member in slot (its socket was ready, or MORE; a slot of the table): 1 << FLOW when its status
 * is no longer RUN, 1 << LATFULL when its latency buffer is full, else 0. A slot that is free or not running
 * is left alone. */
NETESTO_HIDDEN int serve(int64_t *table, uint64_t slot, int64_t *lat, Py_ssize_t cap, int64_t *touched,
                         struct hot *h)
{
    int64_t *s = table + slot * F_N;
    if (s[F_ROLE] == R_FREE || s[F_STATUS] != S_RUN) return 0;
    if (!s[F_DIRTY]) {
        s[F_DIRTY] = 1;
        touched[1 + touched[0]++] = (int64_t)slot;
    }
    int full = 0;
    if (s[F_ROLE] == R_CLIENT) full = client_step(s, lat + slot * cap, cap, h, slot) && s[F_NLAT] >= cap;
    else server_step(s, h, slot);
    return s[F_STATUS] != S_RUN ? 1 << W_FLOW : full ? 1 << W_LATFULL : 0;
}
