/* What the two C files of netesto's _crrloop extension share: _crrloop.c (the TCP_CRR client loop and the
 * module) and _crrloop_accept.c (the server side: accepting and serving the CRR joins, the shared table). */
#ifndef NETESTO_CRRLOOP_H
#define NETESTO_CRRLOOP_H

#include "../_loops.h"

#define CHUNK 65536
#define CHECK_EVERY 16 /* transactions between signal checks */

/* server state of one flow, in/out */
enum { S_RX, S_TX, S_TRANS, S_CONNS, S_N };

NETESTO_HIDDEN extern char crr_scratch[CHUNK]; /* received payload is discarded (_crrloop.c) */
NETESTO_HIDDEN extern PyMethodDef crrloop_accept_methods[]; /* crr_accept, crr_take (_crrloop_accept.c) */

#endif
