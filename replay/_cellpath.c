/*
 * airlink.replay._cellpath: the per-packet path of the cell shell (``airlink cell``) in C.
 *
 * One object holds the cell's packets: the outer TUN (downlink packets in, uplink packets
 * out), one inner TUN per UE, and one base-station queue per UE (any queue of
 * replay/queues.py, in the shells' link core replay/_linkcore.c; CoDel, PIE and L4S
 * take their parameters with set_aqm) with byte-granular service (as
 * replay/server.py's ByteServer: the head packet may be split across TTIs and departs
 * with its last byte; the packet in service is outside the queue, so it counts toward no
 * limit). A UE's uplink is unconstrained (its packets go straight out) or, after
 * set_uplink(), an infinite queue served byte-granularly by a per-TTI capacity trace of its
 * own grid (as replay/stages.py's LinkStage: TTI k's capacity, plus the fraction of a byte
 * carried from TTI k-1, is served at the end of TTI k to the bytes queued by then; the trace
 * repeats; a packet read at time t is queued after the TTIs that ended by t were served).
 *
 * Offload mode (Cell(..., vnet=10)): every TUN device was opened with IFF_VNET_HDR (and,
 * where the kernel allows, TUNSETOFFLOAD), so every packet read or written starts with a
 * virtio_net_hdr and may be a GSO super-packet of up to 64 KB. Packets are read straight
 * into the link core's pooled buffers; a downlink super-packet is queued whole in its UE's
 * link, which counts, limits and serves it as the segments the kernel would have sent
 * without offload and cuts it into pieces where a TTI's budget ends inside it (lc_piece);
 * an unconstrained uplink packet goes out as read, counted as its segments. vnet=0: plain
 * packets of one segment each.
 *
 * The TTIs are decided in one of two ways. The compiled step (set_step, set_chunk, run):
 * Cell.run() moves packets and, at every TTI's end, decides the TTI here in C - with the
 * GIL released, for many TTIs per call - by calling the simulator's step compiled as a C
 * function (airlink.sim.kernel_live.live_step, a numba cfunc: the same code as ``airlink
 * simulate``). The Python step (the readable reference, and the only one for a scheduler
 * given as a Python class): Python decides once per TTI (airlink.sim.step.Radio.step with
 * the live backlogs, replay/cell.py's decide_and_serve) and in between Cell.wait() moves
 * packets until the TTI's end or until one of the given process fds (pidfds) is readable.
 * Both decide a TTI alike: backlog = max(queued bytes - carry, 0) per UE, the step, then
 * each UE's budget = lc_carry_budget(carry, served) is served at the TTI's end.
 *
 *     cell.wait(deadline_ns, pidfds)   -> index of a readable pidfd, or -1 at the deadline
 *     cell.backlog(bytes_f8)           -> the bytes each UE has queued (float64 array)
 *     cell.serve(budgets_i8, bb_f8, bp_i8, arr_f8, dp_i8, db_i8, mp_i8[, t_end_ns])
 *         serve each UE's integer budget of bytes now (departures written to its TUN),
 *         then fill the row: backlog bytes/packets after service, arrivals bytes,
 *         drops packets/bytes and CE marks (packets) since the previous serve() (the
 *         first: since the start)
 *
 *     cell.set_aqm(ue, (ecn, seed, a, b, c, d))
 *         UE ue's (0-based) queue parameters, as lc_link_aqm in replay/_linkcore.h (before
 *         the first packet: replay.queues.core_parameters of that UE's Python queue)
 *     cell.set_uplink(ue, capacity_f8, tti_num, tti_den, start_ns)
 *         constrain UE ue's (0-based) uplink: capacity bytes per TTI, the TTI as the
 *         fraction tti_num/tti_den of a nanosecond, TTI 0 starting at start_ns
 *     cell.set_step(address, carry_f8, start_ns, tti_num, tti_den, late_ns)
 *         the compiled step: a C function void step(const int64_t *block, int64_t i,
 *         int64_t k); the carry per UE (float64, kept and updated here); TTI k ends at
 *         start_ns + (k + 1) * tti_num / tti_den; a TTI decided more than late_ns after
 *         its end is late
 *     cell.set_chunk(block_i8, k0, served_f8, bb, bp, arr, dp, db, mp, seen_f8, late_b1, lateness_i8)
 *         the chunk of TTIs k0 .. k0 + rows - 1: the step's argument block, the step's
 *         served bytes (rows x UEs) and the live columns it fills (the arrays of serve(),
 *         then the backlogs the step saw, late and lateness in microseconds)
 *     cell.run(k, k_stop, wake_ns, pidfds)  -> (next k, index of a readable pidfd or -1)
 *         decide every TTI k .. k_stop - 1 once it has ended, moving packets in between;
 *         returns when k_stop is reached, a pidfd is readable, wake_ns has passed or (with
 *         log=True) more than LOG_DRAIN events wait to be taken. Counts ttis, late_ttis
 *         and max_lateness_ns.
 *     cell.set_uplink_slots(on)   -> the slotted uplink on or off (see below)
 *     cell.close()         -> finishes the queued writes and stops the writer and rescuer
 *                             threads (also when the object is freed)
 *     cell.take_events([uplink])  -> with log=True: per UE, the arrivals, drops,
 *         opportunities and departures since the last call (for the Mahimahi-format logs),
 *         as raw records: the downlink's, or with uplink=True the constrained uplink's
 *
 * A packet read at or after the deadline stays in the kernel until the TTI has been
 * decided: TTIs that ended before a packet was read are decided without it.
 *
 * The slotted uplink (set_uplink_slots(True); replay/cell.py turns it on while the TTI clock
 * runs): a UE's unconstrained uplink is read only at the end of every TTI, when that TTI is
 * decided (run()) or served (serve()): every packet its device holds then goes out, before
 * the TTI's downlink is served - the uplink of TTI k, sent by the UE during it, leaves at its
 * end, as a UE transmits in its uplink slots. So a packet waits less than one TTI for the
 * boundary, an ACK that the TTI's downlink service itself produces (the UE's TCP runs inside
 * the write) exactly one, and the loop does not wake between TTIs for the UEs' packets (their
 * devices are out of the loop's epoll set, in one of their own that is asked once per TTI).
 * A constrained uplink is read as its packets come (it has its own grid). Off, every device
 * is read as its packets come.
 *
 * Rescuers (rescue_ns > 0): a CPU can stop running anything for a millisecond - a
 * hypervisor that deschedules the virtual CPU, a long non-preemptible kernel path on a
 * kernel without full preemption - and the loop, asleep until the TTI's end, then wakes
 * that much late although another CPU is free. Two small threads, each pinned to one of
 * the first two CPUs the process may use, wake rescue_ns after the deadline of every
 * wait(); one that wakes while the loop has still not come back from that wait moves the
 * loop (sched_setaffinity) to its own CPU, which is running, so the loop runs there at
 * once; the loop takes back the CPU set it had when the Cell was made as wait() returns.
 * The loop only publishes each wait's deadline (atomic stores, no system call); a rescuer
 * sleeps on its own timer until rescue_ns after the deadline of the wait in progress or,
 * when the loop is between two waits, after the next deadline it expects (the last one
 * plus the interval between the last two: one TTI): one wake-up per TTI. A rescuer on the
 * CPU the loop entered its wait on could not run if that CPU stalled, so it stands by (looks
 * again only every STANDBY_TTIS TTIs); one that starts standing by wakes the others, since
 * the loop, now on its CPU, may have left theirs.
 * They change only the affinity of the shell's own loop thread, and count what they did
 * (cell.rescues).
 *
 * The writer (Cell(..., writer=1); off by default, replay/cell.py's _writer_wanted): a TUN write runs the receiving side's protocol stack in
 * the writer's context (the UE's TCP on a downlink write, the server's on an uplink one),
 * tens of microseconds per write - most of a 0.125 ms TTI for 20 UEs. With the writer,
 * the loop copies every packet it serves (a served packet or piece, downlink or constrained
 * uplink) into a ring of WRITER_RING bytes and hands a TTI's writes over at once (one
 * wake-up); a second thread writes them, in the order they were queued (so in order per
 * device), while the loop decides the next TTI. An unconstrained uplink packet, which
 * arrives alone at any moment, is still written by the loop (a wake-up of the writer per
 * packet would cost more than the write). The service, rows,
 * counters and log events are the loop's and do not change: a packet's time is still the
 * TTI that served it, only its write() comes later, usually microseconds. A full ring
 * makes the loop wait for room. close() (and freeing the Cell) lets the writer finish every
 * queued write and joins it; failed writes count in write_errors. The writer blocks every
 * signal (they stay with Python's thread) and, when the loop runs under a real-time policy,
 * runs one priority below it, so that the loop preempts it (where the kernel allows: not
 * inside a write on a kernel without preemption).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "structmember.h"
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <linux/futex.h>
#include <sys/epoll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "_linkcore.h"

#define READ_BATCH 64           /* packets per fd and wake-up at most */
#define UPLINK_DRAIN 1024       /* packets per UE and TTI end at most, with the slotted uplink */
#define MAX_WAIT_FDS 4096
#define PIDFD_TAG (1ULL << 32)  /* epoll data of a pidfd: the tag and the fd; of a device: its index */
#define MAX_RESCUERS 2
#define LOG_DRAIN 8192          /* run() returns once this many logged events wait */
#define CHUNK_ARRAYS 10         /* set_chunk's arrays after the block */
#define WRITER_RING (1 << 22)   /* bytes of queued writes (records of 8 + len bytes, 8-aligned) */

typedef void (*step_fn)(const int64_t *block, int64_t i, int64_t k);

typedef struct {
    lc_link dl;                                            /* the base station's queue and server */
    lc_log dl_log, ul_log;                                 /* logged events: downlink, uplink */
    long long up_p, up_b;                                  /* uplink arrivals */
    /* a constrained uplink (set_uplink; up_on 0: unconstrained, packets go straight out) */
    int up_on;
    lc_link ul;
    lc_grid up;
    long long seen_arr_b, seen_drop_p, seen_drop_b, seen_marks_p;   /* at the previous row */
    int fd;
} UE;

typedef struct {
    PyObject_HEAD
    int n, outer_fd, shift, log, uplinks;
    uint32_t net_base, net_mask;
    UE *ue;
    long long unroutable, write_errors, last_ns, log_lost;
    int vnet;                       /* virtio_net_hdr bytes in front of every packet: 0 or 10 */
    lc_packet *spare;               /* the buffer of the next read */
    /* the devices and the watched pidfds in one epoll set (registered once, not per wait) */
    int epfd;
    struct epoll_event *evs;
    /* the slotted uplink (set_uplink_slots, see the top): the unconstrained UEs' devices, out of
       epfd while it is on, in an epoll set of their own that is only asked at TTI ends */
    int up_epfd, slotted, up_failed;
    unsigned *rev;                  /* events per device of one wake-up: outer, then the UEs' */
    int *pidfds, n_pidfds;          /* the pidfds registered, in the caller's order */
    /* rescuers (see the top) */
    pthread_t resc[MAX_RESCUERS];
    int n_resc, resc_cpu[MAX_RESCUERS];
    pid_t loop_tid;
    cpu_set_t loop_mask;
    long long rescue_ns, rescues;
    _Atomic uint32_t seq;           /* the number of the last wait() published (0: none yet) */
    _Atomic int64_t pub_deadline;   /* the deadline of wait() number seq ... */
    _Atomic int64_t pub_period;     /* ... and how much later it was than the one before */
    _Atomic uint32_t returned;      /* the seq of the last wait() that returned */
    _Atomic uint32_t resc_kick[MAX_RESCUERS];  /* rescuer i sleeps on word i: changed (and woken) to look again */
    _Atomic int pub_cpu;            /* the CPU the loop entered wait() number seq on */
    _Atomic int moved, stop;
    /* the compiled step (set_step, set_chunk) */
    step_fn step;
    Py_buffer carry_buf, block_buf, chunk[CHUNK_ARRAYS];
    int has_carry, has_chunk;
    long long k0, rows, tti_num, tti_den, late_ns;
    int64_t start_ns;
    long long ttis, late_ttis, max_late_ns;
    /* the writer (see the top); the ring's positions count bytes since the start */
    int writer;                     /* 1 while the writer thread runs */
    pthread_t wr_th;
    unsigned char *ring;
    uint64_t ring_head;             /* the loop's: bytes queued (published to wr_head) */
    _Atomic uint64_t wr_head, wr_tail;      /* published by the loop; written by the writer */
    _Atomic uint32_t wr_wake, wr_room;      /* futex words: work queued; room made */
    _Atomic int wr_sleeping, wr_waiting, wr_stop;
    long long writes_queued, writer_waits;
} Cell;

static long futex(_Atomic uint32_t *word, int op, uint32_t val, const struct timespec *ts) {
    return syscall(SYS_futex, (uint32_t *)word, op, val, ts, NULL, FUTEX_BITSET_MATCH_ANY);
}

/* ---- the writer (see the top) ---------------------------------------------------------- */

#define REC_HDR 8                                   /* int32 fd (-1: skip to the ring's start), int32 len */
#define REC_SIZE(len) (REC_HDR + (((uint64_t)(len) + 7) & ~(uint64_t)7))

static void wake_word(_Atomic uint32_t *word) {
    atomic_fetch_add(word, 1);
    futex(word, FUTEX_WAKE_PRIVATE, 1, NULL);
}

static void ring_publish(Cell *c);

/* the loop waits until the ring has room for need more bytes */
static void ring_room(Cell *c, uint64_t need) {
    if (WRITER_RING - (c->ring_head - atomic_load(&c->wr_tail)) >= need) return;
    ring_publish(c);
    while (WRITER_RING - (c->ring_head - atomic_load(&c->wr_tail)) < need) {
        uint32_t w = atomic_load(&c->wr_room);
        atomic_store(&c->wr_waiting, 1);
        if (WRITER_RING - (c->ring_head - atomic_load(&c->wr_tail)) < need)
            futex(&c->wr_room, FUTEX_WAIT_PRIVATE, w, NULL);
        atomic_store(&c->wr_waiting, 0);
        c->writer_waits++;
    }
}

/* queue a write of len bytes to fd (a copy) and wake the writer if it sleeps */
static void ring_push(Cell *c, int fd, const unsigned char *data, int len) {
    uint64_t need = REC_SIZE(len), pos = c->ring_head & (WRITER_RING - 1), end = WRITER_RING - pos;
    if (end < need) {                               /* no room before the end: skip to the start */
        ring_room(c, end + need);
        int32_t skip[2] = {-1, 0};
        memcpy(c->ring + pos, skip, sizeof skip);
        c->ring_head += end;
        pos = 0;
    } else {
        ring_room(c, need);
    }
    int32_t hdr[2] = {fd, len};
    memcpy(c->ring + pos, hdr, sizeof hdr);
    memcpy(c->ring + pos + REC_HDR, data, (size_t)len);
    c->ring_head += need;
    c->writes_queued++;
}

/* hand the writes queued since the last call to the writer (one wake-up for a TTI's writes) */
static void ring_publish(Cell *c) {
    if (!c->writer || atomic_load(&c->wr_head) == c->ring_head) return;
    atomic_store(&c->wr_head, c->ring_head);
    if (atomic_load(&c->wr_sleeping)) wake_word(&c->wr_wake);
}

/* failed writes and pieces that could not be made, counted by the loop and the writer alike */
static inline void count_write_errors(Cell *c, long long n) {
    if (n) __atomic_fetch_add(&c->write_errors, n, __ATOMIC_RELAXED);
}

static void *writer_main(void *arg) {
    Cell *c = arg;
    uint64_t tail = atomic_load(&c->wr_tail);
    for (;;) {
        uint64_t head = atomic_load(&c->wr_head);
        if (head == tail) {
            if (atomic_load(&c->wr_stop)) break;    /* every queued write is done */
            uint32_t w = atomic_load(&c->wr_wake);
            atomic_store(&c->wr_sleeping, 1);
            if (atomic_load(&c->wr_head) == tail && !atomic_load(&c->wr_stop))
                futex(&c->wr_wake, FUTEX_WAIT_PRIVATE, w, NULL);
            atomic_store(&c->wr_sleeping, 0);
            continue;
        }
        while (tail != head) {
            uint64_t pos = tail & (WRITER_RING - 1);
            int32_t hdr[2];
            memcpy(hdr, c->ring + pos, sizeof hdr);
            if (hdr[0] < 0) {
                tail += WRITER_RING - pos;
            } else {
                if (write(hdr[0], c->ring + pos + REC_HDR, (size_t)hdr[1]) < 0)
                    count_write_errors(c, 1);
                tail += REC_SIZE(hdr[1]);
            }
            atomic_store(&c->wr_tail, tail);
            if (atomic_load(&c->wr_waiting)) wake_word(&c->wr_room);
        }
    }
    return NULL;
}

/* start the writer: signals blocked in it; under a real-time policy one priority below the
   calling (loop) thread; 0 or errno */
static int start_writer(Cell *c) {
    c->ring = malloc(WRITER_RING);
    if (!c->ring) return ENOMEM;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    int policy;
    struct sched_param sp;
    if (pthread_getschedparam(pthread_self(), &policy, &sp) == 0 && (policy == SCHED_RR || policy == SCHED_FIFO) &&
        sp.sched_priority > sched_get_priority_min(policy)) {
        sp.sched_priority--;
        pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
        pthread_attr_setschedpolicy(&attr, policy);
        pthread_attr_setschedparam(&attr, &sp);
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);         /* signals stay with Python's thread */
    int err = pthread_create(&c->wr_th, &attr, writer_main, c);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (err) { free(c->ring); c->ring = NULL; return err; }
    c->writer = 1;
    return 0;
}

/* the writer finishes every queued write and ends; later writes are the loop's own */
static void stop_writer(Cell *c) {
    if (!c->writer) return;
    atomic_store(&c->wr_stop, 1);
    wake_word(&c->wr_wake);
    pthread_join(c->wr_th, NULL);
    c->writer = 0;
    free(c->ring);
    c->ring = NULL;
}

/* departures to a TUN device (a served packet or piece): queued for the writer (handed over
   by ring_publish), or written now; failures counted */
typedef struct { int fd; Cell *c; } FdSink;


static void fd_write(void *ctx, const unsigned char *data, int len) {
    FdSink *s = ctx;
    if (s->c->writer) ring_push(s->c, s->fd, data, len);
    else if (write(s->fd, data, (size_t)len) < 0) count_write_errors(s->c, 1);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* the UE (0-based) whose address part holds the IPv4 destination, or -1 */
static int ue_of(Cell *c, const unsigned char *p, int len) {
    if (len < 20 || (p[0] >> 4) != 4) return -1;
    uint32_t dst = ((uint32_t)p[16] << 24) | ((uint32_t)p[17] << 16) | ((uint32_t)p[18] << 8) | p[19];
    if ((dst & c->net_mask) != c->net_base) return -1;
    long long u = ((long long)(dst - c->net_base) >> c->shift) - 1;
    return (u >= 0 && u < c->n) ? (int)u : -1;
}

/* serve every uplink TTI of u that ended at or before now */
static void advance_uplink(Cell *c, UE *u, int64_t now) {
    if (u->up.end > now) return;
    FdSink sink = {c->outer_fd, c};
    lc_sink out = {fd_write, &sink, 0};
    if (lc_busy(&u->ul)) c->last_ns = now;
    lc_grid_advance(&u->up, &u->ul, now, &out);
    count_write_errors(c, out.errors);
}

/* serve the uplinks due by now; the earliest end of a TTI that has bytes to serve, or limit */
static int64_t uplinks_due(Cell *c, int64_t now, int64_t limit) {
    int64_t next = limit;
    for (int i = 0; i < c->n; i++) {
        UE *u = &c->ue[i];
        if (!u->up_on) continue;
        advance_uplink(c, u, now);
        if (lc_busy(&u->ul) && u->up.end < next) next = u->up.end;
    }
    return next;
}

/* a failed read: 0 when the device is only empty for now, else the errno */
static int read_failure(void) {
    return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : errno;
}

/* the next read's buffer (a packet buffer of the core, read into without a copy), or NULL
   without memory (the packets then stay in the kernel) */
static lc_packet *spare(Cell *c) {
    if (!c->spare) c->spare = lc_buffer();
    return c->spare;
}

/* read what the outer TUN holds (downlink): at most READ_BATCH packets (or super-packets),
   none once the deadline has passed (the TTI is decided first: the clock is read before
   every packet, since moving one can cost tens of microseconds of the kernel's TCP work);
   0 or an errno */
static int read_outer(Cell *c, int64_t deadline) {
    for (int i = 0; i < READ_BATCH; i++) {
        int64_t now = now_ns();
        if (now >= deadline || !spare(c)) break;
        ssize_t r = read(c->outer_fd, c->spare->data, LC_MAX_PACKET);
        if (r < 0) return read_failure();
        int u = ue_of(c, c->spare->data + c->vnet, (int)r - c->vnet);
        if (u < 0) { c->unroutable++; continue; }
        lc_link *l = &c->ue[u].dl;
        lc_packet *p = lc_buffer_packet(&c->spare, r, c->vnet);
        if (p) lc_enqueue(l, p, now);
        else lc_enqueue_copy(l, c->spare->data, r, c->vnet, now);   /* no memory: counted as a drop */
    }
    return 0;
}

/* a UE's uplink packets go straight out (as read_outer), or into its constrained uplink: at
   most batch packets, none once the deadline has passed; arrivals counted as segments and
   their plain-mode bytes; 0 or an errno */
static int read_inner(Cell *c, UE *u, int64_t deadline, int batch) {
    for (int i = 0; i < batch; i++) {
        int64_t now = now_ns();
        if (now >= deadline || !spare(c)) break;
        ssize_t r = read(u->fd, c->spare->data, LC_MAX_PACKET);
        if (r < 0) return read_failure();
        if (!u->up_on) {                    /* straight out: counted in the read buffer */
            lc_packet *b = c->spare;
            if (lc_buffer_parse(b, r, c->vnet) < 0) continue;
            u->up_p += b->nseg;
            u->up_b += lc_wire(b, 0, b->nseg);
            if (write(c->outer_fd, b->data, (size_t)r) < 0) count_write_errors(c, 1);
            continue;
        }
        lc_packet *p = lc_buffer_packet(&c->spare, r, c->vnet);
        if (!p) {
            if (r < c->vnet) continue;
            /* no memory: one packet, dropped */
            u->up_p++;
            u->up_b += r - c->vnet;
            advance_uplink(c, u, now);
            lc_enqueue_copy(&u->ul, c->spare->data, r, c->vnet, now);
            continue;
        }
        u->up_p += p->nseg;
        u->up_b += lc_wire(p, 0, p->nseg);
        advance_uplink(c, u, now);          /* TTIs that ended before it came go without it */
        lc_enqueue(&u->ul, p, now);
    }
    return 0;
}
/* the slotted uplink at a TTI's end: every packet the unconstrained UEs' devices hold now
   goes out (at most UPLINK_DRAIN per UE: a TUN device queues no more than 500 anyway); a
   device that fails is remembered in up_failed, which the next wait() or run() raises */
static void drain_uplinks(Cell *c) {
    if (!c->slotted || c->up_failed) return;
    int got = epoll_wait(c->up_epfd, c->evs, c->n, 0);
    if (got < 0) {
        if (errno != EINTR) c->up_failed = errno;
        return;
    }
    for (int i = 0; i < got && !c->up_failed; i++) {
        UE *u = &c->ue[c->evs[i].data.u64];
        c->up_failed = read_inner(c, u, INT64_MAX, UPLINK_DRAIN);
        if (!c->up_failed && (c->evs[i].events & (EPOLLERR | EPOLLHUP))) c->up_failed = EIO;
    }
    if (got > 0) c->last_ns = now_ns();
}

/* the slotted uplink on or off: the unconstrained UEs' devices leave the loop's epoll set (read
   at TTI ends only) or join it again (read as packets come); 0 or an errno */
static int slot_uplinks(Cell *c, int on) {
    if (on == c->slotted) return 0;
    for (int i = 0; i < c->n; i++) {
        if (c->ue[i].up_on) continue;
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)(i + 1)};
        if (epoll_ctl(c->epfd, on ? EPOLL_CTL_DEL : EPOLL_CTL_ADD, c->ue[i].fd, &ev) != 0) return errno;
    }
    c->slotted = on;
    return 0;
}

/* ---- rescuers -------------------------------------------------------------------------- */

#define STANDBY_TTIS 8          /* a rescuer on the loop's CPU looks again after this many TTIs */

/* every rescuer but number but (-1: all) looks again at once */
static void kick_rescuers(Cell *c, int but) {
    for (int i = 0; i < c->n_resc; i++)
        if (i != but) wake_word(&c->resc_kick[i]);
}

typedef struct { Cell *c; int i; } RescuerArg;

static void *rescuer_main(void *arg) {
    RescuerArg a = *(RescuerArg *)arg;
    free(arg);
    Cell *c = a.c;
    cpu_set_t own;
    CPU_ZERO(&own);
    CPU_SET(c->resc_cpu[a.i], &own);
    pthread_setaffinity_np(pthread_self(), sizeof own, &own);
    const int64_t r = c->rescue_ns;
    const int me = c->resc_cpu[a.i];
    uint32_t rescued = 0;
    int standby = 0;
    while (!atomic_load(&c->stop)) {
        uint32_t kick = atomic_load(&c->resc_kick[a.i]);
        int64_t now = now_ns();
        uint32_t s = atomic_load(&c->seq);
        int64_t d = atomic_load(&c->pub_deadline), period = atomic_load(&c->pub_period);
        int waiting = s != 0 && atomic_load(&c->returned) != s;
        if (waiting && d + r <= now && s != rescued) {
            /* the loop is still in a wait() whose deadline passed r ago: to this CPU */
            rescued = s;
            if (sched_setaffinity(c->loop_tid, sizeof own, &own) == 0) {
                atomic_store(&c->moved, 1);
                __atomic_fetch_add(&c->rescues, 1, __ATOMIC_RELAXED);
            }
        }
        /* the next look: r after this wait's deadline, or after the next one's (the last
           deadline plus the interval between the last two: the loop outside a wait, or
           this one looked at) */
        int64_t step = period > 0 ? period : r;
        int64_t t = waiting && d + r > now ? d + r : d + step + r;
        if (t <= now) t = now + step;
        /* the loop waits on this CPU: were it stalled, this thread could not run either, so
           it stands by (looks again after STANDBY_TTIS TTIs), and one that starts standing by
           wakes the others: the loop came to its CPU, so it may have left theirs */
        int here = atomic_load(&c->pub_cpu) == me;
        if (here && !standby) kick_rescuers(c, a.i);
        standby = here;
        if (standby) t = (d > now ? d : now) + STANDBY_TTIS * step;
        struct timespec ts = {t / 1000000000LL, t % 1000000000LL};
        futex(&c->resc_kick[a.i], FUTEX_WAIT_BITSET_PRIVATE, kick, &ts);   /* EINTR, EAGAIN: look again */
    }
    return NULL;
}

/* start the rescuers on the first two CPUs the calling (loop) thread may use; 0 or errno */
static int start_rescuers(Cell *c) {
    c->loop_tid = (pid_t)syscall(SYS_gettid);
    if (sched_getaffinity(0, sizeof c->loop_mask, &c->loop_mask) != 0) return errno;
    int k = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE && k < MAX_RESCUERS; cpu++)
        if (CPU_ISSET(cpu, &c->loop_mask)) c->resc_cpu[k++] = cpu;
    if (k < 2) return 0;                      /* one CPU: nowhere to move the loop to */
    atomic_store(&c->pub_cpu, -1);
    for (int i = 0; i < k; i++) {
        RescuerArg *a = malloc(sizeof *a);
        if (!a) return ENOMEM;
        a->c = c;
        a->i = i;
        int err = pthread_create(&c->resc[i], NULL, rescuer_main, a);
        if (err) { free(a); return err; }
        c->n_resc++;
    }
    return 0;
}

static void stop_rescuers(Cell *c) {
    if (!c->n_resc) return;
    atomic_store(&c->stop, 1);
    kick_rescuers(c, -1);
    for (int i = 0; i < c->n_resc; i++) pthread_join(c->resc[i], NULL);
    c->n_resc = 0;
    if (atomic_exchange(&c->moved, 0)) sched_setaffinity(c->loop_tid, sizeof c->loop_mask, &c->loop_mask);
}

/* the loop enters wait(deadline): the rescuers watch it (they wake on their own timers:
   nothing here wakes a thread) */
static uint32_t publish_wait(Cell *c, int64_t deadline) {
    if (!c->n_resc) return 0;
    int64_t last = atomic_load(&c->pub_deadline);
    if (last > 0 && deadline > last) atomic_store(&c->pub_period, deadline - last);
    atomic_store(&c->pub_deadline, deadline);
    atomic_store(&c->pub_cpu, sched_getcpu());
    return atomic_fetch_add(&c->seq, 1) + 1;
}

/* the loop is back from wait() number s: its CPU set again if a rescuer moved it */
static void wait_returned(Cell *c, uint32_t s) {
    if (!c->n_resc) return;
    atomic_store(&c->returned, s);
    if (atomic_exchange(&c->moved, 0)) sched_setaffinity(0, sizeof c->loop_mask, &c->loop_mask);
}

/* ---- methods -------------------------------------------------------------------------- */

/* the pidfds to watch (a sequence of fds): the epoll set follows it (pidfds no longer given
   leave it, new ones join; an fd closed since left it by itself); their number, or -1 */
static int set_pidfds(Cell *c, PyObject *fds) {
    PyObject *seq = PySequence_Fast(fds, "pidfds must be a sequence");
    if (!seq) return -1;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
    if (m > MAX_WAIT_FDS) { Py_DECREF(seq); PyErr_SetString(PyExc_ValueError, "too many fds"); return -1; }
    int want[MAX_WAIT_FDS];
    for (Py_ssize_t j = 0; j < m; j++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, j));
        if (v == -1 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
        if (v < 0 || v > INT_MAX) { Py_DECREF(seq); PyErr_SetString(PyExc_ValueError, "bad pidfd"); return -1; }
        want[j] = (int)v;
    }
    Py_DECREF(seq);
    if (m == c->n_pidfds && memcmp(want, c->pidfds, (size_t)m * sizeof(int)) == 0) return (int)m;
    for (int i = 0; i < c->n_pidfds; i++) {
        int keep = 0;
        for (Py_ssize_t j = 0; j < m && !keep; j++) keep = want[j] == c->pidfds[i];
        if (!keep) epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->pidfds[i], NULL);   /* EBADF: closed, gone */
    }
    for (Py_ssize_t j = 0; j < m; j++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = PIDFD_TAG | (uint32_t)want[j]};
        if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, want[j], &ev) != 0 &&
            (errno != EEXIST || epoll_ctl(c->epfd, EPOLL_CTL_MOD, want[j], &ev) != 0)) {
            PyErr_SetFromErrno(PyExc_OSError);
            c->n_pidfds = 0;                  /* registered anew on the next call */
            return -1;
        }
    }
    memcpy(c->pidfds, want, (size_t)m * sizeof(int));
    c->n_pidfds = (int)m;
    return (int)m;
}

/* wait for events until ts (relative): epoll_pwait2's nanoseconds, or where the kernel lacks
   it (Linux < 5.11) epoll_wait's milliseconds rounded down (the loop reads the clock again) */
static int wait_events(Cell *c, int max, const struct timespec *ts) {
    static int no_pwait2;
    if (!no_pwait2) {
        int got = (int)syscall(SYS_epoll_pwait2, c->epfd, c->evs, max, ts, NULL, (size_t)8);
        if (got >= 0 || errno != ENOSYS) return got;
        no_pwait2 = 1;
    }
    return epoll_wait(c->epfd, c->evs, max, (int)(ts->tv_sec * 1000 + ts->tv_nsec / 1000000));
}

/* move packets until the deadline (-1) or until the j-th of the m pidfds set is readable
   (j); *failed: an errno. Called without the GIL. */
static int move_packets(Cell *c, int64_t deadline, int m, int *failed) {
    int n = c->n;
    int ready = -1;
    *failed = c->up_failed;             /* a UE's device failed in a drain at a TTI's end */
    if (*failed) return -1;
    uint32_t published = publish_wait(c, deadline);
    for (;;) {
        int64_t now = now_ns();
        int64_t wake = c->uplinks ? uplinks_due(c, now, deadline) : deadline;
        ring_publish(c);                    /* the uplinks served, before the loop sleeps */
        if (now >= deadline) break;
        int64_t left = wake - now;
        if (left < 0) left = 0;
        struct timespec ts = {left / 1000000000LL, left % 1000000000LL};
        int got = wait_events(c, n + 1 + m, &ts);
        if (got < 0) {
            if (errno == EINTR) continue;
            *failed = errno;
            break;
        }
        if (got == 0) continue;             /* the clock is read again above */
        memset(c->rev, 0, (size_t)(n + 1) * sizeof *c->rev);
        for (int i = 0; i < got; i++) {
            uint64_t d = c->evs[i].data.u64;
            if (d & PIDFD_TAG) {
                for (int j = 0; j < c->n_pidfds; j++)       /* the first in the caller's order */
                    if (c->pidfds[j] == (int)(uint32_t)d && (ready < 0 || j < ready)) ready = j;
            } else {
                c->rev[d] = c->evs[i].events;
            }
        }
        int moved = 0;
        /* a device in error (removed from outside) fails its read, or else reports it */
        if (c->rev[0]) { *failed = read_outer(c, deadline); moved = 1; }
        if (!*failed && (c->rev[0] & (EPOLLERR | EPOLLHUP))) *failed = EIO;
        for (int u = 0; u < n && !*failed; u++)
            if (c->rev[1 + u]) {
                *failed = read_inner(c, &c->ue[u], deadline, READ_BATCH);
                moved = 1;
                if (!*failed && (c->rev[1 + u] & (EPOLLERR | EPOLLHUP))) *failed = EIO;
            }
        if (moved) c->last_ns = now_ns();
        if (*failed || ready >= 0) break;
    }
    ring_publish(c);
    wait_returned(c, published);
    return *failed ? -1 : ready;
}

static PyObject *Cell_wait(Cell *c, PyObject *args) {
    long long deadline;
    PyObject *fds;
    if (!PyArg_ParseTuple(args, "LO", &deadline, &fds)) return NULL;
    int m = set_pidfds(c, fds);
    if (m < 0) return NULL;
    int ready, failed;
    Py_BEGIN_ALLOW_THREADS
    ready = move_packets(c, deadline, m, &failed);
    Py_END_ALLOW_THREADS
    if (failed) { errno = failed; return PyErr_SetFromErrno(PyExc_OSError); }
    return PyLong_FromLong(ready);
}

static int get_buf(PyObject *obj, Py_buffer *b, const char *fmt, Py_ssize_t n, const char *what) {
    if (PyObject_GetBuffer(obj, b, PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return -1;
    if (b->len != n * b->itemsize || b->itemsize != 8 || strcmp(b->format, fmt) != 0) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_ValueError, "%s: need %zd values of type %s", what, n, fmt);
        return -1;
    }
    return 0;
}

static PyObject *Cell_backlog(Cell *c, PyObject *arg) {
    Py_buffer b;
    if (get_buf(arg, &b, "d", c->n, "backlog") < 0) return NULL;
    double *out = b.buf;
    for (int u = 0; u < c->n; u++) {
        long long bytes, packets;
        lc_backlog(&c->ue[u].dl, &bytes, &packets);
        out[u] = (double)bytes;
    }
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
}

/* serve UE i's budget at t_end, then fill element i of the row: backlog bytes/packets after
   service, arrivals bytes, drops packets/bytes and marks since the previous row */
static void serve_ue(Cell *c, int i, long long budget, int64_t t_end, double *bb, long long *bp,
                     double *arr, long long *dp, long long *db, long long *mp) {
    UE *u = &c->ue[i];
    FdSink sink = {u->fd, c};
    lc_sink out = {fd_write, &sink, 0};
    lc_link *l = &u->dl;
    lc_serve(l, budget, t_end, &out);
    count_write_errors(c, out.errors);
    long long bytes, packets;
    lc_backlog(l, &bytes, &packets);
    bb[i] = (double)bytes;
    bp[i] = packets;
    arr[i] = (double)(l->arr_b - u->seen_arr_b);
    dp[i] = l->drop_p - u->seen_drop_p;
    db[i] = l->drop_b - u->seen_drop_b;
    mp[i] = l->marks_p - u->seen_marks_p;
    u->seen_arr_b = l->arr_b;
    u->seen_drop_p = l->drop_p;
    u->seen_drop_b = l->drop_b;
    u->seen_marks_p = l->marks_p;
}

static PyObject *Cell_serve(Cell *c, PyObject *args) {
    PyObject *o[7];
    long long t_end = 0;
    if (!PyArg_ParseTuple(args, "OOOOOOO|L", &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6], &t_end)) return NULL;
    static const char *fmt[7] = {"q", "d", "q", "d", "q", "q", "q"};
    static const char *what[7] = {"budgets", "backlog bytes", "backlog packets", "arrivals bytes",
                                  "drops packets", "drops bytes", "marks packets"};
    Py_buffer b[7];
    int got = 0;
    for (; got < 7; got++) {
        /* numpy's int64 is "l" on LP64 */
        if (PyObject_GetBuffer(o[got], &b[got], PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) break;
        const char *f = b[got].format;
        int ok = b[got].itemsize == 8 && b[got].len == 8 * (Py_ssize_t)c->n &&
                 (fmt[got][0] == 'd' ? strcmp(f, "d") == 0 : (strcmp(f, "q") == 0 || strcmp(f, "l") == 0));
        if (!ok) {
            PyBuffer_Release(&b[got]);
            PyErr_Format(PyExc_ValueError, "serve: %s need %d values of 8 bytes (%s)", what[got], c->n, fmt[got]);
            break;
        }
    }
    if (got < 7) {
        for (int i = 0; i < got; i++) PyBuffer_Release(&b[i]);
        return NULL;
    }
    long long *budget = b[0].buf;
    drain_uplinks(c);                   /* as decide_tti */
    for (int i = 0; i < c->n; i++)
        serve_ue(c, i, budget[i], t_end, b[1].buf, b[2].buf, b[3].buf, b[4].buf, b[5].buf, b[6].buf);
    ring_publish(c);
    for (int i = 0; i < 7; i++) PyBuffer_Release(&b[i]);
    Py_RETURN_NONE;
}

/* ---- the compiled step --------------------------------------------------------------- */

static void release_chunk(Cell *c) {
    if (!c->has_chunk) return;
    PyBuffer_Release(&c->block_buf);
    for (int j = 0; j < CHUNK_ARRAYS; j++) PyBuffer_Release(&c->chunk[j]);
    c->has_chunk = 0;
}

static PyObject *Cell_set_step(Cell *c, PyObject *args) {
    unsigned long long address;
    PyObject *carry;
    long long start, num, den, late;
    if (!PyArg_ParseTuple(args, "KOLLLL", &address, &carry, &start, &num, &den, &late)) return NULL;
    if (!address || num <= 0 || den <= 0) {
        PyErr_SetString(PyExc_ValueError, "set_step: need a function address and a positive TTI");
        return NULL;
    }
    Py_buffer b;
    if (get_buf(carry, &b, "d", c->n, "carry") < 0) return NULL;
    if (c->has_carry) PyBuffer_Release(&c->carry_buf);
    c->carry_buf = b;
    c->has_carry = 1;
    c->step = (step_fn)(uintptr_t)address;
    c->start_ns = start;
    c->tti_num = num;
    c->tti_den = den;
    c->late_ns = late;
    Py_RETURN_NONE;
}

static PyObject *Cell_set_chunk(Cell *c, PyObject *args) {
    PyObject *block, *o[CHUNK_ARRAYS];
    long long k0;
    if (!PyArg_ParseTuple(args, "OLOOOOOOOOOO", &block, &k0, &o[0], &o[1], &o[2], &o[3], &o[4], &o[5], &o[6],
                          &o[7], &o[8], &o[9]))
        return NULL;
    /* served, backlog bytes/packets, arrivals, drops packets/bytes, marks, seen, late, lateness */
    static const char kind[CHUNK_ARRAYS] = {'d', 'd', 'q', 'd', 'q', 'q', 'q', 'd', '?', 'q'};
    Py_buffer bb, b[CHUNK_ARRAYS];
    if (PyObject_GetBuffer(block, &bb, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (bb.itemsize != 8 || bb.len < 8) {
        PyBuffer_Release(&bb);
        PyErr_SetString(PyExc_ValueError, "set_chunk: the block must be int64");
        return NULL;
    }
    Py_ssize_t rows = -1;
    int got = 0;
    for (; got < CHUNK_ARRAYS; got++) {
        if (PyObject_GetBuffer(o[got], &b[got], PyBUF_WRITABLE | PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) break;
        const char *f = b[got].format;
        int size = kind[got] == '?' ? 1 : 8;
        int ok = b[got].itemsize == size && (kind[got] == 'd' ? strcmp(f, "d") == 0 :
                 kind[got] == '?' ? strcmp(f, "?") == 0 : (strcmp(f, "q") == 0 || strcmp(f, "l") == 0));
        Py_ssize_t r = b[got].len / size / c->n;
        if (rows < 0) rows = r;
        if (!ok || r < 1 || r != rows || b[got].len != r * size * c->n) {
            PyBuffer_Release(&b[got]);
            PyErr_Format(PyExc_ValueError, "set_chunk: array %d needs rows x %d values of type %c", got, c->n,
                         kind[got]);
            break;
        }
    }
    if (got < CHUNK_ARRAYS) {
        for (int j = 0; j < got; j++) PyBuffer_Release(&b[j]);
        PyBuffer_Release(&bb);
        return NULL;
    }
    release_chunk(c);
    c->block_buf = bb;
    memcpy(c->chunk, b, sizeof b);
    c->has_chunk = 1;
    c->k0 = k0;
    c->rows = rows;
    Py_RETURN_NONE;
}

/* logged events not yet taken */
static long long log_pending(Cell *c) {
    long long n = 0;
    for (int i = 0; i < c->n; i++) n += (long long)(c->ue[i].dl_log.n + c->ue[i].ul_log.n);
    return n;
}

/* decide TTI k (handled at now) with the compiled step and serve it (see the top) */
static void decide_tti(Cell *c, long long k, int64_t now) {
    int n = c->n;
    long long i = k - c->k0;
    double *carry = c->carry_buf.buf;
    double *seen = (double *)c->chunk[7].buf + i * n;
    for (int u = 0; u < n; u++) {
        long long bytes, packets;
        lc_backlog(&c->ue[u].dl, &bytes, &packets);
        /* the bytes queued, less the fraction of a byte the scheduler already served */
        double b = (double)bytes - carry[u];
        seen[u] = b > 0.0 ? b : 0.0;
    }
    c->step(c->block_buf.buf, i, k);
    int64_t t_end = lc_boundary(c->start_ns, c->tti_num, c->tti_den, k + 1);
    int64_t late = now - t_end;
    const double *served = (const double *)c->chunk[0].buf + i * n;
    double *bb = (double *)c->chunk[1].buf + i * n, *arr = (double *)c->chunk[3].buf + i * n;
    long long *bp = (long long *)c->chunk[2].buf + i * n, *dp = (long long *)c->chunk[4].buf + i * n;
    long long *db = (long long *)c->chunk[5].buf + i * n, *mp = (long long *)c->chunk[6].buf + i * n;
    unsigned char *late_row = (unsigned char *)c->chunk[8].buf + i * n;
    long long *lateness = (long long *)c->chunk[9].buf + i * n;
    int is_late = late > c->late_ns;
    drain_uplinks(c);                   /* the TTI's uplink leaves at its end, then its downlink */
    for (int u = 0; u < n; u++) {
        /* whole bytes leave the queue; fractions of a byte carry to the next TTI */
        long long budget = lc_carry_budget(&carry[u], served[u]);
        serve_ue(c, u, budget, t_end, bb, bp, arr, dp, db, mp);
        late_row[u] = (unsigned char)is_late;
        lateness[u] = (late > 0 ? late : 0) / 1000;
    }
    ring_publish(c);                    /* the TTI's writes: one wake-up of the writer */
    c->ttis++;
    c->late_ttis += is_late;
    if (late > c->max_late_ns) c->max_late_ns = late;
}

static PyObject *Cell_run(Cell *c, PyObject *args) {
    long long k, k_stop, wake;
    PyObject *fds;
    if (!PyArg_ParseTuple(args, "LLLO", &k, &k_stop, &wake, &fds)) return NULL;
    if (!c->step || !c->has_carry || !c->has_chunk) {
        PyErr_SetString(PyExc_RuntimeError, "run() needs set_step() and set_chunk() first");
        return NULL;
    }
    if (k < c->k0 || k > k_stop || k_stop > c->k0 + c->rows) {
        PyErr_SetString(PyExc_ValueError, "run(): TTIs k .. k_stop - 1 must lie in the chunk");
        return NULL;
    }
    int m = set_pidfds(c, fds);
    if (m < 0) return NULL;
    int ready = -1, failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        int64_t now = now_ns();
        while (k < k_stop && lc_boundary(c->start_ns, c->tti_num, c->tti_den, k + 1) <= now) {
            decide_tti(c, k, now);
            k++;
            now = now_ns();
        }
        if (k >= k_stop || now >= wake || (c->log && log_pending(c) > LOG_DRAIN)) break;
        int64_t deadline = lc_boundary(c->start_ns, c->tti_num, c->tti_den, k + 1);
        ready = move_packets(c, wake < deadline ? wake : deadline, m, &failed);
        if (failed || ready >= 0) break;
    }
    Py_END_ALLOW_THREADS
    if (failed) { errno = failed; return PyErr_SetFromErrno(PyExc_OSError); }
    return Py_BuildValue("(Li)", k, ready);
}

static PyObject *Cell_take_events(Cell *c, PyObject *args) {
    int uplink = 0;
    if (!PyArg_ParseTuple(args, "|p", &uplink)) return NULL;
    PyObject *out = PyTuple_New(c->n);
    if (!out) return NULL;
    for (int i = 0; i < c->n; i++) {
        lc_log *l = uplink ? &c->ue[i].ul_log : &c->ue[i].dl_log;
        PyObject *b = PyBytes_FromStringAndSize((const char *)l->ev, (Py_ssize_t)(l->n * sizeof(lc_event)));
        if (!b) { Py_DECREF(out); return NULL; }
        PyTuple_SET_ITEM(out, i, b);
        l->n = 0;
        c->log_lost += l->lost;
        l->lost = 0;
    }
    return out;
}

static PyObject *Cell_ue_stats(Cell *c, PyObject *arg) {
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0 || i >= c->n) { PyErr_SetString(PyExc_IndexError, "no such UE"); return NULL; }
    UE *u = &c->ue[i];
    lc_link *d = &u->dl, *l = &u->ul;
    long long qb, qp, uqb, uqp;
    lc_backlog(d, &qb, &qp);
    lc_backlog(l, &uqb, &uqp);
    PyObject *d_out = Py_BuildValue(
        "{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:{s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L,s:L}}",
        "arrivals_packets", d->arr_p, "arrivals_bytes", d->arr_b,
        "departures_packets", d->dep_p, "departures_bytes", d->dep_b,
        "drops_packets", d->drop_p, "drops_bytes", d->drop_b,
        "queued_packets", qp, "queued_bytes", qb,
        "marks_packets", d->marks_p, "marks_bytes", d->marks_b,
        "uplink", "arrivals_packets", u->up_p, "arrivals_bytes", u->up_b,
        "departures_packets", u->up_on ? l->dep_p : u->up_p,
        "departures_bytes", u->up_on ? l->dep_b : u->up_b,
        "drops_packets", l->drop_p, "drops_bytes", l->drop_b,
        "queued_packets", uqp, "queued_bytes", uqb,
        "capacity_bytes", u->up.capacity_bytes, "ttis", u->up.k);
    if (d_out && c->vnet) {         /* offload mode: super-packets read, pieces cut (downlink) */
        PyObject *v = PyLong_FromLongLong(d->superpackets);
        if (v) { PyDict_SetItemString(d_out, "superpackets", v); Py_DECREF(v); }
        v = PyLong_FromLongLong(d->pieces);
        if (v) { PyDict_SetItemString(d_out, "pieces_cut", v); Py_DECREF(v); }
    }
    return d_out;
}

static void Cell_dealloc(Cell *c) {
    stop_writer(c);
    stop_rescuers(c);
    release_chunk(c);
    if (c->has_carry) PyBuffer_Release(&c->carry_buf);
    if (c->ue) {
        for (int i = 0; i < c->n; i++) {
            UE *u = &c->ue[i];
            lc_link_free(&u->dl);
            lc_link_free(&u->ul);
            lc_grid_free(&u->up);
            lc_log_free(&u->dl_log);
            lc_log_free(&u->ul_log);
        }
        PyMem_Free(c->ue);
    }
    lc_packet_free(c->spare);
    c->spare = NULL;
    lc_pool_clear();
    PyMem_Free(c->evs);
    PyMem_Free(c->rev);
    PyMem_Free(c->pidfds);
    if (c->epfd > 0) close(c->epfd);
    if (c->up_epfd > 0) close(c->up_epfd);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

static int Cell_init(Cell *c, PyObject *args, PyObject *kw) {
    static char *kwlist[] = {"outer_fd", "inner_fds", "net_base", "net_mask", "part_shift", "queue",
                             "packets", "bytes", "log", "rescue_ns", "vnet", "writer", NULL};
    int outer, shift, qkind;
    unsigned long base, mask;
    long long lim_p, lim_b;
    PyObject *inner;
    int log = 0;
    long long rescue_ns = 0;
    int vnet = 0, writer = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "iOkkiiLL|pLip", kwlist, &outer, &inner, &base, &mask, &shift,
                                     &qkind, &lim_p, &lim_b, &log, &rescue_ns, &vnet, &writer))
        return -1;
    if (vnet != 0 && vnet != 10) {
        PyErr_SetString(PyExc_ValueError, "vnet header size must be 0 (plain) or 10 (virtio_net_hdr)");
        return -1;
    }
    if (c->n_resc || c->ue || c->writer) { PyErr_SetString(PyExc_RuntimeError, "Cell is initialised already"); return -1; }
    if (qkind < LC_INFINITE || qkind > LC_L4S || lim_p < 0 || lim_b < 0 || shift < 0 || shift > 32) {
        PyErr_SetString(PyExc_ValueError, "bad queue kind, limit or part shift");
        return -1;
    }
    PyObject *seq = PySequence_Fast(inner, "inner_fds must be a sequence");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (n < 1 || n > 65536) { Py_DECREF(seq); PyErr_SetString(PyExc_ValueError, "1 to 65536 UEs"); return -1; }
    c->ue = PyMem_Calloc(n, sizeof(UE));
    c->evs = PyMem_Calloc(n + 1 + MAX_WAIT_FDS, sizeof(struct epoll_event));
    c->rev = PyMem_Calloc(n + 1, sizeof(unsigned));
    c->pidfds = PyMem_Calloc(MAX_WAIT_FDS, sizeof(int));
    if (!c->ue || !c->evs || !c->rev || !c->pidfds) { Py_DECREF(seq); PyErr_NoMemory(); return -1; }
    c->n = (int)n;
    for (Py_ssize_t i = 0; i < n; i++) {
        long v = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) { Py_DECREF(seq); return -1; }
        c->ue[i].fd = (int)v;
    }
    Py_DECREF(seq);
    c->outer_fd = outer;
    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (c->epfd < 0) { PyErr_SetFromErrno(PyExc_OSError); return -1; }
    c->up_epfd = epoll_create1(EPOLL_CLOEXEC);
    if (c->up_epfd < 0) { PyErr_SetFromErrno(PyExc_OSError); return -1; }
    for (int i = -1; i < c->n; i++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)(i + 1)};
        if (epoll_ctl(c->epfd, EPOLL_CTL_ADD, i < 0 ? outer : c->ue[i].fd, &ev) != 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
        struct epoll_event up = {.events = EPOLLIN, .data.u64 = (uint64_t)i};   /* the UE's index */
        if (i >= 0 && epoll_ctl(c->up_epfd, EPOLL_CTL_ADD, c->ue[i].fd, &up) != 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            return -1;
        }
    }
    c->net_base = (uint32_t)base;
    c->net_mask = (uint32_t)mask;
    c->shift = shift;
    c->log = log;
    c->vnet = vnet;
    for (int i = 0; i < c->n; i++) {
        UE *u = &c->ue[i];
        lc_link_init(&u->dl, qkind, lim_p, lim_b);
        lc_link_init(&u->ul, LC_INFINITE, 0, 0);
        u->dl.log = log ? &u->dl_log : NULL;
        u->ul.log = log ? &u->ul_log : NULL;
    }
    c->rescue_ns = rescue_ns;
    if (rescue_ns > 0) {
        int err = start_rescuers(c);
        if (err) { errno = err; PyErr_SetFromErrno(PyExc_OSError); return -1; }
    }
    if (writer) {
        int err = start_writer(c);
        if (err) { errno = err; PyErr_SetFromErrno(PyExc_OSError); return -1; }
    }
    return 0;
}

static PyObject *Cell_set_uplink(Cell *c, PyObject *args) {
    int i;
    PyObject *cap;
    long long num, den, start;
    if (!PyArg_ParseTuple(args, "iOLLL", &i, &cap, &num, &den, &start)) return NULL;
    if (i < 0 || i >= c->n) { PyErr_SetString(PyExc_IndexError, "no such UE"); return NULL; }
    if (num <= 0 || den <= 0) { PyErr_SetString(PyExc_ValueError, "the uplink TTI must be positive"); return NULL; }
    Py_buffer b;
    if (PyObject_GetBuffer(cap, &b, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_ssize_t n = b.len / 8;
    if (b.itemsize != 8 || strcmp(b.format, "d") != 0 || n < 1) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "uplink capacity: need at least one float64 value");
        return NULL;
    }
    UE *u = &c->ue[i];
    lc_grid_free(&u->up);
    int rc = lc_grid_init(&u->up, b.buf, (size_t)n, num, den, start);
    PyBuffer_Release(&b);
    if (rc < 0) { u->up_on = 0; return PyErr_NoMemory(); }
    if (!u->up_on) {                /* read as its packets come, always: out of the slotted set */
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)(i + 1)};
        epoll_ctl(c->up_epfd, EPOLL_CTL_DEL, u->fd, NULL);
        if (c->slotted && epoll_ctl(c->epfd, EPOLL_CTL_ADD, u->fd, &ev) != 0) return PyErr_SetFromErrno(PyExc_OSError);
    }
    u->up_on = 1;
    c->uplinks = 1;
    Py_RETURN_NONE;
}

static PyObject *Cell_set_aqm(Cell *c, PyObject *args) {
    int i, ecn;
    unsigned long long seed;
    double a, b, cc, d;
    if (!PyArg_ParseTuple(args, "i(pKdddd)", &i, &ecn, &seed, &a, &b, &cc, &d)) return NULL;
    if (i < 0 || i >= c->n) { PyErr_SetString(PyExc_IndexError, "no such UE"); return NULL; }
    lc_link_aqm(&c->ue[i].dl, ecn, seed, a, b, cc, d);
    Py_RETURN_NONE;
}

static PyObject *Cell_set_uplink_slots(Cell *c, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    int err = slot_uplinks(c, on);
    if (err) { errno = err; return PyErr_SetFromErrno(PyExc_OSError); }
    Py_RETURN_NONE;
}

static PyObject *Cell_close(Cell *c, PyObject *Py_UNUSED(ignored)) {
    Py_BEGIN_ALLOW_THREADS
    stop_writer(c);                 /* every queued write done before the devices may close */
    stop_rescuers(c);
    Py_END_ALLOW_THREADS
    lc_packet_free(c->spare);
    c->spare = NULL;
    lc_pool_clear();                /* the loop's packet buffers go back to the allocator */
    Py_RETURN_NONE;
}

static PyMethodDef Cell_methods[] = {
    {"wait", (PyCFunction)Cell_wait, METH_VARARGS,
     "wait(deadline_ns, pidfds): move packets until the deadline (-1) or a pidfd is readable (its index)."},
    {"backlog", (PyCFunction)Cell_backlog, METH_O, "backlog(out): bytes queued per UE into a float64 array."},
    {"serve", (PyCFunction)Cell_serve, METH_VARARGS,
     "serve(budgets, backlog_bytes, backlog_packets, arrivals_bytes, drops_packets, drops_bytes, marks_packets[, t_end_ns])."},
    {"ue_stats", (PyCFunction)Cell_ue_stats, METH_O, "A UE's counters as a dict."},
    {"set_uplink", (PyCFunction)Cell_set_uplink, METH_VARARGS,
     "set_uplink(ue, capacity, tti_num, tti_den, start_ns): a constrained uplink (see the module)."},
    {"set_aqm", (PyCFunction)Cell_set_aqm, METH_VARARGS,
     "set_aqm(ue, (ecn, seed, a, b, c, d)): UE ue's queue parameters (see replay/_linkcore.h, lc_link_aqm)."},
    {"set_uplink_slots", (PyCFunction)Cell_set_uplink_slots, METH_O,
     "set_uplink_slots(on): the unconstrained uplinks read at TTI ends only (serve(), run()), or as packets come."},
    {"close", (PyCFunction)Cell_close, METH_NOARGS,
     "Finish the queued writes, stop the writer and rescuer threads (also done when freed)."},
    {"set_step", (PyCFunction)Cell_set_step, METH_VARARGS,
     "set_step(address, carry, start_ns, tti_num, tti_den, late_ns): the compiled step (see the module)."},
    {"set_chunk", (PyCFunction)Cell_set_chunk, METH_VARARGS,
     "set_chunk(block, k0, served, bb, bp, arr, dp, db, mp, seen, late, lateness): the chunk of TTIs the step fills."},
    {"run", (PyCFunction)Cell_run, METH_VARARGS,
     "run(k, k_stop, wake_ns, pidfds) -> (k, ready): decide TTIs with the compiled step as they end (see the module)."},
    {"take_events", (PyCFunction)Cell_take_events, METH_VARARGS,
     "take_events(uplink=False): the logged events since the last call, per UE: bytes of (t, x int64; "
     "kind, len int32) records (the downlink's, or the constrained uplinks')."},
    {NULL}
};

static PyMemberDef Cell_members[] = {
    {"unroutable", T_LONGLONG, offsetof(Cell, unroutable), READONLY, "packets to no UE's address"},
    {"write_errors", T_LONGLONG, offsetof(Cell, write_errors), READONLY, "failed TUN writes"},
    {"last_packet_ns", T_LONGLONG, offsetof(Cell, last_ns), READONLY, "when packets last moved"},
    {"log_lost", T_LONGLONG, offsetof(Cell, log_lost), READONLY, "events not logged for want of memory"},
    {"rescues", T_LONGLONG, offsetof(Cell, rescues), READONLY, "times a rescuer moved the late loop to its CPU"},
    {"ttis", T_LONGLONG, offsetof(Cell, ttis), READONLY, "TTIs decided by run()"},
    {"late_ttis", T_LONGLONG, offsetof(Cell, late_ttis), READONLY, "of those, the late ones"},
    {"max_lateness_ns", T_LONGLONG, offsetof(Cell, max_late_ns), READONLY, "the largest lateness in run() (ns)"},
    {"writer", T_INT, offsetof(Cell, writer), READONLY, "1 while the writer thread does the TUN writes"},
    {"uplink_slots", T_INT, offsetof(Cell, slotted), READONLY, "1 while the unconstrained uplinks are read at TTI ends only"},
    {"writes_queued", T_LONGLONG, offsetof(Cell, writes_queued), READONLY, "writes handed to the writer"},
    {"writer_waits", T_LONGLONG, offsetof(Cell, writer_waits), READONLY, "times the loop waited for room in the ring"},
    {NULL}
};

static PyTypeObject CellType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "airlink.replay._cellpath.Cell",
    .tp_basicsize = sizeof(Cell),
    .tp_dealloc = (destructor)Cell_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "The cell shell's packets: per-UE queues with byte-granular service (see the module).",
    .tp_methods = Cell_methods,
    .tp_members = Cell_members,
    .tp_init = (initproc)Cell_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cellpath",
                                    "The cell shell's per-packet path in C.", -1, NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cellpath(void) {
    if (PyType_Ready(&CellType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    Py_INCREF(&CellType);
    if (PyModule_AddObject(m, "Cell", (PyObject *)&CellType) < 0) { Py_DECREF(&CellType); Py_DECREF(m); return NULL; }
    PyModule_AddIntConstant(m, "INFINITE", LC_INFINITE);
    PyModule_AddIntConstant(m, "DROPTAIL", LC_DROPTAIL);
    PyModule_AddIntConstant(m, "DROPHEAD", LC_DROPHEAD);
    PyModule_AddIntConstant(m, "CODEL", LC_CODEL);
    PyModule_AddIntConstant(m, "PIE", LC_PIE);
    PyModule_AddIntConstant(m, "L4S", LC_L4S);
    return m;
}
