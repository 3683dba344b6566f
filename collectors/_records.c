/*
 * airlink.collectors._records: the per-record loops of the capture reader in C.
 *
 * walk: locating pcap records is a chain (each record header gives the offset of the
 * next), so it cannot be vectorised directly; collectors/_capture.py screens byte positions
 * with numpy when this module is not built. This is the same walk as
 * CaptureReader._pcap_walk, record by record, with the same checks and stopping rules:
 *
 *   walk(buf, n, little, ns_per_tick, frac_max, limit, off, cap, orig, ts)
 *       -> (records, stop, status)
 *
 * buf: the chunk (any contiguous buffer, >= n bytes); records start at byte 0.
 * off/cap/orig/ts: writable int64 buffers of at least n // 16 + 1 items, filled with the
 * packet-data offset (record offset + 16), captured length, original length and timestamp
 * in ns since the epoch (seconds * 1e9 + fraction * ns_per_tick) of each complete record.
 * stop: the byte offset after the last complete record (where the next chunk continues).
 * status: 0 = stopped at the end of the data or an incomplete record,
 *         1 = impossible captured length (> limit) in the header at `stop`,
 *         2 = impossible sub-second fraction (>= frac_max) in the header at `stop`.
 *
 * walk_ng: the pcapng packet-block walk of CaptureReader._ng_walk (its Python twin), block
 * by block from `start`, with the same checks and stopping rules:
 *
 *   walk_ng(buf, start, n, little, ifaces, off, cap, orig, ts, lt, iface) -> (records, stop, status)
 *
 * ifaces: int64 quadruples (link type, mult, div, offset ns) of the section's interfaces;
 * a timestamp of `ticks` is ticks * mult / div + offset ns (128-bit product, floor).
 * Enhanced (6), simple (3) and obsolete (2) packet blocks are read; the outputs (int64, at
 * least n // 16 + 1 items) get the packet-data offset, captured and original length,
 * timestamp, link type and interface number of each.
 * status: 0 = stopped at the end of the data or at a block not wholly in buf[:n] (whose
 *         header, when present, is plausible),
 *         1 = the block at `stop` is not a packet block, or is damaged (the Python block
 *         walker parses or reports it).
 *
 * decode: the header decoder of collectors/_decode.py (decode()) for a batch of one link
 * type of its table, packet by packet; every rule there (link layer, IPv4/IPv6 with
 * extension headers, fragments, TCP/UDP, the TCP option layouts and the generic option
 * parser, RFC 2883 DSACK) is followed exactly, and a test compares both on real, crafted
 * and fuzzed captures. See decode() below for its arguments.
 *
 * unwrap(raw, groups, base, out) and cummax(values, groups, valid, out): the per-group
 * loops of collectors/_tcparrays.py's _unwrap and _grouped_cummax (see there), one pass each
 * instead of several whole-array numpy passes; groups are contiguous runs of equal values.
 *
 * census_add (collectors/_census.c, included below): the per-packet part of a capture's census.
 *
 * conn_*: the provisional connection numbering of collectors/_connections.Connections, one
 * hash table kept across the batches of a read (see "connections" below).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint32_t rd32(const unsigned char *p, int little)
{
    return little ? ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24))
                  : ((uint32_t)p[3] | ((uint32_t)p[2] << 8) | ((uint32_t)p[1] << 16) | ((uint32_t)p[0] << 24));
}
static inline uint32_t be16(const unsigned char *p) { return ((uint32_t)p[0] << 8) | p[1]; }
static inline uint32_t be32(const unsigned char *p) { return rd32(p, 0); }
static inline uint64_t be64(const unsigned char *p) { return ((uint64_t)be32(p) << 32) | be32(p + 4); }

static int get_out(PyObject *obj, Py_buffer *view, Py_ssize_t need, const char *name)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->len < need * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, %zd needed", name, view->len,
                     need * (Py_ssize_t)sizeof(int64_t));
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *walk(PyObject *self, PyObject *args)
{
    Py_buffer in, out[4];
    PyObject *objs[4];
    Py_ssize_t n;
    int little;
    long long ns_per_tick, frac_max, limit;
    static const char *names[4] = {"off", "cap", "orig", "ts"};
    if (!PyArg_ParseTuple(args, "y*npLLLOOOO", &in, &n, &little, &ns_per_tick, &frac_max,
                          &limit, &objs[0], &objs[1], &objs[2], &objs[3]))
        return NULL;
    if (n < 0 || n > in.len) {
        PyBuffer_Release(&in);
        return PyErr_Format(PyExc_ValueError, "n=%zd outside the buffer (%zd bytes)", n, in.len);
    }
    int k;
    for (k = 0; k < 4; k++) {
        if (get_out(objs[k], &out[k], n / 16 + 1, names[k]) < 0) {
            while (--k >= 0)
                PyBuffer_Release(&out[k]);
            PyBuffer_Release(&in);
            return NULL;
        }
    }
    const unsigned char *b = in.buf;
    int64_t *off = out[0].buf, *cap = out[1].buf, *orig = out[2].buf, *ts = out[3].buf;
    Py_ssize_t p = 0, count = 0;
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p + 16 <= n) {
        const unsigned char *h = b + p;
        uint32_t sec = rd32(h, little), frac = rd32(h + 4, little);
        uint32_t c = rd32(h + 8, little), o = rd32(h + 12, little);
        if ((long long)c > limit) { status = 1; break; }
        if ((long long)frac >= frac_max) { status = 2; break; }
        if (p + 16 + (Py_ssize_t)c > n)
            break;
        off[count] = p + 16;
        cap[count] = c;
        orig[count] = o;
        ts[count] = (int64_t)sec * 1000000000LL + (int64_t)frac * ns_per_tick;
        count++;
        p += 16 + (Py_ssize_t)c;
    }
    Py_END_ALLOW_THREADS
    for (k = 0; k < 4; k++)
        PyBuffer_Release(&out[k]);
    PyBuffer_Release(&in);
    return Py_BuildValue("nni", count, p, status);
}

/* ---- walk_ng --------------------------------------------------------------------- */

#define NG_MAX_BLOCK (16 << 20)     /* _capture.NG_MAX_BLOCK */

static PyObject *walk_ng(PyObject *self, PyObject *args)
{
    Py_buffer in, ifb, out[6];
    PyObject *objs[6];
    Py_ssize_t start, n;
    int little;
    static const char *names[6] = {"off", "cap", "orig", "ts", "lt", "iface"};
    if (!PyArg_ParseTuple(args, "y*nnpy*OOOOOO", &in, &start, &n, &little, &ifb, &objs[0], &objs[1],
                          &objs[2], &objs[3], &objs[4], &objs[5]))
        return NULL;
    if (n < 0 || n > in.len || start < 0 || start > n || ifb.len % 32) {
        PyBuffer_Release(&in);
        PyBuffer_Release(&ifb);
        return PyErr_Format(PyExc_ValueError, "start=%zd, n=%zd outside the buffer (%zd bytes) or "
                            "ifaces not int64 quadruples", start, n, in.len);
    }
    int k;
    for (k = 0; k < 6; k++) {
        if (get_out(objs[k], &out[k], (n - start) / 16 + 1, names[k]) < 0) {
            while (--k >= 0)
                PyBuffer_Release(&out[k]);
            PyBuffer_Release(&in);
            PyBuffer_Release(&ifb);
            return NULL;
        }
    }
    const unsigned char *b = in.buf;
    const int64_t *ifs = ifb.buf;
    Py_ssize_t nif = ifb.len / 32;
    int64_t *off = out[0].buf, *cap = out[1].buf, *orig = out[2].buf, *ts = out[3].buf;
    int64_t *lt = out[4].buf, *ifo = out[5].buf;
    Py_ssize_t p = start, count = 0;
    int status = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p + 12 <= n) {
        const unsigned char *h = b + p;
        uint32_t type = rd32(h, little), blen = rd32(h + 4, little);
        if (blen < 12 || blen % 4 || blen > NG_MAX_BLOCK) { status = 1; break; }
        if (p + (Py_ssize_t)blen > n)
            break;
        if (type != 6 && type != 3 && type != 2) { status = 1; break; }
        if (rd32(h + blen - 4, little) != blen) { status = 1; break; }
        uint32_t id, c, o;
        Py_ssize_t data;
        unsigned __int128 ticks = 0;
        if (type == 3) {                                   /* simple: interface 0, no time */
            if (blen < 16 || nif == 0) { status = 1; break; }
            id = 0;
            o = rd32(h + 8, little);
            c = blen - 16;
            if (o < c) c = o;
            data = 12;
        } else {
            if (blen < 32) { status = 1; break; }
            id = type == 6 ? rd32(h + 8, little) : (little ? (h[8] | (h[9] << 8)) : ((h[8] << 8) | h[9]));
            ticks = ((unsigned __int128)rd32(h + 12, little) << 32) | rd32(h + 16, little);
            c = rd32(h + 20, little);
            o = rd32(h + 24, little);
            data = 28;
            if (id >= (uint64_t)nif || (uint64_t)c + 32 > blen) { status = 1; break; }
        }
        const int64_t *f = ifs + 4 * (Py_ssize_t)id;
        unsigned __int128 t = ticks * (uint64_t)f[1] / (uint64_t)f[2];
        if (t >= ((unsigned __int128)1 << 62)) { status = 1; break; }
        int64_t tns = (int64_t)t + f[3];
        if (tns < 0 || tns >= ((int64_t)1 << 62)) { status = 1; break; }
        off[count] = p + data;
        cap[count] = c;
        orig[count] = o;
        ts[count] = type == 3 ? 0 : tns;
        lt[count] = f[0];
        ifo[count] = id;
        count++;
        p += blen;
    }
    Py_END_ALLOW_THREADS
    for (k = 0; k < 6; k++)
        PyBuffer_Release(&out[k]);
    PyBuffer_Release(&in);
    PyBuffer_Release(&ifb);
    return Py_BuildValue("nni", count, p, status);
}

/* ---- decode ------------------------------------------------------------------------ */

enum { L_ETHER = 0, L_FIXED = 1, L_RAW = 2, L_NULL_HOST = 3, L_NULL_NET = 4 };
/* outputs, in this order (collectors/_decode.py C_OUTPUTS names them and their dtypes) */
enum { O_KEEP, O_VERSION, O_CAPTURED, O_SRC_HI, O_SRC_LO, O_DST_HI, O_DST_LO, O_PROTO, O_IP_LEN,
       O_SPORT, O_DPORT, O_SEQ, O_ACK, O_FLAGS, O_WINDOW, O_PAYLOAD, O_TSVAL, O_TSECR, O_HAS_TS,
       O_SACK_BLOCKS, O_DSACK, O_DSACK_LEFT, O_MSS, O_WSCALE, O_SYNOPT, O_ECN, N_OUT };
static const int out_size[N_OUT] = {8, 1, 4, 8, 8, 8, 8, 1, 4, 2, 2, 4, 4, 1, 2, 4, 4, 4, 1, 1, 1, 4,
                                    2, 1, 1, 1};
#define SYN 0x02
#define OPT_SACK_OK 1
#define OPT_TS 2
#define OPT_WS 4

/* RFC 2883, as _decode._is_dsack: the first block lies below the cumulative ACK, or inside
 * the second block (sequence comparisons modulo 2^32) */
static inline int is_dsack(uint32_t left1, uint32_t right1, uint32_t ack, uint32_t left2,
                           uint32_t right2, int two)
{
    int below = (uint32_t)(ack - right1) < 0x80000000u;
    int inside = two && (uint32_t)(left1 - left2) < 0x80000000u
                 && (uint32_t)(right2 - right1) < 0x80000000u;
    return below || inside;
}

typedef struct {
    uint32_t tsval, tsecr, dsack_left;
    int has_ts, sack_blocks, dsack, mss, wscale, synopt;
} Options;

/* _decode._parse_options and how decode() applies its result */
static void parse_options(const unsigned char *d, int64_t n, uint32_t flags, uint32_t ack, Options *r)
{
    int64_t i = 0;
    int have_ts = 0, have_mss = 0, have_ws = 0, sackok = 0, nsack = 0;
    uint32_t ts0 = 0, ts1 = 0, mss = 0, ws = 0, l1 = 0, r1 = 0, l2 = 0, r2 = 0;
    while (i < n) {
        int kind = d[i];
        if (kind == 0)
            break;
        if (kind == 1) {
            i++;
            continue;
        }
        if (i + 1 >= n)
            break;
        int64_t ln = d[i + 1];
        if (ln < 2 || i + ln > n)
            break;
        const unsigned char *body = d + i + 2;
        if (kind == 2 && ln == 4) {
            mss = be16(body);
            have_mss = 1;
        } else if (kind == 3 && ln == 3) {
            ws = body[0];
            have_ws = 1;
        } else if (kind == 4 && ln == 2) {
            sackok = 1;
        } else if (kind == 5 && ln >= 10 && (ln - 2) % 8 == 0) {
            nsack = (int)((ln - 2) / 8);
            l1 = be32(body);
            r1 = be32(body + 4);
            l2 = nsack > 1 ? be32(body + 8) : 0;
            r2 = nsack > 1 ? be32(body + 12) : 0;
        } else if (kind == 8 && ln == 10) {
            ts0 = be32(body);
            ts1 = be32(body + 4);
            have_ts = 1;
        }
        i += ln;
    }
    if (have_ts) {
        r->tsval = ts0;
        r->tsecr = ts1;
        r->has_ts = 1;
    }
    if (have_mss)
        r->mss = (int)mss;
    if (have_ws) {
        r->wscale = ws < 14 ? (int)ws : 14;
        r->synopt |= OPT_WS;
    }
    if (sackok)
        r->synopt |= OPT_SACK_OK;
    if (have_ts && (flags & SYN))
        r->synopt |= OPT_TS;
    if (nsack) {
        r->sack_blocks = nsack;
        r->dsack = is_dsack(l1, r1, ack, l2, r2, nsack > 1);
        r->dsack_left = l1;
    }
}

#define PUT(idx, type, value) (((type *)out[idx].buf)[m] = (type)(value))

/*
 * decode(buf, data_off, caplen, origlen, kind, l3_at, proto_at, outs) -> kept
 *
 * buf: the batch buffer (zero padding after the last record); data_off/caplen/origlen:
 * int64 per record; kind: L_* (ether, fixed = Linux cooked with IP at l3_at and the
 * protocol at proto_at, raw, BSD loopback in host or network order); outs: a tuple of
 * N_OUT writable buffers of at least len(data_off) items each, of the sizes in out_size.
 * The IP packets are written compacted (O_KEEP = their record index); returns how many.
 */
static PyObject *decode(PyObject *self, PyObject *args)
{
    Py_buffer in, offb, capb, origb, out[N_OUT];
    PyObject *outs;
    int kind, l3_at, proto_at, k;
    if (!PyArg_ParseTuple(args, "y*y*y*y*iiiO!", &in, &offb, &capb, &origb, &kind, &l3_at,
                          &proto_at, &PyTuple_Type, &outs))
        return NULL;
    Py_ssize_t n = offb.len / 8;
    PyObject *err = NULL;
    int got = 0;
    Py_ssize_t m = 0;
    if (capb.len / 8 < n || origb.len / 8 < n || PyTuple_GET_SIZE(outs) != N_OUT) {
        err = PyExc_ValueError;
        goto release;
    }
    for (got = 0; got < N_OUT; got++) {
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(outs, got), &out[got],
                               PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
            goto release;
        if (out[got].len < n * out_size[got]) {
            got++;
            err = PyExc_ValueError;
            goto release;
        }
    }
    const unsigned char *b = in.buf;
    const int64_t *off = offb.buf, *cap = capb.buf, *orig = origb.buf;
    for (Py_ssize_t i = 0; i < n; i++) {     /* every read below stays inside buf */
        if (off[i] < 0 || cap[i] < 0 || off[i] + cap[i] + 64 > in.len) {
            err = PyExc_ValueError;
            goto release;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t o = off[i], end = o + cap[i], l3;
        uint32_t et;
        int fam;
        /* link layer */
        if (kind == L_ETHER) {
            et = be16(b + o + 12);
            l3 = o + 14;
            for (int t = 0; t < 2 && (et == 0x8100 || et == 0x88A8 || et == 0x9100); t++) {
                et = be16(b + l3 + 2);
                l3 += 4;
            }
            fam = et == 0x0800 ? 4 : et == 0x86DD ? 6 : 0;
        } else if (kind == L_FIXED) {
            et = be16(b + o + proto_at);
            l3 = o + l3_at;
            fam = et == 0x0800 ? 4 : et == 0x86DD ? 6 : 0;
        } else if (kind == L_RAW) {
            l3 = o;
            fam = (b[o] >> 4) == 4 ? 4 : (b[o] >> 4) == 6 ? 6 : 0;
        } else {
            uint32_t bev = be32(b + o);           /* address family, either byte order */
            uint32_t af = kind == L_NULL_NET || bev <= 0xFFFF ? bev : rd32(b + o, 1);
            l3 = o + 4;
            fam = af == 2 ? 4 : (af == 10 || af == 24 || af == 28 || af == 30) ? 6 : 0;
        }
        if ((fam == 4 && end - l3 < 20) || (fam == 6 && end - l3 < 40) || fam == 0)
            continue;
        /* IP */
        const unsigned char *ip = b + l3;
        int64_t ihl = fam == 4 ? (int64_t)(ip[0] & 0x0F) * 4 : 40;
        int64_t ip_len = fam == 4 ? (int64_t)be16(ip + 2) : (int64_t)be16(ip + 4) + 40;
        if (ip_len == 0)                                  /* TSO / jumbo: from the wire */
            ip_len = orig[i] - (l3 - o);
        int proto = fam == 4 ? ip[9] : ip[6];
        int later = fam == 4 && (be16(ip + 6) & 0x1FFF) != 0;
        uint64_t shi = 0, slo, dhi = 0, dlo;
        if (fam == 4) {
            slo = be32(ip + 12);
            dlo = be32(ip + 16);
        } else {
            shi = be64(ip + 8);
            slo = be64(ip + 16);
            dhi = be64(ip + 24);
            dlo = be64(ip + 32);
            /* extension headers: hop-by-hop 0, routing 43, fragment 44, destination 60 */
            int64_t l46 = l3 + 40;
            int nh = proto;
            for (int t = 0; t < 4; t++) {
                if (!((nh == 0 || nh == 43 || nh == 44 || nh == 60) && l46 + 8 <= end))
                    break;
                int64_t hl = nh == 44 ? 8 : ((int64_t)b[l46 + 1] + 1) * 8;
                if (nh == 44 && (be16(b + l46 + 2) & 0xFFF8) != 0)
                    later = 1;
                nh = b[l46];
                l46 += hl;
            }
            proto = nh;
            ihl = l46 - l3;
        }
        int64_t l4 = l3 + ihl < end ? l3 + ihl : end;
        int64_t l4_len = ip_len - ihl;
        if (ihl < 20)
            later = 1;
        int tcp = proto == 6 && !later && l4 + 20 <= end;
        int udp = proto == 17 && !later && l4 + 8 <= end;
        const unsigned char *th = b + l4;
        uint32_t ack = tcp ? be32(th + 8) : 0, flags = tcp ? th[13] : 0;
        int64_t thl = tcp ? (int64_t)(th[12] >> 4) * 4 : 0;
        int64_t payload = tcp ? l4_len - thl : udp ? (int64_t)be16(th + 4) - 8 : 0;
        /* TCP options: the layouts decode() reads in vector form, then the generic parser */
        Options r = {0, 0, 0, 0, 0, 0, 0, -1, 0};
        if (tcp && thl > 20) {
            int64_t optcap = l4 + thl < end ? l4 + thl : end;
            int64_t op = l4 + 20;
            int done = 0;
            if (be32(th + 20) == 0x0101080A && op + 12 <= optcap) {   /* NOP NOP TS */
                r.tsval = be32(th + 24);
                r.tsecr = be32(th + 28);
                r.has_ts = 1;
                if (thl == 32 && !(flags & SYN)) {
                    done = 1;
                } else if (!(flags & SYN) && thl > 32 && b[op + 12] == 1 && b[op + 13] == 1
                           && b[op + 14] == 5) {                      /* NOP NOP SACK */
                    int64_t ln = b[op + 15], nb = (ln - 2) / 8;
                    if (ln >= 10 && (ln - 2) % 8 == 0 && op + 14 + ln <= optcap && nb <= 4
                        && 12 + 2 + ln <= thl - 20) {
                        uint32_t left1 = be32(b + op + 16), right1 = be32(b + op + 20);
                        int two = nb >= 2;
                        r.sack_blocks = (int)nb;
                        r.dsack = is_dsack(left1, right1, ack, two ? be32(b + op + 24) : 0,
                                           two ? be32(b + op + 28) : 0, two);
                        r.dsack_left = left1;
                        done = 1;
                    }
                }
            } else if (b[op] == 8 && b[op + 1] == 10 && op + 10 <= optcap) {  /* TS first */
                r.tsval = be32(b + op + 2);
                r.tsecr = be32(b + op + 6);
                r.has_ts = 1;
            }
            if (!done)
                parse_options(b + op, optcap - op, flags, ack, &r);
        }
        PUT(O_KEEP, int64_t, i);
        PUT(O_VERSION, uint8_t, fam);
        PUT(O_CAPTURED, uint32_t, cap[i]);
        PUT(O_SRC_HI, uint64_t, shi);
        PUT(O_SRC_LO, uint64_t, slo);
        PUT(O_DST_HI, uint64_t, dhi);
        PUT(O_DST_LO, uint64_t, dlo);
        PUT(O_PROTO, uint8_t, proto);
        PUT(O_IP_LEN, uint32_t, ip_len < 0 ? 0 : ip_len > 0xFFFFFFFFLL ? 0xFFFFFFFFLL : ip_len);
        PUT(O_SPORT, uint16_t, tcp || udp ? be16(th) : 0);
        PUT(O_DPORT, uint16_t, tcp || udp ? be16(th + 2) : 0);
        PUT(O_SEQ, uint32_t, tcp ? be32(th + 4) : 0);
        PUT(O_ACK, uint32_t, ack);
        PUT(O_FLAGS, uint8_t, flags);
        PUT(O_WINDOW, uint16_t, tcp ? be16(th + 14) : 0);
        PUT(O_PAYLOAD, uint32_t, payload < 0 ? 0 : payload);
        PUT(O_TSVAL, uint32_t, r.tsval);
        PUT(O_TSECR, uint32_t, r.tsecr);
        PUT(O_HAS_TS, uint8_t, r.has_ts);
        PUT(O_SACK_BLOCKS, uint8_t, r.sack_blocks);
        PUT(O_DSACK, uint8_t, r.dsack);
        PUT(O_DSACK_LEFT, uint32_t, r.dsack_left);
        PUT(O_MSS, uint16_t, r.mss);
        PUT(O_WSCALE, int8_t, r.wscale);
        PUT(O_SYNOPT, uint8_t, r.synopt);
        /* RFC 3168 ECN field: low 2 bits of the IPv4 TOS / IPv6 traffic class byte */
        PUT(O_ECN, uint8_t, fam == 4 ? ip[1] & 3 : (ip[1] >> 4) & 3);
        m++;
    }
    Py_END_ALLOW_THREADS
release:
    for (k = 0; k < got; k++)
        PyBuffer_Release(&out[k]);
    PyBuffer_Release(&in);
    PyBuffer_Release(&offb);
    PyBuffer_Release(&capb);
    PyBuffer_Release(&origb);
    if (err != NULL) {
        PyErr_SetString(err, "decode: buffers too short or records outside the buffer");
        return NULL;
    }
    if (PyErr_Occurred())
        return NULL;
    return PyLong_FromSsize_t(m);
}

/* ---- unwrap, cummax ---------------------------------------------------------------- */

/* raw uint32[n], groups int32[n], base uint32[ngroups], out int64[n]: out = raw - base[group]
 * modulo 2^32 at a group's first row, then each step between neighbours taken as the signed
 * 32-bit difference */
static PyObject *unwrap(PyObject *self, PyObject *args)
{
    Py_buffer raw, grp, base, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &raw, &grp, &base, &out))
        return NULL;
    Py_ssize_t n = raw.len / 4, nb = base.len / 4;
    int bad = grp.len != 4 * n || out.len != 8 * n;
    if (!bad) {
        const uint32_t *r = raw.buf, *b = base.buf;
        const int32_t *g = grp.buf;
        int64_t *o = out.buf;
        Py_BEGIN_ALLOW_THREADS
        uint32_t prev = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            if (g[i] < 0 || g[i] >= nb) {
                bad = 1;
                break;
            }
            uint32_t rel = r[i] - b[g[i]];
            if (i == 0 || g[i] != g[i - 1])
                o[i] = (int64_t)rel;
            else
                o[i] = o[i - 1] + (int32_t)(rel - prev);
            prev = rel;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&raw);
    PyBuffer_Release(&grp);
    PyBuffer_Release(&base);
    PyBuffer_Release(&out);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "unwrap: lengths differ or a group has no base");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* values int64[n], groups int32[n], valid bool[n], out int64[n]: running maximum within each
 * group of (valid ? value : -1) */
static PyObject *cummax(PyObject *self, PyObject *args)
{
    Py_buffer val, grp, ok, out;
    if (!PyArg_ParseTuple(args, "y*y*y*w*", &val, &grp, &ok, &out))
        return NULL;
    Py_ssize_t n = val.len / 8;
    int bad = grp.len != 4 * n || ok.len != n || out.len != 8 * n;
    if (!bad) {
        const int64_t *v = val.buf;
        const int32_t *g = grp.buf;
        const unsigned char *m = ok.buf;
        int64_t *o = out.buf;
        Py_BEGIN_ALLOW_THREADS
        int64_t cur = -1;
        for (Py_ssize_t i = 0; i < n; i++) {
            int64_t q = m[i] ? v[i] : -1;
            if (i == 0 || g[i] != g[i - 1] || q > cur)
                cur = q;
            o[i] = cur;
        }
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&val);
    PyBuffer_Release(&grp);
    PyBuffer_Release(&ok);
    PyBuffer_Release(&out);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "cummax: arrays of different lengths");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- connections ------------------------------------------------------------------- */

/* Provisional connection numbers across the batches of one read of a capture (the C side of
 * collectors/_connections.Connections; its pure-Python twin there gives the same numbers):
 *
 *   conn_new() -> capsule
 *   conn_number(capsule, version, src_hi, src_lo, dst_hi, dst_lo, sport, dport, proto,
 *               pflow, swap) -> number of connections so far
 *   conn_keys(capsule, start, lo, hi, proto)   fill int64[n - start] x 2 and uint8[n - start]
 *                                             with connections start.. (n = connections)
 *   conn_v6(capsule, start) -> bytes of uint64 (hi, lo) pairs of IPv6 addresses start.., in
 *                              number order
 *
 * An address's identity is its IPv4 value, or V6_BASE + its IPv6 number (order of first
 * appearance); an endpoint is (identity << 16) | port; a connection is (low endpoint, high
 * endpoint, protocol), numbered in order of first appearance; swap = the packet's sender is
 * the high endpoint. Open addressing on a splitmix64 hash of the exact key (no hash is
 * trusted: slots compare the keys); consecutive packets of one connection skip the lookup. */
#define V6_BASE ((int64_t)1 << 32)

typedef struct {
    int64_t *lo, *hi;
    uint8_t *proto;
    int64_t n, cap;
    int32_t *slot;               /* connection number, -1 empty */
    uint64_t mask;
    uint64_t *a6;                /* (hi, lo) per IPv6 address number */
    int64_t n6, cap6;
    int32_t *slot6;
    uint64_t mask6;
    int have_last;               /* the previous packet's raw key and its answer */
    uint64_t l_shi, l_slo, l_dhi, l_dlo;
    uint32_t l_sp, l_dp, l_pr, l_ver;
    int32_t l_id;
    uint8_t l_swap;
} conns;

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static void conns_free(PyObject *capsule)
{
    conns *c = PyCapsule_GetPointer(capsule, "airlink.conns");
    if (!c)
        return;
    free(c->lo); free(c->hi); free(c->proto); free(c->slot); free(c->a6); free(c->slot6);
    free(c);
}

static int32_t *empty_slots(uint64_t size)
{
    int32_t *s = malloc(size * sizeof(int32_t));
    if (s)
        for (uint64_t i = 0; i < size; i++)
            s[i] = -1;
    return s;
}

static inline uint64_t flow_hash(int64_t lo, int64_t hi, uint32_t proto)
{
    return mix64(mix64((uint64_t)lo ^ 0x9E3779B97F4A7C15ULL) ^ (uint64_t)hi ^ ((uint64_t)proto << 56));
}

/* table sizes double at half load; returns 0 on allocation failure */
static int conns_grow(conns *c)
{
    if (c->n < c->cap)
        return 1;
    int64_t cap = c->cap ? 2 * c->cap : 1024;
    int64_t *lo = realloc(c->lo, cap * sizeof(int64_t));
    if (!lo) return 0;
    c->lo = lo;
    int64_t *hi = realloc(c->hi, cap * sizeof(int64_t));
    if (!hi) return 0;
    c->hi = hi;
    uint8_t *pr = realloc(c->proto, cap);
    if (!pr) return 0;
    c->proto = pr;
    uint64_t size = 2 * (uint64_t)cap;
    int32_t *slot = empty_slots(size);
    if (!slot) return 0;
    for (int64_t k = 0; k < c->n; k++) {
        uint64_t h = flow_hash(c->lo[k], c->hi[k], c->proto[k]) & (size - 1);
        while (slot[h] >= 0)
            h = (h + 1) & (size - 1);
        slot[h] = (int32_t)k;
    }
    free(c->slot);
    c->slot = slot;
    c->mask = size - 1;
    c->cap = cap;
    return 1;
}

static int conns_grow6(conns *c)
{
    if (c->n6 < c->cap6)
        return 1;
    int64_t cap = c->cap6 ? 2 * c->cap6 : 256;
    uint64_t *a6 = realloc(c->a6, cap * 2 * sizeof(uint64_t));
    if (!a6) return 0;
    c->a6 = a6;
    uint64_t size = 2 * (uint64_t)cap;
    int32_t *slot = empty_slots(size);
    if (!slot) return 0;
    for (int64_t k = 0; k < c->n6; k++) {
        uint64_t h = mix64(c->a6[2 * k] ^ mix64(c->a6[2 * k + 1])) & (size - 1);
        while (slot[h] >= 0)
            h = (h + 1) & (size - 1);
        slot[h] = (int32_t)k;
    }
    free(c->slot6);
    c->slot6 = slot;
    c->mask6 = size - 1;
    c->cap6 = cap;
    return 1;
}

/* identity of an address (see above); -1 on allocation failure */
static int64_t address_ident(conns *c, uint32_t version, uint64_t hi, uint64_t lo)
{
    if (version != 6)
        return (int64_t)lo;
    if (!conns_grow6(c))
        return -1;
    uint64_t h = mix64(hi ^ mix64(lo)) & c->mask6;
    for (;; h = (h + 1) & c->mask6) {
        int32_t k = c->slot6[h];
        if (k < 0) {
            k = (int32_t)c->n6++;
            c->a6[2 * k] = hi;
            c->a6[2 * k + 1] = lo;
            c->slot6[h] = k;
            return V6_BASE + k;
        }
        if (c->a6[2 * k] == hi && c->a6[2 * k + 1] == lo)
            return V6_BASE + k;
    }
}

static PyObject *conn_new(PyObject *self, PyObject *args)
{
    conns *c = calloc(1, sizeof(conns));
    if (!c)
        return PyErr_NoMemory();
    PyObject *cap = PyCapsule_New(c, "airlink.conns", conns_free);
    if (!cap)
        free(c);
    return cap;
}

static PyObject *conn_number(PyObject *self, PyObject *args)
{
    PyObject *capsule;
    Py_buffer b[10];
    if (!PyArg_ParseTuple(args, "Oy*y*y*y*y*y*y*y*w*w*", &capsule, &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &b[8], &b[9]))
        return NULL;
    conns *c = PyCapsule_GetPointer(capsule, "airlink.conns");
    Py_ssize_t n = b[0].len;
    /* widths: version u8, addresses u64 x4, ports u16 x2, proto u8, pflow i32, swap bool */
    static const int width[10] = {1, 8, 8, 8, 8, 2, 2, 1, 4, 1};
    int bad = c == NULL, nomem = 0;
    for (int k = 0; k < 10 && !bad; k++)
        bad = b[k].len != n * width[k];
    if (!bad) {
        const uint8_t *ver = b[0].buf, *pr = b[7].buf;
        const uint64_t *shi = b[1].buf, *slo = b[2].buf, *dhi = b[3].buf, *dlo = b[4].buf;
        const uint16_t *sp = b[5].buf, *dp = b[6].buf;
        int32_t *out = b[8].buf;
        uint8_t *swap = b[9].buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n; i++) {
            if (c->have_last && slo[i] == c->l_slo && dlo[i] == c->l_dlo && sp[i] == c->l_sp
                && dp[i] == c->l_dp && pr[i] == c->l_pr && ver[i] == c->l_ver && shi[i] == c->l_shi
                && dhi[i] == c->l_dhi) {
                out[i] = c->l_id;
                swap[i] = c->l_swap;
                continue;
            }
            int64_t sa = address_ident(c, ver[i], shi[i], slo[i]);
            int64_t da = address_ident(c, ver[i], dhi[i], dlo[i]);
            if (sa < 0 || da < 0 || !conns_grow(c)) {
                nomem = 1;
                break;
            }
            int64_t ea = (sa << 16) | sp[i], eb = (da << 16) | dp[i];
            uint8_t sw = ea > eb;
            int64_t lo = sw ? eb : ea, hi = sw ? ea : eb;
            uint64_t h = flow_hash(lo, hi, pr[i]) & c->mask;
            int32_t id;
            for (;; h = (h + 1) & c->mask) {
                id = c->slot[h];
                if (id < 0) {
                    id = (int32_t)c->n++;
                    c->lo[id] = lo;
                    c->hi[id] = hi;
                    c->proto[id] = pr[i];
                    c->slot[h] = id;
                    break;
                }
                if (c->lo[id] == lo && c->hi[id] == hi && c->proto[id] == pr[i])
                    break;
            }
            out[i] = id;
            swap[i] = sw;
            c->have_last = 1;
            c->l_shi = shi[i]; c->l_slo = slo[i]; c->l_dhi = dhi[i]; c->l_dlo = dlo[i];
            c->l_sp = sp[i]; c->l_dp = dp[i]; c->l_pr = pr[i]; c->l_ver = ver[i];
            c->l_id = id;
            c->l_swap = sw;
        }
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < 10; k++)
        PyBuffer_Release(&b[k]);
    if (nomem)
        return PyErr_NoMemory();
    if (bad) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "conn_number: arrays of different lengths or dtypes");
        return NULL;
    }
    return PyLong_FromLongLong(c->n);
}

static PyObject *conn_keys(PyObject *self, PyObject *args)
{
    PyObject *capsule;
    Py_ssize_t start;
    Py_buffer lo, hi, pr;
    if (!PyArg_ParseTuple(args, "Onw*w*w*", &capsule, &start, &lo, &hi, &pr))
        return NULL;
    conns *c = PyCapsule_GetPointer(capsule, "airlink.conns");
    int64_t k = c == NULL || start < 0 || start > c->n ? -1 : c->n - start;
    int bad = k < 0 || lo.len != 8 * k || hi.len != 8 * k || pr.len != k;
    if (!bad && k) {
        memcpy(lo.buf, c->lo + start, 8 * k);
        memcpy(hi.buf, c->hi + start, 8 * k);
        memcpy(pr.buf, c->proto + start, k);
    }
    PyBuffer_Release(&lo);
    PyBuffer_Release(&hi);
    PyBuffer_Release(&pr);
    if (bad) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "conn_keys: arrays not of the number of connections after start");
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *conn_v6(PyObject *self, PyObject *args)
{
    PyObject *capsule;
    Py_ssize_t start;
    if (!PyArg_ParseTuple(args, "On", &capsule, &start))
        return NULL;
    conns *c = PyCapsule_GetPointer(capsule, "airlink.conns");
    if (!c)
        return NULL;
    if (start < 0 || start > c->n6) {
        PyErr_SetString(PyExc_ValueError, "conn_v6: start beyond the addresses");
        return NULL;
    }
    return PyBytes_FromStringAndSize((const char *)(c->a6 + 2 * start),
                                     (Py_ssize_t)((c->n6 - start) * 2 * sizeof(uint64_t)));
}

/* ---- one TCP flow in time chunks ---------------------------------------------------- */

/* stream_rows(dr, seq, ack, flags, pay, win, state, rel, rela, end, am0, am1, sm0, sm1, smb,
 *             keepalive, below, dupack):
 * the per-row chain of collectors/_tcpstream.FlowStream.chunk (its numpy twin, _rows_numpy,
 * gives the same values; a test compares them), one pass instead of unwraps, running maxima
 * and neighbour comparisons per direction. dr int8[n] (direction 0/1), seq/ack uint32[n],
 * flags uint8[n], pay int64[n], win uint16[n]; state int64[28], read and updated: base[d]
 * (ISN, 0-1), seq_seen[d] (2-3), last_seq[d] (4-5), last_rel[d] (6-7), ack_seen[d] (8-9),
 * last_ack[d] (10-11), last_rela[d] (12-13), am[a] (14-15, the ACK maximum of direction a,
 * -1: none), sm[d] (16-17, snd_max, -1: none), prev_seen[d] (18-19), prev_rela[d] (20-21),
 * prev_win[d] (22-23) of d's previous row, ka_seen[d] (24-25), ka[d] (26-27): keep-alive
 * flag of d's previous row. Out int64[n]:
 *   rel  = sequence number unwrapped from the direction's previous one (signed 32-bit step;
 *          the first of a direction: (seq - base[d]) mod 2^32),
 *   rela = the same of the ACK number against base[1-d] (rows without ACK step from
 *          base[1-d]'s value and give -1),
 *   end  = rel + pay + SYN + FIN,
 *   am0/am1, sm0/sm1 = the running maxima after each row (ACK-bearing rows of a / rows of d),
 *   smb  = snd_max of the row's own direction before the row (s);
 * out bool[n]:
 *   keepalive = pay <= 1, no SYN/FIN, rel == s - 1,
 *   below     = (pay > 0 or SYN/FIN), rel < s, not keepalive, s >= 0,
 *   dupack    = same rela and window as d's previous row, no payload nor SYN/FIN/RST, ACK,
 *               window > 0, rel == s, and the other direction's previous row no keep-alive. */
static PyObject *stream_rows(PyObject *self, PyObject *args)
{
    Py_buffer b[18];
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*w*w*w*w*w*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &b[15],
                          &b[16], &b[17]))
        return NULL;
    Py_ssize_t n = b[0].len;
    int bad = b[1].len != 4 * n || b[2].len != 4 * n || b[3].len != n || b[4].len != 8 * n ||
              b[5].len != 2 * n || b[6].len != 28 * 8;
    for (int k = 7; k < 15; k++)
        bad |= b[k].len != 8 * n;
    for (int k = 15; k < 18; k++)
        bad |= b[k].len != n;
    if (!bad) {
        const int8_t *dr = b[0].buf;
        const uint32_t *seq = b[1].buf, *ack = b[2].buf;
        const uint8_t *fl = b[3].buf;
        const int64_t *pay = b[4].buf;
        const uint16_t *win = b[5].buf;
        int64_t *st = b[6].buf;
        int64_t *rel = b[7].buf, *rela = b[8].buf, *end = b[9].buf, *am0 = b[10].buf, *am1 = b[11].buf,
                *sm0 = b[12].buf, *sm1 = b[13].buf, *smb = b[14].buf;
        uint8_t *kao = b[15].buf, *blo = b[16].buf, *dup = b[17].buf;
        Py_BEGIN_ALLOW_THREADS
        int64_t seen[2] = {st[2], st[3]}, lrel[2] = {st[6], st[7]}, aseen[2] = {st[8], st[9]},
                lrela[2] = {st[12], st[13]}, am[2] = {st[14], st[15]}, sm[2] = {st[16], st[17]};
        uint32_t base[2] = {(uint32_t)st[0], (uint32_t)st[1]}, lseq[2] = {(uint32_t)st[4], (uint32_t)st[5]},
                 lack[2] = {(uint32_t)st[10], (uint32_t)st[11]};
        int64_t pseen[2] = {st[18], st[19]}, prela[2] = {st[20], st[21]}, pwin[2] = {st[22], st[23]},
                kseen[2] = {st[24], st[25]}, ka[2] = {st[26], st[27]};
        for (Py_ssize_t i = 0; i < n; i++) {
            int d = dr[i];
            if (d != 0 && d != 1) {
                bad = 1;
                break;
            }
            uint32_t s = seq[i];
            int64_t r = seen[d] ? lrel[d] + (int32_t)(s - lseq[d]) : (int64_t)(uint32_t)(s - base[d]);
            seen[d] = 1;
            lseq[d] = s;
            lrel[d] = r;
            unsigned f = fl[i];
            int ha = (f & 0x10) != 0;
            uint32_t a = ha ? ack[i] : base[1 - d];
            int64_t ra = aseen[d] ? lrela[d] + (int32_t)(a - lack[d]) : (int64_t)(uint32_t)(a - base[1 - d]);
            aseen[d] = 1;
            lack[d] = a;
            lrela[d] = ra;
            rel[i] = r;
            rela[i] = ha ? ra : -1;
            int64_t p = pay[i], e = r + p + ((f & 0x02) != 0) + ((f & 0x01) != 0), sb = sm[d];
            int64_t ro = ha ? ra : -1, w = win[i];
            int synfin = (f & 0x03) != 0;
            int k = p <= 1 && !synfin && r == sb - 1;
            kao[i] = (uint8_t)k;
            blo[i] = (p > 0 || synfin) && r < sb && !k && sb >= 0;
            dup[i] = pseen[d] && ro == prela[d] && w == pwin[d] && p == 0 && !(f & 0x07) && ha && w > 0 &&
                     r == sb && !(kseen[1 - d] && ka[1 - d]);
            pseen[d] = 1;
            prela[d] = ro;
            pwin[d] = w;
            kseen[d] = 1;
            ka[d] = k;
            end[i] = e;
            smb[i] = sb;
            if (e > sm[d])
                sm[d] = e;
            if (ha && ra > am[d])
                am[d] = ra;
            am0[i] = am[0];
            am1[i] = am[1];
            sm0[i] = sm[0];
            sm1[i] = sm[1];
        }
        for (int d = 0; d < 2; d++) {
            st[2 + d] = seen[d];
            st[4 + d] = lseq[d];
            st[6 + d] = lrel[d];
            st[8 + d] = aseen[d];
            st[10 + d] = lack[d];
            st[12 + d] = lrela[d];
            st[14 + d] = am[d];
            st[16 + d] = sm[d];
            st[18 + d] = pseen[d];
            st[20 + d] = prela[d];
            st[22 + d] = pwin[d];
            st[24 + d] = kseen[d];
            st[26 + d] = ka[d];
        }
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < 18; k++)
        PyBuffer_Release(&b[k]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "stream_rows: arrays of different lengths, a state of other "
                                          "than 28 values or a direction other than 0/1");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* stream_bins(t, dr, flags, ip_len, pay, win, rela, am0, am1, sm0, sm1, params, packets, bytes,
 *             pay_sum, rw_sum, rw_n, infl_s, infl_c):
 * the per-bin sums of FlowStream.chunk's series in one pass (its numpy twin there sums runs of
 * rows per bin; a test compares both ways). t int64[n] (ns), dr int8[n], flags uint8[n],
 * ip_len uint32[n], pay int64[n], win uint16[n], rela/am0/am1/sm0/sm1 int64[n] (stream_rows'
 * outputs); params int64[5] = (res_ns, start_bin, nb, shift0, shift1). Each float64[2 * nb]
 * accumulator gets, at half * nb + bin (bin = floor(t / res_ns) - start_bin, else ValueError):
 *   packets, bytes, pay_sum += 1, ip_len, pay           at the row's own half,
 *   rw_sum += win << shift[d] (SYN: win), rw_n += 1      at the other half, rows with ACK,
 *   infl_s += max(sm[h] - max(am[1-h], 0), 0) (0 while sm[h] < 0), infl_c += 1
 *                                                        at both halves h.
 * Integer values added to integer-valued doubles below 2^53: exact in any order. */
static PyObject *stream_bins(PyObject *self, PyObject *args)
{
    Py_buffer b[19];
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &b[15],
                          &b[16], &b[17], &b[18]))
        return NULL;
    Py_ssize_t n = b[1].len;
    int bad = b[0].len != 8 * n || b[2].len != n || b[3].len != 4 * n || b[4].len != 8 * n ||
              b[5].len != 2 * n || b[11].len != 5 * 8;
    for (int k = 6; k < 11; k++)
        bad |= b[k].len != 8 * n;
    const int64_t *par = b[11].buf;
    int64_t res = bad ? 1 : par[0], start = bad ? 0 : par[1], nb = bad ? 0 : par[2];
    for (int k = 12; k < 19; k++)
        bad |= b[k].len != 2 * nb * (Py_ssize_t)sizeof(double);
    bad |= res <= 0;
    if (!bad) {
        const int64_t *t = b[0].buf, *pay = b[4].buf, *rela = b[6].buf, *am0 = b[7].buf, *am1 = b[8].buf,
                      *sm0 = b[9].buf, *sm1 = b[10].buf;
        const int8_t *dr = b[1].buf;
        const uint8_t *fl = b[2].buf;
        const uint32_t *ipl = b[3].buf;
        const uint16_t *win = b[5].buf;
        int64_t shift[2] = {par[3], par[4]};
        double *pk = b[12].buf, *by = b[13].buf, *py = b[14].buf, *rs = b[15].buf, *rn = b[16].buf,
               *is = b[17].buf, *ic = b[18].buf;
        Py_BEGIN_ALLOW_THREADS
        /* rows in time order stay in one bin for long: the bin's edges are kept (no division
         * per row) and its sums gathered in integers, added to the doubles when the bin changes */
        int64_t cur = -1, lo = 0, hi = 0;
        int64_t apk[2] = {0, 0}, aby[2] = {0, 0}, apy[2] = {0, 0}, ars[2] = {0, 0}, arn[2] = {0, 0},
                ais[2] = {0, 0}, aic = 0;
        for (Py_ssize_t i = 0; i <= n; i++) {
            int d = 0;
            if (i < n) {
                d = dr[i];
                if (d != 0 && d != 1) {
                    bad = 1;
                    break;
                }
            }
            if (i == n || t[i] < lo || t[i] >= hi) {
                if (cur >= 0) {
                    for (int h = 0; h < 2; h++) {
                        int64_t at = h * nb + cur;
                        pk[at] += (double)apk[h];
                        by[at] += (double)aby[h];
                        py[at] += (double)apy[h];
                        rs[at] += (double)ars[h];
                        rn[at] += (double)arn[h];
                        is[at] += (double)ais[h];
                        ic[at] += (double)aic;
                        apk[h] = aby[h] = apy[h] = ars[h] = arn[h] = ais[h] = 0;
                    }
                    aic = 0;
                }
                if (i == n)
                    break;
                int64_t q = t[i] / res;
                if (t[i] % res != 0 && t[i] < 0)
                    q--;
                cur = q - start;
                if (cur < 0 || cur >= nb) {
                    bad = 1;
                    break;
                }
                lo = q * res;
                hi = lo + res;
            }
            apk[d] += 1;
            aby[d] += ipl[i];
            apy[d] += pay[i];
            if (rela[i] >= 0) {
                ars[1 - d] += (fl[i] & 0x02) ? (int64_t)win[i] : (int64_t)win[i] << shift[d];
                arn[1 - d] += 1;
            }
            int64_t s0 = sm0[i], s1 = sm1[i], a0 = am0[i] > 0 ? am0[i] : 0, a1 = am1[i] > 0 ? am1[i] : 0;
            ais[0] += s0 < 0 || s0 < a1 ? 0 : s0 - a1;
            ais[1] += s1 < 0 || s1 < a0 ? 0 : s1 - a0;
            aic += 1;
        }
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < 19; k++)
        PyBuffer_Release(&b[k]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "stream_bins: arrays of different lengths, a row outside the "
                                          "bins or a direction other than 0/1");
        return NULL;
    }
    Py_RETURN_NONE;
}

#include "_census.c"        /* census_add */

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(buf, n, little, ns_per_tick, frac_max, limit, off, cap, orig, ts) -> "
     "(records, stop, status): the pcap record walk (see the module source)."},
    {"walk_ng", walk_ng, METH_VARARGS,
     "walk_ng(buf, start, n, little, ifaces, off, cap, orig, ts, lt, iface) -> (records, stop, status): "
     "the pcapng packet-block walk (see the module source)."},
    {"decode", decode, METH_VARARGS,
     "decode(buf, data_off, caplen, origlen, kind, l3_at, proto_at, outs) -> kept: "
     "_decode.decode() for one link type, packet by packet (see the module source)."},
    {"unwrap", unwrap, METH_VARARGS,
     "unwrap(raw, groups, base, out): 32-bit values unwrapped within contiguous groups (tcp._unwrap)."},
    {"cummax", cummax, METH_VARARGS,
     "cummax(values, groups, valid, out): running maximum within contiguous groups (tcp._grouped_cummax)."},
    {"conn_new", conn_new, METH_NOARGS, "conn_new() -> capsule: an empty connection table (see the module source)."},
    {"conn_number", conn_number, METH_VARARGS,
     "conn_number(table, version, src_hi, src_lo, dst_hi, dst_lo, sport, dport, proto, pflow, swap) -> "
     "connections so far: provisional connection numbers of a batch (see the module source)."},
    {"conn_keys", conn_keys, METH_VARARGS,
     "conn_keys(table, start, lo, hi, proto): the keys of connections start.., in number order."},
    {"conn_v6", conn_v6, METH_VARARGS,
     "conn_v6(table, start) -> bytes of uint64 (hi, lo) per IPv6 address number from start."},
    {"stream_rows", stream_rows, METH_VARARGS,
     "stream_rows(dr, seq, ack, flags, pay, win, state, rel, rela, end, am0, am1, sm0, sm1, smb, keepalive, "
     "below, dupack): the per-row "
     "chain of one flow's time chunk (_tcpstream; see the module source)."},
    {"stream_bins", stream_bins, METH_VARARGS,
     "stream_bins(t, dr, flags, ip_len, pay, win, rela, am0, am1, sm0, sm1, params, packets, bytes, pay_sum, "
     "rw_sum, rw_n, infl_s, infl_c): the per-bin series sums of one flow's time chunk (see the module source)."},
    {"census_add", census_add, METH_VARARGS,
     "census_add(pfl, swap, ts, flags, seq, ip_len, wscale, mss, ipidx0, counts, pk, by, kept): "
     "a batch added to a capture's census (see collectors/_census.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_records",
    "The capture reader's per-record loops in C: the pcap record walk and the header decoder.", -1, methods,
};

PyMODINIT_FUNC PyInit__records(void)
{
    return PyModule_Create(&module);
}
