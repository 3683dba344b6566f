/*
 * The link core of the shells in C: one packet, one FIFO, the queue disciplines, the
 * byte-granular server, the TTI grid with its fractional-byte carry, GSO super-packets and
 * the logged events. Compiled into both airlink.replay._fastpath (the link shell) and
 * airlink.replay._cellpath (the cell shell); the Python stages stay the executable
 * specification the tests compare it against:
 *
 *   lc_link (queue + server)   replay/queues.py (infinite, droptail, drophead) and
 *                              replay/server.py's ByteServer
 *   lc_grid (capacity trace)   replay/server.py's TraceServer (TTI boundaries, carry_budget)
 *   lc_event                   the Mahimahi-format log events (replay/stages.py, replay/cell.py)
 *   lc_workload                replay/workload.py's WorkloadStage (the workload mode's rule)
 *
 * GSO (offload mode): a packet may be a TCP/UDP super-packet of nseg segments; every part
 * of the core treats it as the segments the kernel would have sent without offload (each
 * segment = the IP/L4 headers + its gso slice of the payload): counters, queue limits,
 * service and log events are those of plain mode, and the core cuts a super-packet into
 * pieces of whole segments (lc_piece) where a budget or a limit splits it.
 *
 * Units: times are integer nanoseconds of CLOCK_MONOTONIC; sizes are bytes of IP packets
 * (the vnet header is never counted).
 */
#ifndef AIRLINK_LINKCORE_H
#define AIRLINK_LINKCORE_H

#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define LC_API __attribute__((visibility("hidden")))
#else
#define LC_API
#endif

/* ---- packets ---------------------------------------------------------------------- */

typedef struct lc_packet {
    struct lc_packet *next;
    int64_t t;          /* arrival (link) or release time (delay) */
    int len;            /* bytes in data: the vnet header (off bytes) and the IP packet */
    int off;            /* vnet header size (0 in plain mode) */
    int nseg;           /* segments (1 unless a GSO super-packet) */
    int lo;             /* segments [0, lo) already left or were dropped */
    int ipl, hl;        /* IP header length; IP + L4 header length (0 when nseg == 1) */
    int gso, plen;      /* payload bytes per segment; payload bytes in all */
    int pooled;         /* a buffer of LC_MAX_PACKET data bytes from a pool (lc_packet_free) */
    unsigned char data[];
} lc_packet;

/* A packet of len bytes copied from buf, off of them a virtio_net_hdr (0 or 10); its
   segment layout parsed. NULL without memory or when len < off. */
LC_API lc_packet *lc_packet_new(const unsigned char *buf, long len, int off);
/* Free a packet of the core (every packet is freed by this, never by free()). */
LC_API void lc_packet_free(lc_packet *p);

/* Packet memory. A packet of more than LC_SMALL_PACKET bytes (a GSO super-packet) lives in
   a buffer of LC_MAX_PACKET bytes that lc_packet_free keeps in the calling thread's pool
   (up to LC_POOL buffers) for the next one: at gigabit rates the same few megabytes are
   reused, instead of the allocator handing back fresh pages (each faulted in and zeroed
   by the kernel) every TTI. Smaller packets get an allocation of their own size, so a
   queue of many small packets holds no more memory than their bytes. */
#define LC_MAX_PACKET (65536 + 64)      /* a 64 KB IP packet and its vnet header */
#define LC_SMALL_PACKET 16384
#define LC_POOL 256
/* An empty packet buffer of LC_MAX_PACKET data bytes to read into; NULL without memory. */
LC_API lc_packet *lc_buffer(void);
/* The packet of the first len bytes of buffer *b (off of them a vnet header), as
   lc_packet_new would make it from them without copying a large one: a packet of up to
   LC_SMALL_PACKET bytes is copied out and *b stays for the next read; a larger one is the
   buffer itself and *b becomes NULL. NULL without memory or when len < off. */
LC_API lc_packet *lc_buffer_packet(lc_packet **b, long len, int off);
/* The first len bytes of buffer b (off of them a vnet header) as a packet in place: its
   length and segment layout set, b still the caller's buffer (to count and pass on a packet
   without queueing it). -1 when len < off or len > LC_MAX_PACKET, else 0. */
LC_API int lc_buffer_parse(lc_packet *b, long len, int off);
/* Free the calling thread's pool (before the thread ends). */
LC_API void lc_pool_clear(void);
/* Plain-mode bytes of segments [a, b) of p: each carries the headers and its payload slice
   (inline: every FIFO operation and every served segment uses it); 0 for no segment (a == b
   == nseg, past a short last segment, would otherwise count negative bytes). */
static inline long long lc_wire(const lc_packet *p, int a, int b) {
    if (b <= a) return 0;
    long long end = (long long)b * p->gso;
    if (end > p->plen) end = p->plen;
    return (long long)(b - a) * p->hl + end - (long long)a * p->gso;
}
/* A new packet holding segments [a, b) of p, as the kernel would have cut them. */
LC_API lc_packet *lc_piece(const lc_packet *p, int a, int b);

/* ---- FIFO ------------------------------------------------------------------------- */

typedef struct {
    lc_packet *head, *tail;
    long long count, bytes;     /* segments [lo, nseg) of every packet and their bytes */
} lc_fifo;

LC_API void lc_fifo_push(lc_fifo *f, lc_packet *p);
LC_API void lc_fifo_push_front(lc_fifo *f, lc_packet *p);
LC_API lc_packet *lc_fifo_pop(lc_fifo *f);
LC_API void lc_fifo_clear(lc_fifo *f);
/* Push the segments of p marked in keep[0..nseg) as few pieces as possible (p itself when
   all are kept), free the rest; takes ownership of p. Returns the pieces cut. */
LC_API long long lc_push_kept(lc_fifo *f, lc_packet *p, const unsigned char *keep);

/* ---- logged events ---------------------------------------------------------------- */

/* An event of the Mahimahi-format logs: an arrival (len bytes), a drop (len packets, x
   bytes), an opportunity (x bytes granted), a departure (len bytes, x = its arrival
   time) or a CE mark (len packets, x bytes). One event per segment for arrivals and departures, so that offload and plain
   mode log the same lines. */
enum { LC_ARRIVAL = 0, LC_DROP = 1, LC_OPPORTUNITY = 2, LC_DEPARTURE = 3, LC_MARK = 4 };

typedef struct {
    int64_t t, x;
    int32_t kind, len;
} lc_event;

typedef struct {
    lc_event *ev;
    size_t n, cap;
    long long lost;             /* events not kept for want of memory */
} lc_log;

LC_API void lc_log_add(lc_log *l, int kind, int64_t t, long long len, long long x);
LC_API void lc_log_free(lc_log *l);

/* The most bytes one event's log line takes (see lc_format_events). */
#define LC_EVENT_LINE_MAX 96
/* ev[0..n) as lines of a Mahimahi-format log, in their order, times in ms since base_ns:
   exactly traces/mmlinklog.py's LinkLogWriter.event_line (the time rounded half-even to
   3 decimals, written as an integer when that is whole; "+ len", "d len x", "# x",
   "m len x", "- len delay_ms" with the delay (t - x) rounded half-even to whole ms), the
   reference replay/cell.py's _log_lines. out holds n * LC_EVENT_LINE_MAX bytes; returns
   the bytes written (no terminating NUL). */
LC_API size_t lc_format_events(const lc_event *ev, size_t n, int64_t base_ns, char *out);

/* ---- where departures go ---------------------------------------------------------- */

typedef struct {
    void (*write)(void *ctx, const unsigned char *data, int len);
    void *ctx;
    long long errors;           /* pieces that could not be made (no memory) */
} lc_sink;

/* ---- random numbers --------------------------------------------------------------- */

/* splitmix64; uniform in [0, 1) with 53 bits: (next >> 11) * 2^-53. The same generator as
   replay/rng.py's SplitMix64, so a seeded queue draws the same coins in C and Python. */
LC_API uint64_t lc_rng_next(uint64_t *state);
LC_API double lc_rng_uniform(uint64_t *state);

/* ---- ECN (RFC 3168): replay/ecn.py ------------------------------------------------- */

enum { LC_NOT_ECT = 0, LC_ECT1 = 1, LC_ECT0 = 2, LC_CE = 3 };
/* The ECN codepoint of the IP packet at ip (n bytes). */
LC_API int lc_ecn_of(const unsigned char *ip, int n);
/* Set CE on an ECN-capable packet (the IPv4 header checksum updated by RFC 1624 eq. 3);
   1 when it is ECN-capable (CE already: left as it is), 0 when not (never changed). */
LC_API int lc_mark_ce(unsigned char *ip, int n);

/* ---- a link: one queue and its byte-granular server --------------------------------- */

/* The queue disciplines of replay/queues.py. CoDel, PIE and L4S (DualPI2) decide per
   packet: a link with one of them is fed packets of one segment (no GSO super-packets). */
enum { LC_INFINITE = 0, LC_DROPTAIL = 1, LC_DROPHEAD = 2, LC_CODEL = 3, LC_PIE = 4, LC_L4S = 5 };

/* The parameters and state of an AQM (see replay/queues.py for the algorithms). */
typedef struct {
    int ecn;                    /* mark ECN-capable packets instead of dropping them */
    uint64_t rng;
    /* CoDel (RFC 8289) */
    int64_t target_ns, interval_ns, first_above, drop_next;
    long long count, last_count;
    int dropping;
    /* PIE (RFC 8033) and DualPI2 (RFC 9332) */
    double ref_s, drop_prob, qdelay_s, qdelay_old_s;
    int64_t burst_ns, burst_left, next_update;
    int updated;                /* next_update is set (the first update only sets it) */
    int64_t step_ns, tupdate_ns, tshift_ns;
    double target_s, p_base, prev_s;
} lc_aqm;

typedef struct {
    int qkind;
    long long lim_p, lim_b;     /* 0: no limit of that kind */
    lc_fifo q;                  /* the queue (the classic queue of L4S) */
    lc_fifo lq;                 /* L4S: the L queue (ECT(1) and CE packets) */
    lc_aqm aqm;
    lc_packet *svc;             /* in service: segment seg is served, [lo, seg) done, not yet emitted */
    int seg;
    long long seg_left;         /* bytes of segment seg still to serve; 0: not started */
    /* counters, in segments and plain-mode bytes */
    long long arr_p, arr_b, dep_p, dep_b, drop_p, drop_b, served_bytes;
    long long marks_p, marks_b;
    long long superpackets, pieces;
    lc_log *log;                /* NULL: no log */
} lc_link;

LC_API void lc_link_init(lc_link *l, int qkind, long long lim_p, long long lim_b);
/* The AQM's parameters (after lc_link_init): ecn, the generator's seed and, by discipline,
   CoDel (target ns, interval ns), PIE (qdelay_ref s, max_burst ns), L4S (step ns, target s,
   tupdate ns, tshift ns). */
LC_API void lc_link_aqm(lc_link *l, int ecn, uint64_t seed, double a, double b, double c, double d);
LC_API void lc_link_free(lc_link *l);
/* p arrives at now: counted, logged and queued (or dropped) by the discipline. */
LC_API void lc_enqueue(lc_link *l, lc_packet *p, int64_t now);
/* A copy of buf (len bytes, off of them a vnet header) arrives at now, as lc_enqueue; without
   memory for the copy it arrives and is dropped (counted and logged as a drop). */
LC_API void lc_enqueue_copy(lc_link *l, const unsigned char *buf, long len, int off, int64_t now);
/* Serve up to budget bytes at time t (a TTI's end); a segment leaves with its last byte,
   written to out. Returns the bytes served (less than budget only when the link ran empty). */
LC_API long long lc_serve(lc_link *l, long long budget, int64_t t, lc_sink *out);
/* Segments and bytes held: the queue and the unserved part of the packet in service. */
LC_API void lc_backlog(const lc_link *l, long long *bytes, long long *packets);
LC_API int lc_busy(const lc_link *l);

/* ---- the TTI grid of a capacity trace ----------------------------------------------- */

/* The integer budget of an amount of (possibly fractional) bytes, the remainder carried:
   total = carry + amount, budget = floor(total + LC_CARRY_EPS), carry = total - budget (a
   total within LC_CARRY_EPS of a whole byte counts as whole: float sums such as ten times
   0.1). The one rule, also replay/server.py's carry_budget. */
#define LC_CARRY_EPS 1e-9
LC_API long long lc_carry_budget(double *carry, double amount);

/* Clock time (ns) at which TTI k starts: start + floor(k * num / den), exact. */
LC_API int64_t lc_boundary(int64_t start, long long num, long long den, long long k);

/* One row per TTI served (replay/server.py's RECORD_COLUMNS): tti, capacity (budget),
   served, backlog bytes and packets after service, drops packets and bytes and arrivals
   bytes since the previous row. */
typedef struct {
    int64_t (*row)[8];
    size_t n, cap;
    long long lost;             /* rows not kept for want of memory */
    long long seen_arr_b, seen_drop_p, seen_drop_b;
} lc_rows;

LC_API void lc_rows_free(lc_rows *r);

typedef struct {
    double *cap;                /* bytes per TTI, repeated */
    size_t n;
    long long num, den;         /* TTI length in ns = num / den */
    int64_t start, end;         /* when TTI 0 starts; when TTI k ends */
    long long k;                /* the next TTI to serve */
    double carry;
    long long capacity_bytes;   /* integer budgets offered so far */
    lc_rows *rows;              /* NULL: no per-TTI rows */
} lc_grid;

/* 0, or -1 without memory (cap is copied). */
LC_API int lc_grid_init(lc_grid *g, const double *cap, size_t n, long long num, long long den, int64_t start);
LC_API void lc_grid_free(lc_grid *g);
/* Serve every TTI of l that ended at or before now (TTI k's budget at its end); log
   opportunities when l has a log, a row per TTI when g has rows. */
LC_API void lc_grid_advance(lc_grid *g, lc_link *l, int64_t now, lc_sink *out);

/* ---- the workload rule (airlink link --mode workload): replay/workload.py ----------- */

/* One direction of a CellReplay trace set served by the state of the application's own
   queue: the rule of replay/workload.py's WorkloadStage (its docstring and docs/replay.md,
   "The rule"), decision for decision. Every release time is decided when the packet
   arrives, so the stage around it holds its packets in an lc_fifo by release time, as a
   delay does. Times are ns; the trace's milliseconds are given already in ns. */
#define LC_PDO_BYTES 1400               /* a delivery opportunity (CellReplay's PACKET_SIZE) */
#define LC_PDO_RESOLUTION_NS 1000000LL  /* recorded PDOs are whole milliseconds */

typedef struct {
    /* the trace set (copied) */
    int64_t start, idle;                /* the shell's start; the idle time beyond the resolution */
    size_t ntrains;
    int64_t *train_t, *train_d;         /* light train i: when recorded, its base delay */
    size_t *pdo_at;                     /* train i's PDOs: pdo[pdo_at[i] .. pdo_at[i + 1]) */
    int64_t *pdo;
    int64_t light_period;
    size_t longest;                     /* PDOs of the longest train */
    int64_t *heavy;                     /* heavy opportunities (one loop) */
    size_t nheavy;
    int64_t heavy_period;
    int64_t *offset;                    /* size offset of a packet of s bytes: offset[min(s, n - 1)]; none: n = 0 */
    size_t noffset;
    /* state */
    int started;                        /* a packet has arrived (free is set) */
    int64_t free, light_free, burst_start, burst_delay;
    size_t burst_train;
    int64_t *pdos;                      /* the burst's PDO times (room for longest) */
    size_t npdos;
    long long k, room;
    long long h_index, h_room, h_first; /* heavy opportunity last used (-1: none), first used (-1) */
    int64_t last_release;
    /* counters */
    long long light_packets, heavy_packets, bursts, heavy_bytes;
} lc_workload;

/* 0, or -1 without memory or for a trace set the rule cannot serve (no train, an empty
   train, no heavy opportunity, a heavy period or light period not positive). pdo_len[i]
   PDOs of train i follow each other in pdo. */
LC_API int lc_workload_init(lc_workload *w, int64_t start, int64_t idle, int64_t light_period,
                            const int64_t *train_t, const int64_t *train_d, const int64_t *pdo_len,
                            const int64_t *pdo, size_t ntrains, const int64_t *heavy, size_t nheavy,
                            int64_t heavy_period, const int64_t *offset, size_t noffset);
LC_API void lc_workload_free(lc_workload *w);
/* When a packet of size bytes arriving at t leaves the shell; updates the state. */
LC_API int64_t lc_workload_release(lc_workload *w, int64_t t, long long size);
/* Heavy opportunities from the first one used to the last, used or not. */
LC_API long long lc_workload_heavy_span(const lc_workload *w);

#endif
