/*
 * The link core of the shells (see _linkcore.h): packets and their GSO segments, the FIFO,
 * the queue disciplines, the byte-granular server, the TTI grid and the logged events.
 *
 * Semantics are those of the Python stages (replay/queues.py, replay/server.py): TTI k's
 * capacity is served at the end of TTI k to the bytes queued by then, a packet may be split
 * across TTIs and leaves with its last byte, unused capacity is lost, fractional capacity
 * carries its remainder. The packet in service is outside the queue: its started segment
 * counts toward no limit (its segments not yet started do, as in plain mode).
 *
 * Cutting a GSO super-packet into pieces (lc_piece): IP total length / payload length,
 * IPv4 ID + index and header checksum, TCP sequence number, FIN/PSH only on the last piece
 * and CWR only on the first, UDP length, and the L4 checksum left to the kernel as a
 * partial checksum over the pseudo-header (VIRTIO_NET_HDR_F_NEEDS_CSUM).
 */
#include "_linkcore.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* struct virtio_net_hdr (little-endian on the hosts we run on) */
#define VNET_F_NEEDS_CSUM 1
#define VNET_GSO_NONE 0
#define VNET_GSO_TCPV4 1
#define VNET_GSO_TCPV6 4
#define VNET_GSO_UDP_L4 5
#define VNET_GSO_ECN 0x80

static inline unsigned rd16(const unsigned char *p) { return (p[0] << 8) | p[1]; }
static inline void wr16(unsigned char *p, unsigned v) { p[0] = v >> 8; p[1] = v & 0xff; }
static inline unsigned le16(const unsigned char *p) { return p[0] | (p[1] << 8); }
static inline void wle16(unsigned char *p, unsigned v) { p[0] = v & 0xff; p[1] = v >> 8; }

/* ---- packets ---------------------------------------------------------------------- */

/* The segment layout of a packet just read. A packet that is not a TCP/UDP GSO
   super-packet the core can cut is one segment of its IP length. */
static void parse_segments(lc_packet *p) {
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

lc_packet *lc_packet_new(const unsigned char *buf, long len, int off) {
    if (len < off) return NULL;
    lc_packet *p = malloc(sizeof(lc_packet) + len);
    if (!p) return NULL;
    p->next = NULL;
    p->t = 0;
    p->len = (int)len;
    p->off = off;
    memcpy(p->data, buf, len);
    parse_segments(p);
    return p;
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

lc_packet *lc_piece(const lc_packet *p, int a, int b) {
    long long pa = (long long)a * p->gso, pb = (long long)b * p->gso;
    if (pb > p->plen) pb = p->plen;
    int n = (int)(pb - pa), len = p->off + p->hl + n;
    lc_packet *q = malloc(sizeof(lc_packet) + len);
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

/* ---- FIFO ------------------------------------------------------------------------- */

void lc_fifo_push(lc_fifo *f, lc_packet *p) {
    p->next = NULL;
    if (f->tail) f->tail->next = p; else f->head = p;
    f->tail = p;
    f->count += p->nseg - p->lo;
    f->bytes += lc_wire(p, p->lo, p->nseg);
}

void lc_fifo_push_front(lc_fifo *f, lc_packet *p) {
    p->next = f->head;
    f->head = p;
    if (!f->tail) f->tail = p;
    f->count += p->nseg - p->lo;
    f->bytes += lc_wire(p, p->lo, p->nseg);
}

lc_packet *lc_fifo_pop(lc_fifo *f) {
    lc_packet *p = f->head;
    if (!p) return NULL;
    f->head = p->next;
    if (!f->head) f->tail = NULL;
    f->count -= p->nseg - p->lo;
    f->bytes -= lc_wire(p, p->lo, p->nseg);
    return p;
}

void lc_fifo_clear(lc_fifo *f) {
    lc_packet *p;
    while ((p = lc_fifo_pop(f))) free(p);
}

long long lc_push_kept(lc_fifo *f, lc_packet *p, const unsigned char *keep) {
    int n = p->nseg, a = 0;
    long long pieces = 0;
    while (a < n && !keep[a]) a++;
    int b = a;
    while (b < n && keep[b]) b++;
    if (a == 0 && b == n) { lc_fifo_push(f, p); return 0; }
    while (a < n) {
        lc_packet *q = lc_piece(p, a, b);
        if (q) { lc_fifo_push(f, q); pieces++; }
        a = b;
        while (a < n && !keep[a]) a++;
        b = a;
        while (b < n && keep[b]) b++;
    }
    free(p);
    return pieces;
}

/* ---- logged events ---------------------------------------------------------------- */

void lc_log_add(lc_log *l, int kind, int64_t t, long long len, long long x) {
    if (!l) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 1024;
        lc_event *e = realloc(l->ev, cap * sizeof(lc_event));
        if (!e) { l->lost++; return; }
        l->ev = e;
        l->cap = cap;
    }
    lc_event *e = &l->ev[l->n++];
    e->t = t; e->x = x; e->kind = kind; e->len = (int32_t)len;
}

void lc_log_free(lc_log *l) {
    free(l->ev);
    l->ev = NULL;
    l->n = l->cap = 0;
}

/* ---- a link ----------------------------------------------------------------------- */

void lc_link_init(lc_link *l, int qkind, long long lim_p, long long lim_b) {
    memset(l, 0, sizeof *l);
    l->qkind = qkind;
    l->lim_p = qkind == LC_INFINITE ? 0 : lim_p;
    l->lim_b = qkind == LC_INFINITE ? 0 : lim_b;
}

void lc_link_free(lc_link *l) {
    lc_fifo_clear(&l->q);
    free(l->svc);
    l->svc = NULL;
}

int lc_busy(const lc_link *l) { return l->svc || l->q.head; }

/* Segments of the packet in service that plain mode would still hold in its queue (all
   after seg, and seg itself while not started), and their bytes. */
static void service_tail(const lc_link *l, long long *np, long long *nb) {
    const lc_packet *p = l->svc;
    *np = 0; *nb = 0;
    if (!p) return;
    int first = l->seg + (l->seg_left > 0);
    *np = p->nseg - first;
    *nb = lc_wire(p, first, p->nseg);
}

void lc_backlog(const lc_link *l, long long *bytes, long long *packets) {
    long long tp, tb;
    service_tail(l, &tp, &tb);
    *packets = l->q.count + tp + (l->seg_left > 0);
    *bytes = l->q.bytes + tb + l->seg_left;
}

/* Give the queued segments of the packet in service back to the queue's head (drophead
   may drop them, as plain mode would): the started segment stays in service alone. */
static void detach_service_tail(lc_link *l) {
    lc_packet *p = l->svc;
    if (!p) return;
    if (l->seg_left == 0) {             /* nothing started: all of it is queued again */
        p->lo = l->seg;
        l->svc = NULL;
        lc_fifo_push_front(&l->q, p);
        return;
    }
    if (l->seg + 1 >= p->nseg) return;
    lc_packet *cur = lc_piece(p, l->seg, l->seg + 1);
    if (!cur) return;
    l->pieces++;
    p->lo = l->seg + 1;
    lc_fifo_push_front(&l->q, p);
    l->svc = cur;
    l->seg = 0;
}

void lc_enqueue(lc_link *l, lc_packet *p, int64_t now) {
    int n = p->nseg;
    p->t = now;
    l->superpackets += n > 1;
    l->arr_p += n;
    l->arr_b += lc_wire(p, 0, n);
    if (l->log)
        for (int i = 0; i < n; i++) lc_log_add(l->log, LC_ARRIVAL, now, lc_wire(p, i, i + 1), 0);
    long long tp, tb, drop_p = 0, drop_b = 0;
    service_tail(l, &tp, &tb);
    if (l->qkind == LC_DROPTAIL) {
        unsigned char keep[n];
        long long count = l->q.count + tp, bytes = l->q.bytes + tb;
        for (int i = 0; i < n; i++) {      /* segment by segment, as they would arrive */
            long long w = lc_wire(p, i, i + 1);
            int over = (l->lim_p && count + 1 > l->lim_p) || (l->lim_b && bytes + w > l->lim_b);
            keep[i] = !over;
            if (over) { drop_p++; drop_b += w; }
            else { count++; bytes += w; }
        }
        if (!drop_p) lc_fifo_push(&l->q, p);
        else l->pieces += lc_push_kept(&l->q, p, keep);
    } else {
        lc_fifo_push(&l->q, p);
        if (l->qkind == LC_DROPHEAD) {
            /* dropping from the head after the whole super-packet is the same as after
               each of its segments: the first kept segment only moves forward */
            while ((l->lim_p && l->q.count + tp > l->lim_p) || (l->lim_b && l->q.bytes + tb > l->lim_b)) {
                if (tp) { detach_service_tail(l); tp = tb = 0; continue; }
                lc_packet *h = l->q.head;
                long long w = lc_wire(h, h->lo, h->lo + 1);
                drop_p++; drop_b += w;
                if (h->lo + 1 == h->nseg) {
                    free(lc_fifo_pop(&l->q));
                } else {
                    h->lo++;
                    l->q.count--; l->q.bytes -= w;
                }
            }
        }
    }
    if (drop_p) {
        l->drop_p += drop_p;
        l->drop_b += drop_b;
        lc_log_add(l->log, LC_DROP, now, drop_p, drop_b);
    }
}

void lc_enqueue_copy(lc_link *l, const unsigned char *buf, long len, int off, int64_t now) {
    lc_packet *p = lc_packet_new(buf, len, off);
    if (p) { lc_enqueue(l, p, now); return; }
    long long w = len - off;
    l->arr_p++; l->arr_b += w; l->drop_p++; l->drop_b += w;
    lc_log_add(l->log, LC_ARRIVAL, now, w, 0);
    lc_log_add(l->log, LC_DROP, now, 1, w);
}

/* Segments [a, b) of p leave at t (p itself when that is all of it; p is not freed). */
static void emit(lc_link *l, lc_packet *p, int a, int b, int64_t t, lc_sink *out) {
    l->dep_p += b - a;
    l->dep_b += lc_wire(p, a, b);
    if (l->log)
        for (int i = a; i < b; i++) lc_log_add(l->log, LC_DEPARTURE, t, lc_wire(p, i, i + 1), p->t);
    if (a == 0 && b == p->nseg) {
        out->write(out->ctx, p->data, p->len);
        return;
    }
    lc_packet *q = lc_piece(p, a, b);
    if (!q) { out->errors++; return; }
    l->pieces++;
    out->write(out->ctx, q->data, q->len);
    free(q);
}

long long lc_serve(lc_link *l, long long budget, int64_t t, lc_sink *out) {
    long long left = budget;
    if (budget > 0) lc_log_add(l->log, LC_OPPORTUNITY, t, 0, budget);
    while (left > 0) {
        if (!l->svc) {
            l->svc = lc_fifo_pop(&l->q);
            if (!l->svc) break;
            l->seg = l->svc->lo;
            l->seg_left = 0;
        }
        lc_packet *p = l->svc;
        if (l->seg_left == 0) l->seg_left = lc_wire(p, l->seg, l->seg + 1);
        long long take = l->seg_left < left ? l->seg_left : left;
        l->seg_left -= take;
        left -= take;
        if (l->seg_left == 0 && ++l->seg == p->nseg) {
            emit(l, p, p->lo, p->nseg, t, out);
            free(p);
            l->svc = NULL;
        }
    }
    /* segments of the packet in service done by this budget leave now too */
    lc_packet *p = l->svc;
    if (p && l->seg > p->lo) {
        emit(l, p, p->lo, l->seg, t, out);
        p->lo = l->seg;
    }
    l->served_bytes += budget - left;
    return budget - left;
}

/* ---- the TTI grid ----------------------------------------------------------------- */

long long lc_carry_budget(double *carry, double amount) {
    double total = *carry + amount;
    double budget = floor(total + LC_CARRY_EPS);
    *carry = total - budget;
    return (long long)budget;
}

int64_t lc_boundary(int64_t start, long long num, long long den, long long k) {
    return start + (int64_t)((__int128)k * num / den);
}

int lc_grid_init(lc_grid *g, const double *cap, size_t n, long long num, long long den, int64_t start) {
    memset(g, 0, sizeof *g);
    g->cap = malloc(n * sizeof(double));
    if (!g->cap) return -1;
    memcpy(g->cap, cap, n * sizeof(double));
    g->n = n;
    g->num = num;
    g->den = den;
    g->start = start;
    g->end = lc_boundary(start, num, den, 1);
    return 0;
}

void lc_grid_free(lc_grid *g) {
    free(g->cap);
    g->cap = NULL;
}

void lc_grid_advance(lc_grid *g, lc_link *l, int64_t now, lc_sink *out) {
    while (g->end <= now) {
        long long budget = lc_carry_budget(&g->carry, g->cap[g->k % g->n]);
        g->capacity_bytes += budget;
        lc_serve(l, budget, g->end, out);
        g->k++;
        g->end = lc_boundary(g->start, g->num, g->den, g->k + 1);
    }
}
