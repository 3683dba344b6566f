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
 *
 * Offload mode (vnet_hdr(10) on both stages, TUN devices opened with IFF_VNET_HDR and
 * TUNSETOFFLOAD): every packet carries a 10-byte virtio_net_hdr in front, and a TCP or
 * UDP GSO super-packet (up to 64 KB, gso_size bytes of payload per segment) crosses user
 * space once. Every stage treats it as the sequence of segments the kernel would have
 * sent without offload (each segment = the IP/L4 headers + its gso_size slice of the
 * payload), so counters, the loss draws, the queue limits and the link's byte-granular
 * service are exactly those of plain mode: a segment leaves the link when its last byte
 * is served. Where a TTI's budget, a queue limit or a loss draw cuts a super-packet, the
 * shell cuts it into pieces of whole segments (make_piece: IP total length / payload
 * length, IPv4 ID + index and header checksum, TCP sequence number, FIN/PSH only on the
 * last piece and CWR only on the first, UDP length, and the L4 checksum left to the
 * kernel as a partial checksum over the pseudo-header, VIRTIO_NET_HDR_F_NEEDS_CSUM).
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

#define READ_BUFFER (1 << 17)   /* a 64 KB super-packet and its header fit with room */
#define READ_BATCH 512
#define DRAIN_QUIET_NS 30000000LL
#define DRAIN_MAX_NS 1000000000LL

enum { K_PASS = 0, K_DELAY = 1, K_LOSS = 2, K_LINK = 3 };
enum { Q_INFINITE = 0, Q_DROPTAIL = 1, Q_DROPHEAD = 2 };

/* struct virtio_net_hdr (little-endian on the hosts we run on) */
#define VNET_F_NEEDS_CSUM 1
#define VNET_GSO_NONE 0
#define VNET_GSO_TCPV4 1
#define VNET_GSO_TCPV6 4
#define VNET_GSO_UDP_L4 5
#define VNET_GSO_ECN 0x80

typedef struct Packet {
    struct Packet *next;
    int64_t t;          /* arrival (link) or release time (delay) */
    int len;            /* bytes in data: the vnet header (off bytes) and the IP packet */
    int off;            /* vnet header size (0 in plain mode) */
    int nseg;           /* segments (1 unless a GSO super-packet) */
    int lo;             /* segments [0, lo) already left or were dropped */
    int ipl, hl;        /* IP header length; IP + L4 header length (0 when nseg == 1) */
    int gso, plen;      /* payload bytes per segment; payload bytes in all */
    unsigned char data[];
} Packet;

typedef struct {
    Packet *head, *tail;
    long long count, bytes;     /* segments and their plain-mode bytes */
} Fifo;

typedef struct {
    PyObject_HEAD
    int kind;
    int vnet;           /* virtio_net_hdr size in front of every packet (0: plain) */
    /* counters (segments and plain-mode bytes) */
    long long arr_p, arr_b, dep_p, dep_b, drop_p, drop_b;
    long long superpackets, pieces;     /* GSO arrivals; pieces cut out of them */
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
    Packet *in_service; /* its segment `seg` is served; [lo, seg) done, not yet emitted */
    int seg;
    long long seg_left; /* bytes of segment `seg` still to serve; 0: not started */
    unsigned char keep[65536];  /* per-segment verdicts of one arrival (loss, droptail) */
} Stage;

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

/* ---- segments ---------------------------------------------------------------------- */

static inline unsigned rd16(const unsigned char *p) { return (p[0] << 8) | p[1]; }
static inline void wr16(unsigned char *p, unsigned v) { p[0] = v >> 8; p[1] = v & 0xff; }
static inline unsigned le16(const unsigned char *p) { return p[0] | (p[1] << 8); }
static inline void wle16(unsigned char *p, unsigned v) { p[0] = v & 0xff; p[1] = v >> 8; }

/* Plain-mode bytes of segments [a, b): each carries the headers and its payload slice. */
static inline long long wire(const Packet *p, int a, int b) {
    long long end = (long long)b * p->gso;
    if (end > p->plen) end = p->plen;
    return (long long)(b - a) * p->hl + end - (long long)a * p->gso;
}

/* Fill in the segment layout of a packet just read (data, len, off set). A packet that
   is not a TCP/UDP GSO super-packet the shell can cut is one segment of its IP length. */
static void parse_segments(Packet *p) {
    int iplen = p->len - p->off;
    p->nseg = 1; p->lo = 0; p->ipl = 0; p->hl = 0; p->gso = iplen; p->plen = iplen;
    if (!p->off || iplen < 20) return;
    const unsigned char *h = p->data, *ip = p->data + p->off;
    int type = h[1] & ~VNET_GSO_ECN, gso = le16(h + 4);
    if (type == VNET_GSO_NONE || gso <= 0) return;
    int ipl, proto, total;
    if ((ip[0] >> 4) == 4) {
        ipl = (ip[0] & 15) * 4; proto = ip[9]; total = rd16(ip + 2);
    } else if ((ip[0] >> 4) == 6 && iplen >= 40) {
        ipl = 40; proto = ip[6]; total = 40 + rd16(ip + 4);
    } else return;
    if (total != iplen || ipl < 20 || ipl + 8 > iplen) return;
    int l4;
    if (proto == 6 && (type == VNET_GSO_TCPV4 || type == VNET_GSO_TCPV6) && ipl + 20 <= iplen)
        l4 = (ip[ipl + 12] >> 4) * 4;
    else if (proto == 17 && type == VNET_GSO_UDP_L4) l4 = 8;
    else return;
    if (l4 < 8 || ipl + l4 > iplen) return;
    int plen = iplen - ipl - l4;
    int n = (plen + gso - 1) / gso;
    if (n <= 1) return;
    p->nseg = n; p->ipl = ipl; p->hl = ipl + l4; p->gso = gso; p->plen = plen;
}

static uint32_t sum16(const unsigned char *p, int n, uint32_t s) {
    for (; n > 1; n -= 2, p += 2) s += rd16(p);
    if (n) s += p[0] << 8;
    return s;
}

static unsigned fold(uint32_t s) {
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    return s;
}

/* A new packet holding segments [a, b) of p, as the kernel would have cut them. */
static Packet *make_piece(const Packet *p, int a, int b) {
    long long pa = (long long)a * p->gso, pb = (long long)b * p->gso;
    if (pb > p->plen) pb = p->plen;
    int n = (int)(pb - pa), len = p->off + p->hl + n;
    Packet *q = malloc(sizeof(Packet) + len);
    if (!q) return NULL;
    *q = *p;
    q->next = NULL;
    q->len = len; q->nseg = b - a; q->lo = 0; q->plen = n;
    if (q->nseg == 1) { q->hl = 0; q->ipl = 0; q->gso = p->hl + n; q->plen = p->hl + n; }
    memcpy(q->data, p->data, p->off + p->hl);
    memcpy(q->data + p->off + p->hl, p->data + p->off + p->hl + pa, n);
    unsigned char *h = q->data, *ip = q->data + p->off, *l4 = ip + p->ipl;
    int tcp = ip[(ip[0] >> 4) == 4 ? 9 : 6] == 6;
    int l4len = p->hl - p->ipl + n;
    h[0] = VNET_F_NEEDS_CSUM;
    if (b - a == 1) { h[1] = VNET_GSO_NONE; wle16(h + 4, 0); }
    wle16(h + 2, p->hl);
    wle16(h + 6, p->ipl);
    wle16(h + 8, tcp ? 16 : 6);
    uint32_t ps;
    if ((ip[0] >> 4) == 4) {
        wr16(ip + 2, p->hl + n);
        wr16(ip + 4, (rd16(ip + 4) + a) & 0xffff);
        wr16(ip + 10, 0);
        wr16(ip + 10, ~fold(sum16(ip, p->ipl, 0)) & 0xffff);
        ps = sum16(ip + 12, 8, 0) + ip[9] + l4len;
    } else {
        wr16(ip + 4, l4len);
        ps = sum16(ip + 8, 32, 0) + ip[6] + l4len;
    }
    if (tcp) {
        uint32_t seq = ((uint32_t)ip[p->ipl + 4] << 24) | (ip[p->ipl + 5] << 16) | (ip[p->ipl + 6] << 8) | ip[p->ipl + 7];
        seq += (uint32_t)pa;
        l4[4] = seq >> 24; l4[5] = seq >> 16; l4[6] = seq >> 8; l4[7] = seq;
        if (b < p->nseg) l4[13] &= ~0x09;      /* FIN, PSH: the last piece only */
        if (a > 0) l4[13] &= ~0x80;            /* CWR: the first piece only */
        wr16(l4 + 16, fold(ps));
    } else {
        wr16(l4 + 4, l4len);
        wr16(l4 + 6, fold(ps));
    }
    return q;
}

/* ---- queues ------------------------------------------------------------------------ */

static void fifo_push(Fifo *f, Packet *p) {
    p->next = NULL;
    if (f->tail) f->tail->next = p; else f->head = p;
    f->tail = p;
    f->count += p->nseg - p->lo;
    f->bytes += wire(p, p->lo, p->nseg);
}

static void fifo_push_front(Fifo *f, Packet *p) {
    p->next = f->head;
    f->head = p;
    if (!f->tail) f->tail = p;
    f->count += p->nseg - p->lo;
    f->bytes += wire(p, p->lo, p->nseg);
}

static Packet *fifo_pop(Fifo *f) {
    Packet *p = f->head;
    if (!p) return NULL;
    f->head = p->next;
    if (!f->head) f->tail = NULL;
    f->count -= p->nseg - p->lo;
    f->bytes -= wire(p, p->lo, p->nseg);
    return p;
}

static void fifo_clear(Fifo *f) {
    Packet *p;
    while ((p = fifo_pop(f))) free(p);
}

/* Push the segments of p marked in keep[0..nseg) as few pieces as possible; drops the
   others (counted by the caller). Takes ownership of p. */
static void push_kept(Stage *s, Fifo *f, Packet *p, const unsigned char *keep) {
    int n = p->nseg, a = 0;
    while (a < n && !keep[a]) a++;
    int b = a;
    while (b < n && keep[b]) b++;
    if (a == 0 && b == n) { fifo_push(f, p); return; }
    while (a < n) {
        Packet *q = make_piece(p, a, b);
        if (q) { fifo_push(f, q); s->pieces++; }
        a = b;
        while (a < n && !keep[a]) a++;
        b = a;
        while (b < n && keep[b]) b++;
    }
    free(p);
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

/* Segments of the link's packet in service that plain mode would still hold in its
   queue (all after `seg`, and `seg` itself while not started), and their bytes. */
static void service_tail(Stage *s, long long *np, long long *nb) {
    Packet *p = s->in_service;
    *np = 0; *nb = 0;
    if (!p) return;
    int first = s->seg + (s->seg_left > 0);
    *np = p->nseg - first;
    *nb = wire(p, first, p->nseg);
}

/* Give the queued segments of the packet in service back to the queue's head (drophead
   may drop them, as plain mode would): the started segment stays in service alone. */
static void detach_service_tail(Stage *s) {
    Packet *p = s->in_service;
    if (!p) return;
    if (s->seg_left == 0) {             /* nothing started: all of it is queued again */
        p->lo = s->seg;
        s->in_service = NULL;
        fifo_push_front(&s->q, p);
        return;
    }
    if (s->seg + 1 >= p->nseg) return;
    Packet *cur = make_piece(p, s->seg, s->seg + 1);
    if (!cur) return;
    s->pieces++;
    p->lo = s->seg + 1;
    fifo_push_front(&s->q, p);
    s->in_service = cur;
    s->seg = 0;
}

static void stage_push(Stage *s, Packet *p, int64_t now) {
    int n = p->nseg;
    s->superpackets += n > 1;
    s->arr_p += n;
    s->arr_b += wire(p, 0, n);
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
        int lost_any = 0;
        for (int i = 0; i < n; i++) {      /* one draw (or chain step) per segment */
            int lost;
            if (!s->gilbert) {
                lost = rng_uniform(&s->rng) < s->rate;
            } else {
                if (s->bad) { if (rng_uniform(&s->rng) < s->p_bg) s->bad = 0; }
                else if (rng_uniform(&s->rng) < s->p_gb) s->bad = 1;
                lost = rng_uniform(&s->rng) < (s->bad ? s->loss_b : s->loss_g);
            }
            s->keep[i] = !lost;
            if (lost) { lost_any = 1; s->drop_p++; s->drop_b += wire(p, i, i + 1); }
        }
        if (!lost_any) fifo_push(&s->q, p);
        else push_kept(s, &s->q, p, s->keep);
        return;
    }
    case K_LINK: {
        p->t = now;
        long long tp, tb;
        service_tail(s, &tp, &tb);
        if (s->qkind == Q_DROPTAIL) {
            long long count = s->q.count + tp, bytes = s->q.bytes + tb;
            int dropped = 0;
            for (int i = 0; i < n; i++) {  /* segment by segment, as they would arrive */
                long long w = wire(p, i, i + 1);
                int over = (s->lim_packets && count + 1 > s->lim_packets) ||
                           (s->lim_bytes && bytes + w > s->lim_bytes);
                s->keep[i] = !over;
                if (over) { dropped = 1; s->drop_p++; s->drop_b += w; }
                else { count++; bytes += w; }
            }
            if (!dropped) fifo_push(&s->q, p);
            else push_kept(s, &s->q, p, s->keep);
            return;
        }
        fifo_push(&s->q, p);
        if (s->qkind == Q_DROPHEAD) {
            /* dropping from the head after the whole super-packet is the same as after
               each of its segments: the first kept segment only moves forward */
            while ((s->lim_packets && s->q.count + tp > s->lim_packets) ||
                   (s->lim_bytes && s->q.bytes + tb > s->lim_bytes)) {
                if (tp) { detach_service_tail(s); tp = tb = 0; continue; }
                Packet *h = s->q.head;
                long long w = wire(h, h->lo, h->lo + 1);
                s->drop_p++; s->drop_b += w;
                if (h->lo + 1 == h->nseg) {
                    free(fifo_pop(&s->q));
                } else {
                    h->lo++;
                    s->q.count--; s->q.bytes -= w;
                }
            }
        }
        return;
    }
    }
}

static void sink_write(Sink *out, const unsigned char *buf, int len) {
    if (out->list) {
        PyObject *b = PyBytes_FromStringAndSize((const char *)buf, len);
        if (!b || PyList_Append(out->list, b) < 0) out->errors++;
        Py_XDECREF(b);
    } else if (write(out->fd, buf, len) < 0) {
        out->errors++;
    }
}

/* Segments [a, b) of p leave now (p itself when that is all of it; p is not freed). */
static void emit(Stage *s, Packet *p, int a, int b, Sink *out) {
    s->dep_p += b - a;
    s->dep_b += wire(p, a, b);
    if (a == 0 && b == p->nseg) {
        sink_write(out, p->data, p->len);
        return;
    }
    Packet *q = make_piece(p, a, b);
    if (!q) { out->errors++; return; }
    s->pieces++;
    sink_write(out, q->data, q->len);
    free(q);
}

/* Write every packet due by `now` to the sink. */
static void stage_pull(Stage *s, int64_t now, Sink *out) {
    Packet *p;
    switch (s->kind) {
    case K_PASS:
    case K_LOSS:
        while ((p = fifo_pop(&s->q))) { emit(s, p, p->lo, p->nseg, out); free(p); }
        break;
    case K_DELAY:
        while (s->q.head && s->q.head->t <= now) {
            p = fifo_pop(&s->q);
            emit(s, p, p->lo, p->nseg, out);
            free(p);
        }
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
                    s->seg = s->in_service->lo;
                    s->seg_left = 0;
                }
                p = s->in_service;
                if (s->seg_left == 0) s->seg_left = wire(p, s->seg, s->seg + 1);
                long long take = s->seg_left < left ? s->seg_left : left;
                s->seg_left -= take;
                left -= take;
                s->served_bytes += take;
                if (s->seg_left == 0 && ++s->seg == p->nseg) {
                    emit(s, p, p->lo, p->nseg, out);
                    free(p);
                    s->in_service = NULL;
                }
            }
            /* segments of the packet in service done in this TTI leave at its end too */
            p = s->in_service;
            if (p && s->seg > p->lo) {
                emit(s, p, p->lo, s->seg, out);
                p->lo = s->seg;
            }
            s->k++;
            s->end_k = boundary(s, s->k + 1);
        }
        break;
    }
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

/* A packet from buf (len bytes, the vnet header first when the stage has one). */
static Packet *new_packet(Stage *s, const unsigned char *buf, Py_ssize_t len) {
    if (len < s->vnet) return NULL;
    Packet *p = malloc(sizeof(Packet) + len);
    if (!p) return NULL;
    p->len = (int)len;
    p->off = s->vnet;
    memcpy(p->data, buf, len);
    parse_segments(p);
    return p;
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
    if (s->kind == K_LINK && s->in_service) {
        long long tp, tb;
        service_tail(s, &tp, &tb);
        qp += tp + (s->seg_left > 0);
        qb += tb + s->seg_left;
    }
    PyObject *d = Py_BuildValue(
        "{s:s,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}", "stage", names[s->kind],
        "arrivals_packets", s->arr_p, "arrivals_bytes", s->arr_b,
        "departures_packets", s->dep_p, "departures_bytes", s->dep_b,
        "drops_packets", s->drop_p, "drops_bytes", s->drop_b,
        "queued_packets", qp, "queued_bytes", qb);
    if (d && s->vnet) {
        PyObject *v = PyLong_FromLongLong(s->superpackets);
        PyDict_SetItemString(d, "superpackets", v); Py_XDECREF(v);
        v = PyLong_FromLongLong(s->pieces);
        PyDict_SetItemString(d, "pieces_cut", v); Py_XDECREF(v);
    }
    if (d && s->kind == K_LINK) {
        PyObject *v = PyLong_FromLongLong(s->capacity_bytes);
        PyDict_SetItemString(d, "capacity_bytes", v); Py_XDECREF(v);
        v = PyLong_FromLongLong(s->k);
        PyDict_SetItemString(d, "ttis", v); Py_XDECREF(v);
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
    if (s->arr_p) {
        PyErr_SetString(PyExc_ValueError, "the vnet header size is set before the first packet");
        return NULL;
    }
    s->vnet = (int)n;
    Py_RETURN_NONE;
}

static PyObject *Stage_push(Stage *s, PyObject *args) {
    Py_buffer b;
    long long now;
    if (!PyArg_ParseTuple(args, "y*L", &b, &now)) return NULL;
    Packet *p = new_packet(s, b.buf, b.len);
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

static PyMethodDef Stage_methods[] = {
    {"stats", (PyCFunction)Stage_stats, METH_NOARGS, "Counters as the Python stages report them."},
    {"vnet_hdr", (PyCFunction)Stage_vnet_hdr, METH_O,
     "vnet_hdr(size): 10 = every packet starts with a virtio_net_hdr (offload mode), 0 = plain."},
    {"push", (PyCFunction)Stage_push, METH_VARARGS, "push(packet, now_ns): a packet arrived (as relay reads it)."},
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

static long long read_into(int fd, Stage *s, int64_t now, unsigned char *buf) {
    long long n = 0;
    for (int i = 0; i < READ_BATCH; i++) {
        ssize_t r = read(fd, buf, READ_BUFFER);
        if (r < 0) break;               /* EAGAIN: drained */
        Packet *p = new_packet(s, buf, r);
        if (!p) continue;
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
    long long wakeups = 0;
    static unsigned char buf[READ_BUFFER];
    Sink to_inner = {inner, NULL, 0}, to_outer = {outer, NULL, 0};
    int64_t drain_until = -1;
    struct pollfd fds[3] = {{outer, POLLIN, 0}, {inner, POLLIN, 0}, {stop, POLLIN, 0}};
    int nfds = stop >= 0 ? 3 : 2;
    for (;;) {
        int64_t now = now_ns();
        stage_pull(down, now, &to_inner);
        stage_pull(up, now, &to_outer);
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
        if (fds[0].revents & POLLIN) read_into(outer, down, now, buf);
        if (fds[1].revents & POLLIN) read_into(inner, up, now, buf);
    }
    return Py_BuildValue("{s:L,s:L}", "write_errors", to_inner.errors + to_outer.errors, "wakeups", wakeups);
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
    unsigned char *buf;
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
        long long before = d->st->dep_p;
        stage_pull(d->st, now, &d->out);
        if (d->st->dep_p != before) atomic_store(&sh->last_move, now);
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
        before = d->st->dep_p;
        stage_pull(d->st, now, &d->out);
        if ((fds[0].revents & POLLIN) && read_into(d->in_fd, d->st, now, d->buf) > 0)
            atomic_store(&sh->last_move, now);
        else if (d->st->dep_p != before)
            atomic_store(&sh->last_move, now);
    }
    atomic_store(&sh->idle[d->me], 1);
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
    unsigned char *buf0 = malloc(READ_BUFFER), *buf1 = malloc(READ_BUFFER);
    if (w0 < 0 || w1 < 0 || !buf0 || !buf1) {
        if (w0 >= 0) close(w0);
        if (w1 >= 0) close(w1);
        free(buf0); free(buf1);
        return PyErr_NoMemory();
    }
    Dir d0 = {0, outer, stop, w0, w1, down, {inner, NULL, 0}, &sh, buf0, 0, 0, 0};
    Dir d1 = {1, inner, stop, w1, w0, up, {outer, NULL, 0}, &sh, buf1, 0, 0, 0};
    pthread_t th;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);     /* signals stay with this (Python's) thread */
    int rc = pthread_create(&th, NULL, dir_loop, &d1);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        close(w0); close(w1); free(buf0); free(buf1);
        errno = rc;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    dir_loop(&d0);
    wake(w1);                                   /* this direction ended: so does the other */
    atomic_store(&sh.quit, 1);
    Py_BEGIN_ALLOW_THREADS
    pthread_join(th, NULL);
    Py_END_ALLOW_THREADS
    close(w0); close(w1); free(buf0); free(buf1);
    if (d0.python_error) return NULL;
    int err = d0.error ? d0.error : d1.error;
    if (err) { errno = err; return PyErr_SetFromErrno(PyExc_OSError); }
    return Py_BuildValue("{s:L,s:L,s:i}", "write_errors", d0.out.errors + d1.out.errors,
                         "wakeups", d0.wakeups + d1.wakeups, "threads", 2);
}

static PyMethodDef methods[] = {
    {"passthrough", fp_passthrough, METH_NOARGS, "A stage that forwards at once."},
    {"delay", fp_delay, METH_VARARGS, "delay(delay_ns): fixed delay, never reorders."},
    {"loss", fp_loss, METH_VARARGS, "loss(rate, gilbert, p_gb, p_bg, loss_g, loss_b, seed)."},
    {"link", fp_link, METH_VARARGS,
     "link(capacity_float64_bytes, tti_ns_num, tti_ns_den, start_ns, queue_kind, packets, bytes)."},
    {"relay", fp_relay, METH_VARARGS, "relay(outer_fd, inner_fd, stop_fd, downlink, uplink)."},
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
