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
#include <stdio.h>
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

/* this thread's free buffers (lc_buffer, lc_packet_free) */
static _Thread_local struct { lc_packet *head; int n; } pool;

lc_packet *lc_buffer(void) {
    lc_packet *p = pool.head;
    if (p) {
        pool.head = p->next;
        pool.n--;
    } else {
        p = malloc(sizeof(lc_packet) + LC_MAX_PACKET);
        if (!p) return NULL;
    }
    p->pooled = 1;
    p->len = 0;
    return p;
}

void lc_packet_free(lc_packet *p) {
    if (p && p->pooled && pool.n < LC_POOL) {
        p->next = pool.head;
        pool.head = p;
        pool.n++;
        return;
    }
    free(p);
}

void lc_pool_clear(void) {
    lc_packet *p;
    while ((p = pool.head)) {
        pool.head = p->next;
        free(p);
    }
    pool.n = 0;
}

/* Room for a packet of len data bytes: a pooled buffer above LC_SMALL_PACKET, else its own. */
static lc_packet *packet_alloc(long len) {
    if (len > LC_SMALL_PACKET && len <= LC_MAX_PACKET) return lc_buffer();
    lc_packet *p = malloc(sizeof(lc_packet) + len);
    if (p) p->pooled = 0;
    return p;
}

static void packet_init(lc_packet *p, long len, int off) {
    p->next = NULL;
    p->t = 0;
    p->len = (int)len;
    p->off = off;
    parse_segments(p);
}

lc_packet *lc_packet_new(const unsigned char *buf, long len, int off) {
    if (len < off) return NULL;
    lc_packet *p = packet_alloc(len);
    if (!p) return NULL;
    memcpy(p->data, buf, len);
    packet_init(p, len, off);
    return p;
}

int lc_buffer_parse(lc_packet *b, long len, int off) {
    if (len < off || len > LC_MAX_PACKET) return -1;
    packet_init(b, len, off);
    return 0;
}

lc_packet *lc_buffer_packet(lc_packet **b, long len, int off) {
    if (len < off || len > LC_MAX_PACKET) return NULL;
    if (len <= LC_SMALL_PACKET) return lc_packet_new((*b)->data, len, off);
    lc_packet *p = *b;
    *b = NULL;
    packet_init(p, len, off);
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
    lc_packet *q = packet_alloc(len);
    if (!q) return NULL;
    int pooled = q->pooled;
    *q = *p;
    q->pooled = pooled;
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
    while ((p = lc_fifo_pop(f))) lc_packet_free(p);
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
    lc_packet_free(p);
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

/* v in decimal at o; returns the end */
static char *put_int(char *o, long long v) {
    char tmp[24];
    int k = 0;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    do { tmp[k++] = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) *o++ = '-';
    while (k) *o++ = tmp[--k];
    return o;
}

/* The time field of an event line, d ns after the base: Python's round(d / 1e6, 3) written
   as an integer when whole, else with 3 decimals. That rounds the double d / 1e6 half to
   even; for 0 <= d < 2^52 ns (52 days) the double lies on the same side of a rounding
   boundary as d / 1e6 itself unless d is exactly on one (d % 1000 == 500), so the others
   are rounded in integers and those by glibc's "%.3f" of the double (the same rule). */
static char *put_ms(char *o, int64_t d) {
    if (d < 0 || d >= (1LL << 52) || d % 1000 == 500) {
        int k = sprintf(o, "%.3f", (double)d / 1e6);
        if (k >= 4 && memcmp(o + k - 4, ".000", 4) == 0) {
            k -= 4;
            if (k == 2 && o[0] == '-' && o[1] == '0') { o[0] = '0'; k = 1; }     /* -0 is 0 */
        }
        return o + k;
    }
    long long us = d / 1000 + (d % 1000 > 500);
    o = put_int(o, us / 1000);
    long long f = us % 1000;
    if (f) { *o++ = '.'; *o++ = (char)('0' + f / 100); *o++ = (char)('0' + f / 10 % 10); *o++ = (char)('0' + f % 10); }
    return o;
}

/* Python's round(d / 1e6) for a delay of d >= 0 ns: half to even, in integers except on an
   exact half (where the double is exact too and nearbyint rounds it half to even) */
static long long round_ms(int64_t d) {
    if (d < 0 || d >= (1LL << 52) || d % 1000000 == 500000) return (long long)nearbyint((double)d / 1e6);
    return d / 1000000 + (d % 1000000 > 500000);
}

size_t lc_format_events(const lc_event *ev, size_t n, int64_t base_ns, char *out) {
    char *o = out;
    for (size_t i = 0; i < n; i++) {
        const lc_event *e = &ev[i];
        o = put_ms(o, e->t - base_ns);
        *o++ = ' ';
        switch (e->kind) {
        case LC_ARRIVAL: *o++ = '+'; *o++ = ' '; o = put_int(o, e->len); break;
        case LC_DROP: *o++ = 'd'; *o++ = ' '; o = put_int(o, e->len); *o++ = ' '; o = put_int(o, e->x); break;
        case LC_OPPORTUNITY: *o++ = '#'; *o++ = ' '; o = put_int(o, e->x); break;
        case LC_MARK: *o++ = 'm'; *o++ = ' '; o = put_int(o, e->len); *o++ = ' '; o = put_int(o, e->x); break;
        default: *o++ = '-'; *o++ = ' '; o = put_int(o, e->len); *o++ = ' '; o = put_int(o, round_ms(e->t - e->x));
        }
        *o++ = '\n';
    }
    return (size_t)(o - out);
}

/* ---- random numbers and ECN ------------------------------------------------------ */

uint64_t lc_rng_next(uint64_t *state) {
    uint64_t z = (*state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

double lc_rng_uniform(uint64_t *state) { return (lc_rng_next(state) >> 11) * (1.0 / 9007199254740992.0); }

int lc_ecn_of(const unsigned char *ip, int n) {
    if (n < 20) return LC_NOT_ECT;
    if ((ip[0] >> 4) == 4) return ip[1] & 3;
    if ((ip[0] >> 4) == 6 && n >= 40) return (ip[1] >> 4) & 3;
    return LC_NOT_ECT;
}

int lc_mark_ce(unsigned char *ip, int n) {
    int ecn = lc_ecn_of(ip, n);
    if (ecn == LC_NOT_ECT) return 0;
    if (ecn == LC_CE) return 1;
    if ((ip[0] >> 4) == 4) {
        uint32_t old = rd16(ip);
        ip[1] |= LC_CE;
        /* RFC 1624 eq. 3: HC' = ~(~HC + ~m + m') */
        uint32_t sum = (~rd16(ip + 10) & 0xffff) + (~old & 0xffff) + rd16(ip);
        sum = (sum & 0xffff) + (sum >> 16);
        sum = (sum & 0xffff) + (sum >> 16);
        wr16(ip + 10, ~sum & 0xffff);
    } else {
        ip[1] |= LC_CE << 4;
    }
    return 1;
}

/* ---- a link ----------------------------------------------------------------------- */

void lc_link_init(lc_link *l, int qkind, long long lim_p, long long lim_b) {
    memset(l, 0, sizeof *l);
    l->qkind = qkind;
    l->lim_p = qkind == LC_INFINITE ? 0 : lim_p;
    l->lim_b = qkind == LC_INFINITE ? 0 : lim_b;
}

void lc_link_aqm(lc_link *l, int ecn, uint64_t seed, double a, double b, double c, double d) {
    lc_aqm *q = &l->aqm;
    q->ecn = ecn || l->qkind == LC_L4S;
    q->rng = seed;
    switch (l->qkind) {
    case LC_CODEL:
        q->target_ns = (int64_t)a; q->interval_ns = (int64_t)b;
        break;
    case LC_PIE:
        q->ref_s = a; q->burst_ns = (int64_t)b; q->burst_left = q->burst_ns;
        break;
    case LC_L4S:
        q->step_ns = (int64_t)a; q->target_s = b; q->tupdate_ns = (int64_t)c; q->tshift_ns = (int64_t)d;
        break;
    }
}

void lc_link_free(lc_link *l) {
    lc_fifo_clear(&l->q);
    lc_fifo_clear(&l->lq);
    lc_packet_free(l->svc);
    l->svc = NULL;
}

int lc_busy(const lc_link *l) { return l->svc || l->q.head || l->lq.head; }

/* Segments and bytes queued (both queues of L4S), the packet in service not counted. */
static inline long long q_count(const lc_link *l) { return l->q.count + l->lq.count; }
static inline long long q_bytes(const lc_link *l) { return l->q.bytes + l->lq.bytes; }

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
    *packets = q_count(l) + tp + (l->seg_left > 0);
    *bytes = q_bytes(l) + tb + l->seg_left;
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

/* ---- AQMs: replay/queues.py's CoDelQueue, PIEQueue and DualPI2Queue, line for line ---- */

#define PIE_T_UPDATE_NS 15000000LL
#define PIE_ALPHA 0.125
#define PIE_BETA 1.25
#define PIE_MARK_ECN_TH 0.1
#define L4S_ALPHA 0.16
#define L4S_BETA 3.2
#define L4S_K 2

/* the packet p (one segment) that a discipline dropped at time t: counted, logged, freed */
static void aqm_drop(lc_link *l, lc_packet *p, int64_t t) {
    long long w = lc_wire(p, p->lo, p->nseg);
    l->drop_p += p->nseg - p->lo;
    l->drop_b += w;
    lc_log_add(l->log, LC_DROP, t, p->nseg - p->lo, w);
    lc_packet_free(p);
}

/* CE on p instead of a drop: 1 when marked (counted, logged), 0 when it must be dropped
   (ECN off, or p not ECN-capable) */
static int aqm_mark(lc_link *l, lc_packet *p, int64_t t) {
    if (!l->aqm.ecn || !lc_mark_ce(p->data + p->off, p->len - p->off)) return 0;
    long long w = lc_wire(p, p->lo, p->nseg);
    l->marks_p++;
    l->marks_b += w;
    lc_log_add(l->log, LC_MARK, t, 1, w);
    return 1;
}

static int over(const lc_link *l, long long extra_p, long long extra_b) {
    return (l->lim_p && q_count(l) + extra_p > l->lim_p) || (l->lim_b && q_bytes(l) + extra_b > l->lim_b);
}

static int64_t codel_control(const lc_aqm *a, long long count) {
    return (int64_t)((double)a->interval_ns / sqrt((double)count));
}

/* RFC 8289 dodequeue: the head packet and whether it may be dropped */
static lc_packet *codel_pop(lc_link *l, int64_t now, int *ok) {
    lc_aqm *a = &l->aqm;
    lc_packet *p = lc_fifo_pop(&l->q);
    *ok = 0;
    if (!p) { a->first_above = 0; return NULL; }
    if (now - p->t < a->target_ns || l->q.bytes <= 1500) { a->first_above = 0; return p; }
    if (a->first_above == 0) { a->first_above = now + a->interval_ns; return p; }
    *ok = now >= a->first_above;
    return p;
}

static lc_packet *codel_dequeue(lc_link *l, int64_t now) {
    lc_aqm *a = &l->aqm;
    int ok;
    lc_packet *p = codel_pop(l, now, &ok);
    if (!p) { a->dropping = 0; return NULL; }
    if (a->dropping) {
        if (!ok) a->dropping = 0;
        while (a->dropping && now >= a->drop_next) {
            a->count++;
            if (aqm_mark(l, p, now)) { a->drop_next += codel_control(a, a->count); return p; }
            aqm_drop(l, p, now);
            p = codel_pop(l, now, &ok);
            if (!p || !ok) a->dropping = 0;
            else a->drop_next += codel_control(a, a->count);
        }
        return p;
    }
    if (ok) {
        if (!aqm_mark(l, p, now)) {
            aqm_drop(l, p, now);
            p = codel_pop(l, now, &ok);
        }
        a->dropping = 1;
        long long delta = a->count - a->last_count;
        a->count = (delta > 1 && now - a->drop_next < 16 * a->interval_ns) ? delta : 1;
        a->drop_next = now + codel_control(a, a->count);
        a->last_count = a->count;
    }
    return p;
}

static void pie_update(lc_link *l, int64_t now) {
    lc_aqm *a = &l->aqm;
    if (!a->updated) { a->updated = 1; a->next_update = now + PIE_T_UPDATE_NS; return; }
    while (now >= a->next_update) {
        double d = a->qdelay_s, p = a->drop_prob;
        double scale = p < 1e-6 ? 1.0 / 2048 : p < 1e-5 ? 1.0 / 512 : p < 1e-4 ? 1.0 / 128
                     : p < 1e-3 ? 1.0 / 32 : p < 1e-2 ? 1.0 / 8 : p < 1e-1 ? 1.0 / 2 : 1.0;
        p += scale * (PIE_ALPHA * (d - a->ref_s) + PIE_BETA * (d - a->qdelay_old_s));
        if (d == 0 && a->qdelay_old_s == 0) p *= 0.98;
        a->drop_prob = p < 0.0 ? 0.0 : p > 1.0 ? 1.0 : p;
        a->qdelay_old_s = d;
        if (a->burst_left > 0) {
            a->burst_left -= PIE_T_UPDATE_NS;
            if (a->burst_left < 0) a->burst_left = 0;
        } else if (a->drop_prob == 0 && d < a->ref_s / 2 && a->qdelay_old_s < a->ref_s / 2) {
            a->burst_left = a->burst_ns;
        }
        if (!l->q.head) a->qdelay_s = 0.0;
        a->next_update += PIE_T_UPDATE_NS;
    }
}

static void l4s_update(lc_link *l, int64_t now) {
    lc_aqm *a = &l->aqm;
    if (!a->updated) { a->updated = 1; a->next_update = now + a->tupdate_ns; return; }
    while (now >= a->next_update) {
        double q = l->q.head ? (double)(a->next_update - l->q.head->t) / 1e9 : 0.0;
        double p = a->p_base + L4S_ALPHA * (q - a->target_s) + L4S_BETA * (q - a->prev_s);
        a->p_base = p < 0.0 ? 0.0 : p > 1.0 ? 1.0 : p;
        a->prev_s = q;
        a->next_update += a->tupdate_ns;
    }
}

static lc_packet *l4s_dequeue(lc_link *l, int64_t now) {
    lc_aqm *a = &l->aqm;
    l4s_update(l, now);
    while (l->lq.head || l->q.head) {
        if (l->lq.head && (!l->q.head || l->q.head->t + a->tshift_ns >= l->lq.head->t)) {
            lc_packet *p = lc_fifo_pop(&l->lq);
            double p_cl = L4S_K * a->p_base;
            if (p_cl > 1.0) p_cl = 1.0;
            if (now - p->t > a->step_ns || (p_cl > 0 && lc_rng_uniform(&a->rng) < p_cl)) aqm_mark(l, p, now);
            return p;
        }
        lc_packet *p = lc_fifo_pop(&l->q);
        double p_c = a->p_base * a->p_base;
        if (p_c > 0 && lc_rng_uniform(&a->rng) < p_c && !aqm_mark(l, p, now)) {
            aqm_drop(l, p, now);
            continue;
        }
        return p;
    }
    return NULL;
}

/* The next packet for the server at time t (a TTI's end), by the discipline. */
static lc_packet *dequeue(lc_link *l, int64_t t) {
    switch (l->qkind) {
    case LC_CODEL:
        return codel_dequeue(l, t);
    case LC_PIE: {
        pie_update(l, t);
        lc_packet *p = lc_fifo_pop(&l->q);
        if (p) l->aqm.qdelay_s = (double)(t - p->t) / 1e9;
        return p;
    }
    case LC_L4S:
        return l4s_dequeue(l, t);
    default:
        return lc_fifo_pop(&l->q);
    }
}

/* PIE and L4S at enqueue (one segment): 1 when p was queued, 0 when dropped (not freed) */
static int aqm_enqueue(lc_link *l, lc_packet *p, int64_t now) {
    lc_aqm *a = &l->aqm;
    long long w = lc_wire(p, p->lo, p->nseg);
    if (l->qkind == LC_PIE) {
        pie_update(l, now);
        int drop = over(l, 1, w);
        if (!drop && a->burst_left == 0 && !(a->qdelay_old_s < a->ref_s / 2 && a->drop_prob < 0.2) &&
            l->q.count > 2 && lc_rng_uniform(&a->rng) < a->drop_prob)
            drop = !(a->drop_prob <= PIE_MARK_ECN_TH && aqm_mark(l, p, now));
        if (drop) return 0;
        lc_fifo_push(&l->q, p);
        return 1;
    }
    l4s_update(l, now);
    if (over(l, 1, w)) return 0;
    int ecn = lc_ecn_of(p->data + p->off, p->len - p->off);
    lc_fifo_push(ecn == LC_ECT1 || ecn == LC_CE ? &l->lq : &l->q, p);
    return 1;
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
    if (l->qkind == LC_PIE || l->qkind == LC_L4S) {
        if (!aqm_enqueue(l, p, now)) {
            drop_p = p->nseg; drop_b = lc_wire(p, 0, p->nseg);
            lc_packet_free(p);
        }
    } else if (l->qkind == LC_DROPTAIL || l->qkind == LC_CODEL) {   /* CoDel: a tail-drop safety net */
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
                    lc_packet_free(lc_fifo_pop(&l->q));
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
    lc_packet_free(q);
}

long long lc_serve(lc_link *l, long long budget, int64_t t, lc_sink *out) {
    long long left = budget;
    if (budget > 0) lc_log_add(l->log, LC_OPPORTUNITY, t, 0, budget);
    while (left > 0) {
        if (!l->svc) {
            l->svc = dequeue(l, t);
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
            lc_packet_free(p);
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

void lc_rows_free(lc_rows *r) {
    free(r->row);
    r->row = NULL;
    r->n = r->cap = 0;
}

static void add_row(lc_rows *r, const lc_link *l, long long k, long long budget, long long served) {
    if (r->n == r->cap) {
        size_t cap = r->cap ? 2 * r->cap : 1024;
        int64_t (*row)[8] = realloc(r->row, cap * sizeof *row);
        if (!row) { r->lost++; return; }
        r->row = row;
        r->cap = cap;
    }
    long long bytes, packets;
    lc_backlog(l, &bytes, &packets);
    int64_t *x = r->row[r->n++];
    x[0] = k; x[1] = budget; x[2] = served; x[3] = bytes; x[4] = packets;
    x[5] = l->drop_p - r->seen_drop_p; x[6] = l->drop_b - r->seen_drop_b; x[7] = l->arr_b - r->seen_arr_b;
    r->seen_drop_p = l->drop_p; r->seen_drop_b = l->drop_b; r->seen_arr_b = l->arr_b;
}

void lc_grid_advance(lc_grid *g, lc_link *l, int64_t now, lc_sink *out) {
    while (g->end <= now) {
        long long budget = lc_carry_budget(&g->carry, g->cap[g->k % g->n]);
        g->capacity_bytes += budget;
        long long served = lc_serve(l, budget, g->end, out);
        if (g->rows) add_row(g->rows, l, g->k, budget, served);
        g->k++;
        g->end = lc_boundary(g->start, g->num, g->den, g->k + 1);
    }
}

/* ---- the workload rule: replay/workload.py's WorkloadStage, step for step ------------ */

/* Python's a // b and a % b (floor), for b > 0; a product of two times fits in 128 bits. */
static inline int64_t floordiv(__int128 a, int64_t b) {
    __int128 q = a / b;
    if ((a % b) != 0 && a < 0) q--;
    return (int64_t)q;
}
static inline int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }

/* bisect.bisect_right: the first index of a (sorted, n long) whose value is above x */
static size_t bisect_right(const int64_t *a, size_t n, int64_t x) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (x < a[mid]) hi = mid; else lo = mid + 1;
    }
    return lo;
}

void lc_workload_free(lc_workload *w) {
    free(w->train_t); free(w->train_d); free(w->pdo_at); free(w->pdo);
    free(w->heavy); free(w->offset); free(w->pdos);
    memset(w, 0, sizeof *w);
}

static int64_t *copy64(const int64_t *a, size_t n) {
    int64_t *b = malloc((n ? n : 1) * sizeof *b);
    if (b && n) memcpy(b, a, n * sizeof *b);
    return b;
}

int lc_workload_init(lc_workload *w, int64_t start, int64_t idle, int64_t light_period,
                     const int64_t *train_t, const int64_t *train_d, const int64_t *pdo_len,
                     const int64_t *pdo, size_t ntrains, const int64_t *heavy, size_t nheavy,
                     int64_t heavy_period, const int64_t *offset, size_t noffset) {
    memset(w, 0, sizeof *w);
    if (!ntrains || !nheavy || heavy_period <= 0 || light_period <= 0) return -1;
    size_t total = 0, longest = 0;
    for (size_t i = 0; i < ntrains; i++) {
        if (pdo_len[i] <= 0) return -1;
        total += (size_t)pdo_len[i];
        if ((size_t)pdo_len[i] > longest) longest = (size_t)pdo_len[i];
    }
    w->start = start; w->idle = idle; w->light_period = light_period;
    w->ntrains = ntrains; w->nheavy = nheavy; w->heavy_period = heavy_period;
    w->noffset = noffset; w->longest = longest;
    w->train_t = copy64(train_t, ntrains);
    w->train_d = copy64(train_d, ntrains);
    w->pdo = copy64(pdo, total);
    w->heavy = copy64(heavy, nheavy);
    w->offset = copy64(offset, noffset);
    w->pdos = malloc(longest * sizeof *w->pdos);
    w->pdo_at = malloc((ntrains + 1) * sizeof *w->pdo_at);
    if (!w->train_t || !w->train_d || !w->pdo || !w->heavy || !w->offset || !w->pdos || !w->pdo_at) {
        lc_workload_free(w);
        return -1;
    }
    w->pdo_at[0] = 0;
    for (size_t i = 0; i < ntrains; i++) w->pdo_at[i + 1] = w->pdo_at[i] + (size_t)pdo_len[i];
    w->h_index = -1;
    w->h_first = -1;
    return 0;
}

static size_t train_len(const lc_workload *w, size_t i) { return w->pdo_at[i + 1] - w->pdo_at[i]; }

/* _train_at: the light train recorded last at or before rel (looped) */
static size_t train_at(const lc_workload *w, int64_t rel) {
    size_t i = bisect_right(w->train_t, w->ntrains, floormod(rel, w->light_period));
    return i ? i - 1 : 0;
}

/* base_delay_ns: linear between the trains' base delays, the last one held until the loop */
static int64_t base_delay(const lc_workload *w, int64_t rel) {
    int64_t r = floormod(rel, w->light_period);
    size_t i = train_at(w, rel);
    if (i + 1 >= w->ntrains || r <= w->train_t[i]) return w->train_d[i];
    int64_t t0 = w->train_t[i], t1 = w->train_t[i + 1], d0 = w->train_d[i], d1 = w->train_d[i + 1];
    return d0 + floordiv((__int128)(d1 - d0) * (r - t0), t1 - t0);
}

/* _extend: continue the burst's PDOs with the train nearest in time that is longer; 0 when none */
static int extend(lc_workload *w) {
    size_t k = w->npdos, best = 0;
    int found = 0;
    int64_t t = w->train_t[w->burst_train];
    for (size_t i = 0; i < w->ntrains; i++) {
        if (train_len(w, i) <= k) continue;
        int64_t di = w->train_t[i] > t ? w->train_t[i] - t : t - w->train_t[i];
        int64_t db = w->train_t[best] > t ? w->train_t[best] - t : t - w->train_t[best];
        if (!found || di < db) { best = i; found = 1; }
    }
    if (!found) return 0;
    int64_t last = k ? w->pdos[k - 1] : 0;
    const int64_t *p = w->pdo + w->pdo_at[best];
    for (size_t j = k; j < train_len(w, best); j++) w->pdos[w->npdos++] = p[j] > last ? p[j] : last;
    return 1;
}

static int64_t heavy_time(const lc_workload *w, long long j) {
    long long loops = j / (long long)w->nheavy, i = j % (long long)w->nheavy;
    return w->start + loops * w->heavy_period + w->heavy[i];
}

/* _heavy_first_after: absolute index of the first heavy opportunity later than a */
static long long heavy_first_after(const lc_workload *w, int64_t a) {
    int64_t rel = a - w->start, loops = floordiv(rel, w->heavy_period);
    size_t i = bisect_right(w->heavy, w->nheavy, rel - loops * w->heavy_period);
    if (i == w->nheavy) { loops++; i = 0; }
    return (long long)loops * (long long)w->nheavy + (long long)i;
}

/* _heavy_serve: radio departure of size bytes queued at a behind the heavy FIFO */
static int64_t heavy_serve(lc_workload *w, int64_t a, long long size) {
    w->heavy_bytes += size;
    long long need = size, j;
    if (w->h_index >= 0 && w->h_room > 0 && a < heavy_time(w, w->h_index)) {
        long long take = need < w->h_room ? need : w->h_room;
        need -= take;
        w->h_room -= take;
        if (need == 0) return heavy_time(w, w->h_index);
        j = w->h_index + 1;
    } else {
        j = heavy_first_after(w, a);
        if (j < w->h_index + 1) j = w->h_index + 1;
        if (w->h_first < 0) w->h_first = j;
    }
    /* the rest fills m = ceil(need / 1400) opportunities from j on (at least the one at j, as
       the reference's walk); the last keeps what is left */
    long long m = need > 0 ? (need + LC_PDO_BYTES - 1) / LC_PDO_BYTES : 1;
    w->h_index = j + m - 1;
    w->h_room = m * LC_PDO_BYTES - need;
    return heavy_time(w, w->h_index);
}

int64_t lc_workload_release(lc_workload *w, int64_t t, long long size) {
    int64_t radio, delay;
    if (!w->started || t > w->free + LC_PDO_RESOLUTION_NS + w->idle) {
        int64_t rel = t - w->start;
        w->bursts++;
        w->burst_start = t;
        w->burst_train = train_at(w, rel);
        w->burst_delay = base_delay(w, rel);
        w->npdos = train_len(w, w->burst_train);
        memcpy(w->pdos, w->pdo + w->pdo_at[w->burst_train], w->npdos * sizeof *w->pdos);
        w->k = 0;
        w->room = LC_PDO_BYTES - size > 0 ? LC_PDO_BYTES - size : 0;
        radio = t;
        delay = w->burst_delay;
        w->light_free = radio;
        w->light_packets++;
    } else {
        int64_t e = t - w->burst_start;
        int placed = 0;
        for (;;) {
            while (w->k < (long long)w->npdos && w->pdos[w->k] + LC_PDO_RESOLUTION_NS <= e) {
                w->k++;
                w->room = LC_PDO_BYTES;
            }
            if (!placed && w->room < size) {
                /* the packet starts on a fresh PDO and takes ceil(s / 1400) of them */
                long long m = (size + LC_PDO_BYTES - 1) / LC_PDO_BYTES;
                w->k += w->room < LC_PDO_BYTES ? m : m - 1;
                w->room = m * LC_PDO_BYTES;
            }
            placed = 1;
            if (w->k < (long long)w->npdos || w->k >= (long long)w->longest || !extend(w)) break;
        }
        if (w->k < (long long)w->npdos) {
            w->room -= size;
            int64_t at = w->burst_start + w->pdos[w->k];
            radio = t > at ? t : at;
            delay = w->burst_delay;
            w->light_free = radio;
            w->light_packets++;
        } else {
            int64_t a = t > w->light_free ? t : w->light_free;
            radio = heavy_serve(w, a, size);
            delay = base_delay(w, a - w->start);
            w->heavy_packets++;
        }
    }
    if (!w->started || radio > w->free) w->free = radio;
    w->started = 1;
    int64_t off = w->noffset ? w->offset[(size_t)size < w->noffset ? (size_t)size : w->noffset - 1] : 0;
    int64_t out = radio + delay + off;
    if (out < w->last_release) out = w->last_release;
    w->last_release = out;
    return out;
}

long long lc_workload_heavy_span(const lc_workload *w) {
    return w->h_first < 0 ? 0 : w->h_index - w->h_first + 1;
}
