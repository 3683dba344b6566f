/*
 * airlink.replay._fastpath: the per-packet path of the shells in C.
 *
 * The same event loop and stages as replay/loop.py and replay/stages.py (pass, fixed
 * delay, Bernoulli/Gilbert loss, and a link with an infinite, droptail or drophead queue
 * drained by a byte-granular capacity trace), for the common configurations; the shells
 * fall back to the pure-Python loop for everything else (CoDel/PIE, logs, delay series,
 * --once). Semantics are identical to the Python stages (see their docstrings): TTI k's
 * capacity is served at the end of TTI k to the bytes queued by then, packets may be split
 * across TTIs, unused capacity is lost, fractional capacity carries its remainder.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_PACKET 65536
#define READ_BATCH 512
#define DRAIN_QUIET_NS 30000000LL
#define DRAIN_MAX_NS 1000000000LL

enum { K_PASS = 0, K_DELAY = 1, K_LOSS = 2, K_LINK = 3 };
enum { Q_INFINITE = 0, Q_DROPTAIL = 1, Q_DROPHEAD = 2 };

typedef struct Packet {
    struct Packet *next;
    int64_t t;          /* arrival (link) or release time (delay) */
    int len;
    unsigned char data[];
} Packet;

typedef struct {
    Packet *head, *tail;
    long long count, bytes;
} Fifo;

typedef struct {
    PyObject_HEAD
    int kind;
    /* counters */
    long long arr_p, arr_b, dep_p, dep_b, drop_p, drop_b;
    Fifo q;             /* delay: pending; link: queue; pass/loss: ready */
    /* delay */
    int64_t delay_ns, last_release;
    /* loss */
    double rate, p_gb, p_bg, loss_g, loss_b;
    int gilbert, bad;
    uint64_t rng;
    /* link */
    double *cap;
    Py_ssize_t ncap;
    long long tti_num, tti_den;   /* TTI length in ns = tti_num / tti_den */
    int64_t start_ns, end_k;
    long long k;
    double carry;
    long long capacity_bytes, served_bytes;
    int qkind;
    long long lim_packets, lim_bytes;
    Packet *in_service;
    long long in_service_left;
} Stage;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void fifo_push(Fifo *f, Packet *p) {
    p->next = NULL;
    if (f->tail) f->tail->next = p; else f->head = p;
    f->tail = p;
    f->count++;
    f->bytes += p->len;
}

static Packet *fifo_pop(Fifo *f) {
    Packet *p = f->head;
    if (!p) return NULL;
    f->head = p->next;
    if (!f->head) f->tail = NULL;
    f->count--;
    f->bytes -= p->len;
    return p;
}

static void fifo_clear(Fifo *f) {
    Packet *p;
    while ((p = fifo_pop(f))) free(p);
}

static uint64_t rng_next(uint64_t *s) {      /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static double rng_uniform(uint64_t *s) { return (rng_next(s) >> 11) * (1.0 / 9007199254740992.0); }

static int64_t boundary(Stage *s, long long k) {
    __int128 x = (__int128)k * s->tti_num;
    return s->start_ns + (int64_t)(x / s->tti_den);
}

/* ---- stage operations ------------------------------------------------------------ */

static void stage_push(Stage *s, Packet *p, int64_t now) {
    s->arr_p++;
    s->arr_b += p->len;
    switch (s->kind) {
    case K_PASS:
        fifo_push(&s->q, p);
        return;
    case K_DELAY: {
        int64_t t = now + s->delay_ns;
        if (t < s->last_release) t = s->last_release;
        s->last_release = t;
        p->t = t;
        fifo_push(&s->q, p);
        return;
    }
    case K_LOSS: {
        int lost;
        if (!s->gilbert) {
            lost = rng_uniform(&s->rng) < s->rate;
        } else {
            if (s->bad) { if (rng_uniform(&s->rng) < s->p_bg) s->bad = 0; }
            else if (rng_uniform(&s->rng) < s->p_gb) s->bad = 1;
            lost = rng_uniform(&s->rng) < (s->bad ? s->loss_b : s->loss_g);
        }
        if (lost) { s->drop_p++; s->drop_b += p->len; free(p); }
        else fifo_push(&s->q, p);
        return;
    }
    case K_LINK:
        p->t = now;
        if (s->qkind == Q_DROPTAIL &&
            ((s->lim_packets && s->q.count + 1 > s->lim_packets) ||
             (s->lim_bytes && s->q.bytes + p->len > s->lim_bytes))) {
            s->drop_p++; s->drop_b += p->len; free(p);
            return;
        }
        fifo_push(&s->q, p);
        if (s->qkind == Q_DROPHEAD) {
            while (s->q.head && ((s->lim_packets && s->q.count > s->lim_packets) ||
                                 (s->lim_bytes && s->q.bytes > s->lim_bytes))) {
                Packet *old = fifo_pop(&s->q);
                s->drop_p++; s->drop_b += old->len; free(old);
            }
        }
        return;
    }
}

/* Write every packet due by `now` to fd; returns the number of write errors. */
static long long stage_pull(Stage *s, int64_t now, int fd) {
    long long errors = 0;
    Packet *p;
#define EMIT(pk) do { \
        s->dep_p++; s->dep_b += (pk)->len; \
        if (write(fd, (pk)->data, (pk)->len) < 0) errors++; \
        free(pk); } while (0)
    switch (s->kind) {
    case K_PASS:
    case K_LOSS:
        while ((p = fifo_pop(&s->q))) EMIT(p);
        break;
    case K_DELAY:
        while (s->q.head && s->q.head->t <= now) { p = fifo_pop(&s->q); EMIT(p); }
        break;
    case K_LINK:
        while (s->end_k <= now) {
            double total = s->carry + s->cap[s->k % s->ncap];
            double budget_d = floor(total);
            long long left = (long long)budget_d;
            s->carry = total - budget_d;
            s->capacity_bytes += left;
            while (left > 0) {
                if (!s->in_service) {
                    s->in_service = fifo_pop(&s->q);
                    if (!s->in_service) break;
                    s->in_service_left = s->in_service->len;
                }
                long long take = s->in_service_left < left ? s->in_service_left : left;
                s->in_service_left -= take;
                left -= take;
                s->served_bytes += take;
                if (s->in_service_left == 0) {
                    p = s->in_service;
                    s->in_service = NULL;
                    EMIT(p);
                }
            }
            s->k++;
            s->end_k = boundary(s, s->k + 1);
        }
        break;
    }
#undef EMIT
    return errors;
}

/* Next time the stage has something to give, or -1 when idle. */
static int64_t stage_next(Stage *s) {
    switch (s->kind) {
    case K_DELAY:
        return s->q.head ? s->q.head->t : -1;
    case K_LINK:
        return (s->q.head || s->in_service) ? s->end_k : -1;
    default:
        return s->q.head ? 0 : -1;
    }
}

/* ---- the Python type -------------------------------------------------------------- */

static void Stage_dealloc(Stage *s) {
    fifo_clear(&s->q);
    free(s->in_service);
    PyMem_Free(s->cap);
    Py_TYPE(s)->tp_free((PyObject *)s);
}

static PyObject *Stage_stats(Stage *s, PyObject *Py_UNUSED(ignored)) {
    static const char *names[] = {"pass", "delay", "loss", "link"};
    long long qb = s->q.bytes, qp = s->q.count;
    if (s->kind == K_LINK && s->in_service) { qb += s->in_service_left; qp += 1; }
    PyObject *d = Py_BuildValue(
        "{s:s,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "stage", names[s->kind],
        "arrivals_packets", s->arr_p, "arrivals_bytes", s->arr_b,
        "departures_packets", s->dep_p, "departures_bytes", s->dep_b,
        "drops_packets", s->drop_p, "drops_bytes", s->drop_b,
        "queued_packets", qp, "queued_bytes", qb);
    if (d && s->kind == K_LINK) {
        PyObject *v = PyLong_FromLongLong(s->capacity_bytes);
        PyDict_SetItemString(d, "capacity_bytes", v); Py_XDECREF(v);
        v = PyLong_FromLongLong(s->k);
        PyDict_SetItemString(d, "ttis", v); Py_XDECREF(v);
    }
    return d;
}

static PyMethodDef Stage_methods[] = {
    {"stats", (PyCFunction)Stage_stats, METH_NOARGS, "Counters as the Python stages report them."},
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
    int qkind;
    if (!PyArg_ParseTuple(args, "y*LLLiLL", &cap, &num, &den, &start, &qkind, &packets, &bytes))
        return NULL;
    if (cap.len < (Py_ssize_t)sizeof(double) || cap.len % sizeof(double) || num <= 0 || den <= 0) {
        PyBuffer_Release(&cap);
        PyErr_SetString(PyExc_ValueError, "capacity must be float64 bytes; TTI positive");
        return NULL;
    }
    Stage *s = new_stage(K_LINK);
    if (!s) { PyBuffer_Release(&cap); return NULL; }
    s->cap = PyMem_Malloc(cap.len);
    if (!s->cap) { PyBuffer_Release(&cap); Py_DECREF(s); return PyErr_NoMemory(); }
    memcpy(s->cap, cap.buf, cap.len);
    s->ncap = cap.len / sizeof(double);
    PyBuffer_Release(&cap);
    s->tti_num = num; s->tti_den = den; s->start_ns = start;
    s->qkind = qkind; s->lim_packets = packets; s->lim_bytes = bytes;
    s->end_k = boundary(s, 1);
    return (PyObject *)s;
}

static long long read_into(int fd, Stage *s, int64_t now) {
    long long n = 0;
    static unsigned char buf[MAX_PACKET];
    for (int i = 0; i < READ_BATCH; i++) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0) break;               /* EAGAIN: drained */
        Packet *p = malloc(sizeof(Packet) + r);
        if (!p) break;
        p->len = (int)r;
        memcpy(p->data, buf, r);
        stage_push(s, p, now);
        n++;
    }
    return n;
}

/* relay(outer_fd, inner_fd, stop_fd, downlink, uplink) -> {"write_errors", "wakeups"} */
static PyObject *fp_relay(PyObject *self, PyObject *args) {
    int outer, inner, stop;
    Stage *down, *up;
    if (!PyArg_ParseTuple(args, "iiiO!O!", &outer, &inner, &stop, &StageType, &down, &StageType, &up))
        return NULL;
    long long errors = 0, wakeups = 0;
    int64_t drain_until = -1;
    struct pollfd fds[3] = {{outer, POLLIN, 0}, {inner, POLLIN, 0}, {stop, POLLIN, 0}};
    int nfds = stop >= 0 ? 3 : 2;
    for (;;) {
        int64_t now = now_ns();
        errors += stage_pull(down, now, inner);
        errors += stage_pull(up, now, outer);
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
        errors += stage_pull(down, now, inner);
        errors += stage_pull(up, now, outer);
        if (fds[0].revents & POLLIN) read_into(outer, down, now);
        if (fds[1].revents & POLLIN) read_into(inner, up, now);
    }
    return Py_BuildValue("{s:L,s:L}", "write_errors", errors, "wakeups", wakeups);
}

static PyMethodDef methods[] = {
    {"passthrough", fp_passthrough, METH_NOARGS, "A stage that forwards at once."},
    {"delay", fp_delay, METH_VARARGS, "delay(delay_ns): fixed delay, never reorders."},
    {"loss", fp_loss, METH_VARARGS, "loss(rate, gilbert, p_gb, p_bg, loss_g, loss_b, seed)."},
    {"link", fp_link, METH_VARARGS,
     "link(capacity_float64_bytes, tti_ns_num, tti_ns_den, start_ns, queue_kind, packets, bytes)."},
    {"relay", fp_relay, METH_VARARGS, "relay(outer_fd, inner_fd, stop_fd, downlink, uplink)."},
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
