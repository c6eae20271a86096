/* What the engine's C loops share (_fastloop.c, _crrloop.c, _rrloop.c): the clock, deadlines and
 * the caller-owned int64 state buffers. Static inline: each extension gets its own copy. */
#ifndef NETESTO_LOOPS_H
#define NETESTO_LOOPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* What one extension's C files lend each other (a function or a table shared by its files, never exported) */
#define NETESTO_HIDDEN __attribute__((visibility("hidden")))

/* CLOCK_MONOTONIC in ns: time.monotonic's and time.perf_counter's clock on Linux (fastloop checks the latter) */
static inline int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The sampler's grid (netesto.engine.sampling.grid, the Python twin): grid points a flow end may owe rows
 * for before it skips them, at least TICK_BACKLOG and as many as BACKLOG_MS hold (grid.backlog),
 * both exported by each module. TICK_BACKLOG also bounds the owed rows one pass of a loop takes. */
#define TICK_BACKLOG 64
#define BACKLOG_MS 1000

/* Python's float floor division a // b (floatobject.c's float_floor_div), for b > 0: the grid's steps as
 * the Python twin counts them. */
static inline double floor_div(double a, double b)
{
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0.0 && mod < 0.0) div -= 1.0; /* b > 0: the remainder takes b's sign */
    if (div == 0.0) return copysign(0.0, a / b);
    double fl = floor(div);
    return div - fl > 0.5 ? fl + 1.0 : fl;
}

/* grid.backlog: the grid points a flow end sampled every interval s may owe rows for */
static inline double backlog_points(double interval)
{
    double n = interval > 0 ? ceil(BACKLOG_MS / 1000.0 / interval - 1e-9) : 0;
    return n > TICK_BACKLOG ? n : TICK_BACKLOG;
}

/* The grid point the row after one for point, taken at now, serves (grid.next_point): the next point,
 * even one already past (a late tick's owed rows are taken as soon as the loop can), unless it is
 * backlog_points intervals behind or more: then the first point ahead (the points passed are missed). */
static inline double next_point(double point, double now, double interval)
{
    double when = point + interval;
    /* (on time, the common case, needs no backlog: it is never under TICK_BACKLOG points) */
    if (now - when >= TICK_BACKLOG * interval && now - when >= backlog_points(interval) * interval) {
        when += (floor_div(now - when, interval) + 1.0) * interval;
        if (when <= now) when += interval; /* (rounding) */
    }
    return when;
}

/* A TCP socket option (tcp_info, cc info) of fd into dst: want bytes asked, dst zero-filled to size past
 * what the kernel gave. 1 when read; 0 (dst as it was) when fd is -1 or the read fails. */
static inline int tcp_opt_padded(int fd, int opt, char *dst, socklen_t want, socklen_t size)
{
    socklen_t len = want;
    if (fd < 0 || getsockopt(fd, IPPROTO_TCP, opt, dst, &len) != 0) return 0;
    if (len < size) memset(dst + len, 0, (size_t)(size - len));
    return 1;
}

/* A time.monotonic() deadline (s) in ns; a loop with no timer gives inf: never */
static inline int64_t deadline_ns(double deadline)
{
    if (!(deadline < 9.0e9)) return INT64_MAX;
    return (int64_t)(deadline * 1e9);
}

/* view: obj's writable buffer with room for n int64 values (0), or -1 with an exception set */
static inline int get_state(PyObject *obj, Py_buffer *view, Py_ssize_t n, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (view->len < n * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "%s needs room for %zd int64 values", what, n);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* Writable views of n buffers (all or none: -1 with an exception set). */
static inline int get_buffers(PyObject *const *objs, Py_buffer *views, int n)
{
    for (int i = 0; i < n; i++) {
        if (PyObject_GetBuffer(objs[i], &views[i], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            while (i-- > 0) PyBuffer_Release(&views[i]);
            return -1;
        }
    }
    return 0;
}

static inline void release_buffers(Py_buffer *views, int n)
{
    for (int i = 0; i < n; i++) PyBuffer_Release(&views[i]);
}

/* A module's integer constants: a table ended by {NULL, 0} */
struct int_constant {
    const char *name;
    long value;
};

/* Add the table's constants to module m: 0, or -1 with an exception set */
static inline int add_int_constants(PyObject *m, const struct int_constant *c)
{
    for (; c->name != NULL; c++)
        if (PyModule_AddIntConstant(m, c->name, c->value) < 0) return -1;
    return 0;
}

/* What _fastloop lends the other C loops for a flow end's hot sample (its capsule _fastloop.SAMPLE_API):
 * due(flow, mono): whether a row is due (due_at <= mono); take_lat(flow, lat, n): a C loop's latencies into
 * its lat_raw (0, or -1 with an exception set); sample(flow, ctr3, acc, &written): its row now, with the
 * counters tx, rx, trans of ctr3 (NULL: its own), acc (ACC_N values) taking the row and its cost: 0 done, 1 its block is
 * due for Python (written bytes out), 2 Python must build the row, -1 an exception is set. */
/* acc's fields (Sampler.acc): hot rows' [the probes' own thread CPU ns, rows, written bytes of a block
 * Python must finish, thread CPU ns of the probed rows, probed rows] */
enum { ACC_NS, ACC_ROWS, ACC_WRITTEN, ACC_PROBED, ACC_PROBED_ROWS, ACC_N };
#define SAMPLE_API_NAME "netesto.engine.native._fastloop.SAMPLE_API"
#define SAMPLE_API_VERSION 1
struct sample_api {
    int version;
    int (*due)(PyObject *flow, double mono);
    int (*take_lat)(PyObject *flow, const int64_t *lat, Py_ssize_t n);
    int (*sample)(PyObject *flow, const long long *ctr3, int64_t *acc, Py_ssize_t *written);
};

#endif
