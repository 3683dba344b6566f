/*
 * airlink.replay._fastpath: the per-packet path of the shells in C.
 *
 * The same event loop and stages as replay/loop.py, replay/stages.py and replay/workload.py
 * (pass, fixed delay, Bernoulli/Gilbert loss, a link with any queue of replay/queues.py
 * drained by a byte-granular capacity trace, and the workload mode's rule), for the common
 * configurations; the shells fall back to the pure-Python loop for everything else (delay
 * series, --once). The link is the shells' one link core (replay/_linkcore.h: queue,
 * byte-granular server, TTI grid with its carry, GSO segments), which the cell shell uses
 * too; semantics are identical to the Python stages (see their docstrings).
 *
 * Offload mode (vnet_hdr(10) on both stages, TUN devices opened with IFF_VNET_HDR and
 * TUNSETOFFLOAD): every packet carries a 10-byte virtio_net_hdr in front, and a TCP or
 * UDP GSO super-packet (up to 64 KB) crosses user space once. Every stage treats it as
 * the sequence of segments the kernel would have sent without offload (see
 * _linkcore.h), so counters, the loss draws, the queue limits and the link's
 * byte-granular service are exactly those of plain mode; where a TTI's budget, a queue
 * limit or a loss draw cuts a super-packet, the core cuts it into pieces of whole
 * segments (lc_piece).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "_linkcore.h"

#define READ_BATCH 512
#define DRAIN_QUIET_NS 30000000LL
#define DRAIN_MAX_NS 1000000000LL

enum { K_PASS = 0, K_DELAY = 1, K_LOSS = 2, K_LINK = 3, K_WORKLOAD = 4 };

typedef struct {
    PyObject_HEAD
    int kind;
    int vnet;           /* virtio_net_hdr size in front of every packet (0: plain) */
    /* pass, delay, loss: counters (segments and plain-mode bytes) and the packets held */
    long long arr_p, arr_b, dep_p, dep_b, drop_p, drop_b;
    long long superpackets, pieces;     /* GSO arrivals; pieces cut out of them */
    lc_fifo q;          /* delay: pending; pass/loss: ready */
    /* delay */
    int64_t delay_ns, last_release;
    /* loss */
    double rate, p_gb, p_bg, loss_g, loss_b;
    int gilbert, bad;
    uint64_t rng;
    /* link: the core's queue and server, drained by a capacity trace's TTI grid */
    lc_link link;
    lc_grid grid;
    lc_log log;         /* the link's events (with logs) */
    lc_rows rows;       /* its per-TTI rows (with logs) */
    /* workload: the core's rule decides each packet's release; q holds them, as a delay */
    lc_workload wl;
    lc_log *wlog;       /* &log with logs (a packet's arrival and departure, both logged when
                           it arrives, its release being known then), else NULL */
} Stage;

/* Events and rows held before the relay hands them to Python (its on_log callable). */
#define LOG_CHUNK 65536

/* Where departures go: a file descriptor, or a Python list (the push/pull test API). */
typedef struct {
    int fd;
    PyObject *list;
    long long errors;
} Sink;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- stage operations ------------------------------------------------------------ */

static void sink_write(void *ctx, const unsigned char *buf, int len) {
    Sink *out = ctx;
    if (out->list) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)buf, len);
        if (!b || PyList_Append(out->list, b) < 0) out->errors++;
        Py_XDECREF(b);
    } else if (write(out->fd, buf, len) < 0) {
        out->errors++;
    }
}

static void stage_push(Stage *s, lc_packet *p, int64_t now) {
    if (s->kind == K_LINK) {
        lc_enqueue(&s->link, p, now);
        return;
    }
    int n = p->nseg;
    s->superpackets += n > 1;
    s->arr_p += n;
    s->arr_b += lc_wire(p, 0, n);
    switch (s->kind) {
    case K_DELAY: {
        int64_t t = now + s->delay_ns;
        if (t < s->last_release) t = s->last_release;
        s->last_release = t;
        p->t = t;
        lc_fifo_push(&s->q, p);
        return;
    }
    case K_WORKLOAD: {
        /* a GSO super-packet is its segments, each released by the rule as it would be
           arriving alone; segments released at one time leave together (p itself when all
           are, else pieces of whole segments) */
        int64_t rel[n], first = 0, last = 0;
        for (int i = 0; i < n; i++) {
            long long size = lc_wire(p, i, i + 1);
            last = rel[i] = lc_workload_release(&s->wl, now, size);
            if (i == 0) first = last;
            lc_log_add(s->wlog, LC_ARRIVAL, now, size, 0);
            lc_log_add(s->wlog, LC_DEPARTURE, last, size, now);
        }
        if (last == first) {            /* releases never decrease: all at one time */
            p->t = first;
            lc_fifo_push(&s->q, p);
            return;
        }
        for (int a = 0, b; a < n; a = b) {
            for (b = a + 1; b < n && rel[b] == rel[a]; b++) {}
            lc_packet *q = lc_piece(p, a, b);
            if (!q) {                   /* no memory for the piece: its segments are lost */
                s->drop_p += b - a;
                s->drop_b += lc_wire(p, a, b);
                continue;
            }
            s->pieces++;
            q->t = rel[a];
            lc_fifo_push(&s->q, q);
        }
        lc_packet_free(p);
        return;
    }
    case K_LOSS: {
        unsigned char keep[n];
        int lost_any = 0;
        for (int i = 0; i < n; i++) {      /* one draw (or chain step) per segment */
            int lost;
            if (!s->gilbert) {
                lost = lc_rng_uniform(&s->rng) < s->rate;
            } else {
                if (s->bad) { if (lc_rng_uniform(&s->rng) < s->p_bg) s->bad = 0; }
                else if (lc_rng_uniform(&s->rng) < s->p_gb) s->bad = 1;
                lost = lc_rng_uniform(&s->rng) < (s->bad ? s->loss_b : s->loss_g);
            }
            keep[i] = !lost;
            if (lost) { lost_any = 1; s->drop_p++; s->drop_b += lc_wire(p, i, i + 1); }
        }
        if (!lost_any) lc_fifo_push(&s->q, p);
        else s->pieces += lc_push_kept(&s->q, p, keep);
        return;
    }
    default:
        lc_fifo_push(&s->q, p);
    }
}

/* The rest of p (segments [lo, nseg)) leaves now; p is freed. */
static void forward(Stage *s, lc_packet *p, lc_sink *out) {
    s->dep_p += p->nseg - p->lo;
    s->dep_b += lc_wire(p, p->lo, p->nseg);
    if (p->lo == 0) {
        out->write(out->ctx, p->data, p->len);
    } else {
        lc_packet *q = lc_piece(p, p->lo, p->nseg);
        if (q) { s->pieces++; out->write(out->ctx, q->data, q->len); lc_packet_free(q); }
        else out->errors++;
    }
    lc_packet_free(p);
}

/* Write every packet due by `now` to the sink. */
static void stage_pull(Stage *s, int64_t now, Sink *sink) {
    lc_sink out = {sink_write, sink, 0};
    lc_packet *p;
    switch (s->kind) {
    case K_PASS:
    case K_LOSS:
        while ((p = lc_fifo_pop(&s->q))) forward(s, p, &out);
        break;
    case K_DELAY:
    case K_WORKLOAD:
        while (s->q.head && s->q.head->t <= now) forward(s, lc_fifo_pop(&s->q), &out);
        break;
    case K_LINK:
        lc_grid_advance(&s->grid, &s->link, now, &out);
        break;
    }
    sink->errors += out.errors;
}

/* Segments that left the stage so far. */
static long long departed(const Stage *s) { return s->kind == K_LINK ? s->link.dep_p : s->dep_p; }

/* Next time the stage has something to give, or -1 when idle. */
static int64_t stage_next(Stage *s) {
    switch (s->kind) {
    case K_DELAY:
    case K_WORKLOAD:
        return s->q.head ? s->q.head->t : -1;
    case K_LINK:
        return lc_busy(&s->link) ? s->grid.end : -1;
    default:
        return s->q.head ? 0 : -1;
    }
}

/* ---- the Python type -------------------------------------------------------------- */

static void Stage_dealloc(Stage *s) {
    lc_fifo_clear(&s->q);
    lc_link_free(&s->link);
    lc_grid_free(&s->grid);
    lc_log_free(&s->log);
    lc_rows_free(&s->rows);
    lc_workload_free(&s->wl);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *Stage_stats(Stage *s, PyObject *Py_UNUSED(ignored)) {
    static const char *names[] = {"pass", "delay", "loss", "link", "workload"};
    long long arr_p = s->arr_p, arr_b = s->arr_b, dep_p = s->dep_p, dep_b = s->dep_b;
    long long drop_p = s->drop_p, drop_b = s->drop_b, sp = s->superpackets, pieces = s->pieces;
    long long qb = s->q.bytes, qp = s->q.count;
    if (s->kind == K_LINK) {
        lc_link *l = &s->link;
        arr_p = l->arr_p; arr_b = l->arr_b; dep_p = l->dep_p; dep_b = l->dep_b;
        drop_p = l->drop_p; drop_b = l->drop_b; sp = l->superpackets; pieces = l->pieces;
        lc_backlog(l, &qb, &qp);
    }
    PyObject *d = Py_BuildValue(
        "{s:s,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "stage", names[s->kind],
        "arrivals_packets", arr_p, "arrivals_bytes", arr_b,
        "departures_packets", dep_p, "departures_bytes", dep_b,
        "drops_packets", drop_p, "drops_bytes", drop_b,
        "queued_packets", qp, "queued_bytes", qb);
    if (d && s->vnet) {
        PyObject *v = PyLong_FromLongLong(sp);
        PyDict_SetItemString(d, "superpackets", v); Py_XDECREF(v);
        v = PyLong_FromLongLong(pieces);
        PyDict_SetItemString(d, "pieces_cut", v); Py_XDECREF(v);
    }
    if (d && s->kind == K_LINK) {
        PyObject *v = PyLong_FromLongLong(s->link.marks_p);
        PyDict_SetItemString(d, "marks_packets", v); Py_XDECREF(v);
        v = PyLong_FromLongLong(s->link.marks_b);
        PyDict_SetItemString(d, "marks_bytes", v); Py_XDECREF(v);
        v = PyLong_FromLongLong(s->grid.capacity_bytes);
        PyDict_SetItemString(d, "capacity_bytes", v); Py_XDECREF(v);
        v = PyLong_FromLongLong(s->grid.k);
        PyDict_SetItemString(d, "ttis", v); Py_XDECREF(v);
    }
    if (d && s->kind == K_WORKLOAD) {
        const lc_workload *w = &s->wl;
        const char *keys[] = {"light_packets", "heavy_packets", "bursts", "heavy_bytes", "heavy_opportunities"};
        long long vals[] = {w->light_packets, w->heavy_packets, w->bursts, w->heavy_bytes,
                            lc_workload_heavy_span(w)};
        for (int i = 0; i < 5; i++) {
            PyObject *v = PyLong_FromLongLong(vals[i]);
            PyDict_SetItemString(d, keys[i], v); Py_XDECREF(v);
        }
    }
    return d;
}

static PyObject *Stage_vnet_hdr(Stage *s, PyObject *arg) {
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    if (n != 0 && n != 10) {
        PyErr_SetString(PyExc_ValueError, "vnet header size must be 0 (plain) or 10 (virtio_net_hdr)");
        return NULL;
    }
    if (s->arr_p || s->link.arr_p) {
        PyErr_SetString(PyExc_ValueError, "the vnet header size is set before the first packet");
        return NULL;
    }
    s->vnet = (int)n;
    Py_RETURN_NONE;
}

/* take_events() -> bytes of lc_event records since the last call (see _linkcore.h) */
static PyObject *Stage_take_events(Stage *s, PyObject *Py_UNUSED(ignored)) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)s->log.ev, (Py_ssize_t)(s->log.n * sizeof(lc_event)));
    if (b) s->log.n = 0;
    return b;
}

/* take_rows() -> bytes of per-TTI rows (8 int64 each) since the last call */
static PyObject *Stage_take_rows(Stage *s, PyObject *Py_UNUSED(ignored)) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)s->rows.row, (Py_ssize_t)(s->rows.n * sizeof *s->rows.row));
    if (b) s->rows.n = 0;
    return b;
}

static size_t log_held(const Stage *s) { return s->log.n + s->rows.n; }

static PyObject *Stage_push(Stage *s, PyObject *args) {
    Py_buffer b;
    long long now;
    if (!PyArg_ParseTuple(args, "y*L", &b, &now)) return NULL;
    lc_packet *p = lc_packet_new(b.buf, b.len, s->vnet);
    PyBuffer_Release(&b);
    if (!p) { PyErr_SetString(PyExc_ValueError, "packet shorter than its vnet header"); return NULL; }
    stage_push(s, p, now);
    Py_RETURN_NONE;
}

static PyObject *Stage_pull(Stage *s, PyObject *args) {
    long long now;
    if (!PyArg_ParseTuple(args, "L", &now)) return NULL;
    Sink out = {-1, PyList_New(0), 0};
    if (!out.list) return NULL;
    stage_pull(s, now, &out);
    if (out.errors) { Py_DECREF(out.list); return PyErr_NoMemory(); }
    return out.list;
}

/* next_event() -> ns or None: when pull next has something to give (stage.next_event_ns) */
static PyObject *Stage_next_event(Stage *s, PyObject *Py_UNUSED(ignored)) {
    int64_t t = stage_next(s);
    if (t < 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(t);
}

static PyMethodDef Stage_methods[] = {
    {"next_event", (PyCFunction)Stage_next_event, METH_NOARGS,
     "next_event() -> ns or None: when pull next has something to give (0: at once; None: idle)."},
    {"stats", (PyCFunction)Stage_stats, METH_NOARGS, "Counters as the Python stages report them."},
    {"vnet_hdr", (PyCFunction)Stage_vnet_hdr, METH_O,
     "vnet_hdr(size): 10 = every packet starts with a virtio_net_hdr (offload mode), 0 = plain."},
    {"push", (PyCFunction)Stage_push, METH_VARARGS, "push(packet, now_ns): a packet arrived (as relay reads it)."},
    {"take_events", (PyCFunction)Stage_take_events, METH_NOARGS,
     "take_events() -> bytes: the link's logged events since the last call (lc_event records: t, x int64; "
     "kind, len int32)."},
    {"take_rows", (PyCFunction)Stage_take_rows, METH_NOARGS,
     "take_rows() -> bytes: the link's per-TTI rows since the last call (8 int64 each, RECORD_COLUMNS)."},
    {"pull", (PyCFunction)Stage_pull, METH_VARARGS, "pull(now_ns) -> [packet]: what leaves by now (as relay writes it)."},
    {NULL}
};

static PyTypeObject StageType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "airlink.replay._fastpath.Stage",
    .tp_basicsize = sizeof(Stage),
    .tp_dealloc = (destructor)Stage_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A stage of the C fast path (build with passthrough/delay/loss/link).",
    .tp_methods = Stage_methods,
};

static Stage *new_stage(int kind) {
    Stage *s = PyObject_New(Stage, &StageType);
    if (!s) return NULL;
    memset((char *)s + sizeof(PyObject), 0, sizeof(Stage) - sizeof(PyObject));
    s->kind = kind;
    return s;
}

static PyObject *fp_passthrough(PyObject *self, PyObject *args) {
    return (PyObject *)new_stage(K_PASS);
}

static PyObject *fp_delay(PyObject *self, PyObject *args) {
    long long d;
    if (!PyArg_ParseTuple(args, "L", &d)) return NULL;
    Stage *s = new_stage(K_DELAY);
    if (s) s->delay_ns = d;
    return (PyObject *)s;
}

static PyObject *fp_loss(PyObject *self, PyObject *args) {
    double rate, p_gb, p_bg, lg, lb;
    int gilbert;
    unsigned long long seed;
    if (!PyArg_ParseTuple(args, "dpddddK", &rate, &gilbert, &p_gb, &p_bg, &lg, &lb, &seed)) return NULL;
    Stage *s = new_stage(K_LOSS);
    if (!s) return NULL;
    s->rate = rate; s->gilbert = gilbert; s->p_gb = p_gb; s->p_bg = p_bg;
    s->loss_g = lg; s->loss_b = lb; s->rng = seed;
    return (PyObject *)s;
}

static PyObject *fp_link(PyObject *self, PyObject *args) {
    Py_buffer cap;
    long long num, den, start, packets, bytes;
    int qkind, ecn = 0;
    unsigned long long seed = 0;
    double a = 0, b = 0, c = 0, d = 0;
    int log = 0;
    if (!PyArg_ParseTuple(args, "y*LLLiLL|(pKdddd)p", &cap, &num, &den, &start, &qkind, &packets, &bytes,
                          &ecn, &seed, &a, &b, &c, &d, &log))
        return NULL;
    if (cap.len < (Py_ssize_t)sizeof(double) || cap.len % sizeof(double) || num <= 0 || den <= 0 ||
        qkind < LC_INFINITE || qkind > LC_L4S || packets < 0 || bytes < 0) {
        PyBuffer_Release(&cap);
        PyErr_SetString(PyExc_ValueError, "capacity must be float64 bytes; TTI positive; a known queue");
        return NULL;
    }
    Stage *s = new_stage(K_LINK);
    if (!s) { PyBuffer_Release(&cap); return NULL; }
    lc_link_init(&s->link, qkind, packets, bytes);
    lc_link_aqm(&s->link, ecn, seed, a, b, c, d);
    int rc = lc_grid_init(&s->grid, cap.buf, cap.len / sizeof(double), num, den, start);
    PyBuffer_Release(&cap);
    if (rc < 0) { Py_DECREF(s); return PyErr_NoMemory(); }
    if (log) {
        s->link.log = &s->log;
        s->grid.rows = &s->rows;
    }
    return (PyObject *)s;
}

/* workload(start_ns, idle_ns, light_period_ns, train_t, train_d, pdo_len, pdo, heavy,
   heavy_period_ns, offset[, log]): int64 arrays as bytes (see lc_workload_init in
   _linkcore.h); log: keep arrival and departure events (take_events) */
static PyObject *fp_workload(PyObject *self, PyObject *args) {
    long long start, idle, light_period, heavy_period;
    Py_buffer b[6];
    int log = 0;
    if (!PyArg_ParseTuple(args, "LLLy*y*y*y*y*Ly*|p", &start, &idle, &light_period, &b[0], &b[1], &b[2], &b[3],
                          &b[4], &heavy_period, &b[5], &log))
        return NULL;
    /* the ParseTuple order: train_t, train_d, pdo_len, pdo, heavy, offset */
    Stage *s = NULL;
    size_t n = b[0].len / 8, total = 0;
    int ok = b[1].len / 8 == (Py_ssize_t)n && b[2].len / 8 == (Py_ssize_t)n;
    for (int i = 0; i < 6; i++) ok = ok && b[i].len % 8 == 0;
    for (size_t i = 0; ok && i < n; i++) total += ((const int64_t *)b[2].buf)[i];
    ok = ok && b[3].len / 8 == (Py_ssize_t)total;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "workload: int64 arrays, one time, delay and PDO count per train");
    } else if ((s = new_stage(K_WORKLOAD)) &&
               lc_workload_init(&s->wl, start, idle, light_period, b[0].buf, b[1].buf, b[2].buf, b[3].buf, n,
                                b[4].buf, b[4].len / 8, heavy_period, b[5].buf, b[5].len / 8) < 0) {
        Py_DECREF(s);
        s = NULL;
        PyErr_SetString(PyExc_ValueError, "workload: a trace set the rule cannot serve (or no memory)");
    } else if (s && log) {
        s->wlog = &s->log;
    }
    for (int i = 0; i < 6; i++) PyBuffer_Release(&b[i]);
    return (PyObject *)s;
}

/* Read every packet waiting on fd (up to READ_BATCH) into the stage, stamped now; each is
   read straight into a packet buffer (*spare: the buffer of the next read). */
static long long read_into(int fd, Stage *s, int64_t now, lc_packet **spare) {
    long long n = 0;
    for (int i = 0; i < READ_BATCH; i++) {
        if (!*spare && !(*spare = lc_buffer())) break;
        ssize_t r = read(fd, (*spare)->data, LC_MAX_PACKET);
        if (r < 0) break;               /* EAGAIN: drained */
        lc_packet *p = lc_buffer_packet(spare, r, s->vnet);
        if (!p) continue;
        stage_push(s, p, now);
        n++;
    }
    return n;
}

/* relay(outer_fd, inner_fd, stop_fd, downlink, uplink[, on_log]) -> {"write_errors", "wakeups"};
   on_log() is called (with the GIL) whenever the stages hold LOG_CHUNK events and rows, to
   write them out; an exception it raises ends the relay. */
static PyObject *relay_loop(int outer, int inner, int stop, Stage *down, Stage *up, PyObject *on_log,
                            lc_packet **spare) {
    long long wakeups = 0;
    Sink to_inner = {inner, NULL, 0}, to_outer = {outer, NULL, 0};
    int64_t drain_until = -1;
    struct pollfd fds[3] = {{outer, POLLIN, 0}, {inner, POLLIN, 0}, {stop, POLLIN, 0}};
    int nfds = stop >= 0 ? 3 : 2;
    for (;;) {
        int64_t now = now_ns();
        stage_pull(down, now, &to_inner);
        stage_pull(up, now, &to_outer);
        if (on_log && log_held(down) + log_held(up) >= LOG_CHUNK) {
            PyObject *r = PyObject_CallNoArgs(on_log);
            if (!r) return NULL;
            Py_DECREF(r);
        }
        int64_t t = stage_next(down), u = stage_next(up);
        if (t < 0 || (u >= 0 && u < t)) t = u;
        struct timespec ts, *tsp = NULL;
        int64_t wait = -1;
        if (t >= 0) { wait = t - now_ns(); if (wait < 0) wait = 0; }
        if (drain_until >= 0) {
            int64_t left = drain_until - now_ns();
            if (left <= 0) break;
            int64_t cap = t < 0 ? (DRAIN_QUIET_NS < left ? DRAIN_QUIET_NS : left) : left;
            if (wait < 0 || wait > cap) wait = cap;
        }
        if (wait >= 0) { ts.tv_sec = wait / 1000000000LL; ts.tv_nsec = wait % 1000000000LL; tsp = &ts; }
        int r;
        Py_BEGIN_ALLOW_THREADS
        r = ppoll(fds, nfds, tsp, NULL);
        Py_END_ALLOW_THREADS
        if (r < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0) return NULL;
                continue;
            }
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        wakeups++;
        if (r == 0) {
            if (drain_until >= 0 && t < 0) break;
            continue;
        }
        if (nfds == 3 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) {
            nfds = 2;
            drain_until = now_ns() + DRAIN_MAX_NS;
            continue;
        }
        if ((fds[0].revents | fds[1].revents) & (POLLERR | POLLHUP | POLLNVAL)) {
            /* a TUN device was removed from outside (a detached TUN fd polls POLLERR for
               ever): stop instead of spinning */
            errno = ENODEV;
            return PyErr_SetFromErrno(PyExc_OSError);
        }
        now = now_ns();
        stage_pull(down, now, &to_inner);
        stage_pull(up, now, &to_outer);
        if (fds[0].revents & POLLIN) read_into(outer, down, now, spare);
        if (fds[1].revents & POLLIN) read_into(inner, up, now, spare);
    }
    return Py_BuildValue("{s:L,s:L}", "write_errors", to_inner.errors + to_outer.errors, "wakeups", wakeups);
}

static PyObject *fp_relay(PyObject *self, PyObject *args) {
    int outer, inner, stop;
    Stage *down, *up;
    PyObject *on_log = Py_None;
    if (!PyArg_ParseTuple(args, "iiiO!O!|O", &outer, &inner, &stop, &StageType, &down, &StageType, &up, &on_log))
        return NULL;
    lc_packet *spare = NULL;
    PyObject *r = relay_loop(outer, inner, stop, down, up, on_log == Py_None ? NULL : on_log, &spare);
    lc_packet_free(spare);
    lc_pool_clear();                    /* the relay's buffers go back to the allocator */
    return r;
}

/* ---- one thread per direction ------------------------------------------------------ */

/* What the two directions share: when the drain after CMD's exit ends, when a packet last
   moved, whether each is idle, and a request to quit (an error or a Python exception). */
typedef struct {
    _Atomic int64_t drain_until;    /* -1: CMD still runs */
    _Atomic int64_t last_move;
    _Atomic int idle[2];
    _Atomic int quit;
} Shared;

typedef struct {
    int me, in_fd, stop_fd, wake_fd, other_wake_fd;
    Stage *st;
    Sink out;
    Shared *sh;
    lc_packet *spare;               /* the buffer of the next read */
    long long wakeups;
    int error;                      /* errno that ended this direction, 0 */
    int python_error;               /* main thread: a signal handler raised */
} Dir;

static void wake(int fd) {
    uint64_t one = 1;
    if (write(fd, &one, sizeof one) < 0) { /* the other side reads it or has ended */ }
}

static void quit_both(Dir *d) {
    atomic_store(&d->sh->quit, 1);
    wake(d->other_wake_fd);
}

/* The loop of one direction: read in_fd, the stage, write out. Same rules as relay. */
static void *dir_loop(void *arg) {
    Dir *d = arg;
    Shared *sh = d->sh;
    struct pollfd fds[3] = {{d->in_fd, POLLIN, 0}, {d->wake_fd, POLLIN, 0}, {d->stop_fd, POLLIN, 0}};
    int nfds = d->stop_fd >= 0 ? 3 : 2;
    for (;;) {
        if (atomic_load(&sh->quit)) break;
        int64_t now = now_ns();
        long long before = departed(d->st);
        stage_pull(d->st, now, &d->out);
        if (departed(d->st) != before) atomic_store(&sh->last_move, now);
        int64_t t = stage_next(d->st), wait = -1;
        if (t >= 0) { wait = t - now_ns(); if (wait < 0) wait = 0; }
        int64_t drain = atomic_load(&sh->drain_until);
        if (drain >= 0) {
            int64_t left = drain - now_ns();
            if (left <= 0) break;
            atomic_store(&sh->idle[d->me], t < 0);
            if (t < 0 && atomic_load(&sh->idle[1 - d->me]) &&
                now_ns() - atomic_load(&sh->last_move) >= DRAIN_QUIET_NS)
                break;                  /* both drained and quiet */
            int64_t cap = t < 0 ? (DRAIN_QUIET_NS < left ? DRAIN_QUIET_NS : left) : left;
            if (wait < 0 || wait > cap) wait = cap;
        }
        struct timespec ts, *tsp = NULL;
        if (wait >= 0) { ts.tv_sec = wait / 1000000000LL; ts.tv_nsec = wait % 1000000000LL; tsp = &ts; }
        int r;
        if (d->me == 0) {
            Py_BEGIN_ALLOW_THREADS
            r = ppoll(fds, nfds, tsp, NULL);
            Py_END_ALLOW_THREADS
        } else {
            r = ppoll(fds, nfds, tsp, NULL);
        }
        if (r < 0) {
            if (errno != EINTR) { d->error = errno; quit_both(d); break; }
            if (d->me == 0 && PyErr_CheckSignals() < 0) { d->python_error = 1; quit_both(d); break; }
            continue;
        }
        d->wakeups++;
        if (r == 0) continue;
        if (fds[1].revents & POLLIN) break;     /* the other direction asks to end */
        if (nfds == 3 && (fds[2].revents & (POLLIN | POLLHUP | POLLERR))) {
            nfds = 2;
            int64_t expected = -1;
            atomic_compare_exchange_strong(&sh->drain_until, &expected, now_ns() + DRAIN_MAX_NS);
            continue;
        }
        if (fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) {
            d->error = ENODEV;          /* a TUN device removed from outside */
            quit_both(d);
            break;
        }
        now = now_ns();
        before = departed(d->st);
        stage_pull(d->st, now, &d->out);
        if ((fds[0].revents & POLLIN) && read_into(d->in_fd, d->st, now, &d->spare) > 0)
            atomic_store(&sh->last_move, now);
        else if (departed(d->st) != before)
            atomic_store(&sh->last_move, now);
    }
    atomic_store(&sh->idle[d->me], 1);
    lc_packet_free(d->spare);
    d->spare = NULL;
    if (d->me == 1) lc_pool_clear();    /* this thread ends: its pool goes with it */
    return NULL;
}

/* relay_threads(outer_fd, inner_fd, stop_fd, downlink, uplink): relay with the downlink in
   this thread and the uplink in a second one (each direction's kernel work - the
   receiver's TCP on writes inward, the sender's on writes outward - runs in its own
   thread, so a busy machine gives the shell two shares of CPU). Same results. */
static PyObject *fp_relay_threads(PyObject *self, PyObject *args) {
    int outer, inner, stop;
    Stage *down, *up;
    if (!PyArg_ParseTuple(args, "iiiO!O!", &outer, &inner, &stop, &StageType, &down, &StageType, &up))
        return NULL;
    Shared sh;
    atomic_init(&sh.drain_until, -1);
    atomic_init(&sh.last_move, now_ns());
    atomic_init(&sh.idle[0], 0);
    atomic_init(&sh.idle[1], 0);
    atomic_init(&sh.quit, 0);
    int w0 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), w1 = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w0 < 0 || w1 < 0) {
        if (w0 >= 0) close(w0);
        if (w1 >= 0) close(w1);
        return PyErr_NoMemory();
    }
    Dir d0 = {0, outer, stop, w0, w1, down, {inner, NULL, 0}, &sh, NULL, 0, 0, 0};
    Dir d1 = {1, inner, stop, w1, w0, up, {outer, NULL, 0}, &sh, NULL, 0, 0, 0};
    pthread_t th;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);     /* signals stay with this (Python's) thread */
    int rc = pthread_create(&th, NULL, dir_loop, &d1);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(w0); close(w1);
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    dir_loop(&d0);
    lc_pool_clear();
    wake(w1);                                   /* this direction ended: so does the other */
    atomic_store(&sh.quit, 1);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(th, NULL);
    Py_END_ALLOW_THREADS
    close(w0); close(w1);
    if (d0.python_error) return NULL;
    int err = d0.error ? d0.error : d1.error;
    if (err) { errno = err; return PyErr_SetFromErrno(PyExc_OSError); }
    return Py_BuildValue("{s:L,s:L,s:i}", "write_errors", d0.out.errors + d1.out.errors,
                         "wakeups", d0.wakeups + d1.wakeups, "threads", 2);
}

/* format_events(raw, base_ns) -> str: lc_format_events over the lc_event records in raw
   (take_events' bytes), made without Python's lock */
static PyObject *format_events(PyObject *self, PyObject *args) {
    Py_buffer raw;
    long long base_ns;
    if (!PyArg_ParseTuple(args, "y*L", &raw, &base_ns)) return NULL;
    if (raw.len % (Py_ssize_t)sizeof(lc_event)) {
        PyBuffer_Release(&raw);
        PyErr_SetString(PyExc_ValueError, "not a whole number of event records");
        return NULL;
    }
    size_t n = (size_t)raw.len / sizeof(lc_event), len = 0;
    char *text = malloc(n * LC_EVENT_LINE_MAX + 1);
    if (!text) { PyBuffer_Release(&raw); return PyErr_NoMemory(); }
    Py_BEGIN_ALLOW_THREADS
    len = lc_format_events((const lc_event *)raw.buf, n, (int64_t)base_ns, text);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&raw);
    PyObject *out = PyUnicode_New((Py_ssize_t)len, 127);
    if (out) memcpy(PyUnicode_DATA(out), text, len);
    free(text);
    return out;
}

static PyMethodDef methods[] = {
    {"passthrough", fp_passthrough, METH_NOARGS, "A stage that forwards at once."},
    {"delay", fp_delay, METH_VARARGS, "delay(delay_ns): fixed delay, never reorders."},
    {"loss", fp_loss, METH_VARARGS, "loss(rate, gilbert, p_gb, p_bg, loss_g, loss_b, seed)."},
    {"link", fp_link, METH_VARARGS,
     "link(capacity_float64_bytes, tti_ns_num, tti_ns_den, start_ns, queue_kind, packets, bytes[, aqm[, log]]): "
     "queue_kind 0-5 (infinite, droptail, drophead, codel, pie, l4s); aqm = (ecn, seed, a, b, c, d), "
     "see lc_link_aqm in replay/_linkcore.h; log: keep events and per-TTI rows (take_events, take_rows)."},
    {"workload", fp_workload, METH_VARARGS,
     "workload(start_ns, idle_ns, light_period_ns, train_t, train_d, pdo_len, pdo, heavy, heavy_period_ns, "
     "offset[, log]): the workload rule (lc_workload in replay/_linkcore.h); arrays are int64 bytes, times ns; "
     "log: keep each packet's arrival and departure events (take_events)."},
    {"relay", fp_relay, METH_VARARGS, "relay(outer_fd, inner_fd, stop_fd, downlink, uplink)."},
    {"format_events", format_events, METH_VARARGS,
     "format_events(raw, base_ns) -> str: take_events' records as Mahimahi-format log lines, times in ms "
     "since base_ns (replay/eventlog.py's event_lines is the reference)."},
    {"relay_threads", fp_relay_threads, METH_VARARGS,
     "relay_threads(outer_fd, inner_fd, stop_fd, downlink, uplink): one thread per direction."},
    {NULL}
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastpath",
                                    "The shells' per-packet path in C.", -1, methods};

PyMODINIT_FUNC PyInit__fastpath(void) {
    if (PyType_Ready(&StageType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&StageType);
    PyModule_AddObject(m, "Stage", (PyObject *)&StageType);
    return m;
}
