/* What the two C files of netesto's _crrloop extension share: _crrloop.c (the TCP_CRR client loop and the
 * module) and _crrloop_accept.c (the server side: accepting and serving the CRR joins, the shared table).
 * The calls go one way: _crrloop.c into _crrloop_accept.c. */
#ifndef NETESTO_CRRLOOP_H
#define NETESTO_CRRLOOP_H

#include "../_loops.h"

#define CHUNK 65536
#define CHECK_EVERY 16 /* transactions between signal checks */

/* server state of one flow, in/out */
enum { S_RX, S_TX, S_TRANS, S_CONNS, S_N };

/* received payload is discarded (_crrloop_accept.c, the file _crrloop.c calls into) */
NETESTO_HIDDEN extern char crr_scratch[CHUNK];
NETESTO_HIDDEN extern PyMethodDef crrloop_accept_methods[]; /* crr_accept, crr_take (_crrloop_accept.c) */

#endif
