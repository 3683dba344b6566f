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
       O_SACK_BLOCKS, O_DSACK, O_DSACK_LEFT, O_MSS, O_WSCALE, O_SYNOPT, O_ECN, O_TEID, O_QFI, N_OUT };
static const int out_size[N_OUT] = {8, 1, 4, 8, 8, 8, 8, 1, 4, 2, 2, 4, 4, 1, 2, 4, 4, 4, 1, 1, 1, 4,
                                    2, 1, 1, 1, 8, 1};
#define SYN 0x02
#define GTPU_PORT 2152             /* _decode.GTPU_PORT */
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

/* GTP-U (3GPP TS 29.281): a G-PDU in UDP port 2152 (either side) carries a user's IP
   packet. Returns the offset of that inner IP header (its family in *inner_fam), or -1
   where the packet at l3 is not one: outer IPv4 (any IHL, not a later fragment) or IPv6
   without extension headers; GTPv1-U, PT 1, message type 255; the optional fields and the
   extension header chain (4 * length bytes each, the last byte naming the next: 5G's PDU
   session container among them) stepped over; the inner header wholly captured. Where it is
   one, *teid is the tunnel's TEID and *qfi the QoS flow of a PDU session container (type
   0x85, TS 38.415: the low 6 bits of its second octet), else left as they are. The
   reference is gtpu_inner() in _decode.py. */
static int64_t gtpu_inner(const unsigned char *b, int64_t l3, int fam, int64_t end, int *inner_fam,
                          int64_t *teid, int *qfi)
{
    const unsigned char *ip = b + l3;
    int64_t l4;
    if (fam == 4) {
        int64_t ihl = (int64_t)(ip[0] & 0x0F) * 4;
        if (ip[9] != 17 || (be16(ip + 6) & 0x1FFF) != 0 || ihl < 20)
            return -1;
        l4 = l3 + ihl;
    } else {
        if (ip[6] != 17)
            return -1;
        l4 = l3 + 40;
    }
    if (l4 + 16 > end || (be16(b + l4) != GTPU_PORT && be16(b + l4 + 2) != GTPU_PORT))
        return -1;
    const unsigned char *g = b + l4 + 8;
    if ((g[0] & 0xF0) != 0x30 || g[1] != 0xFF)
        return -1;
    int64_t p = l4 + 16;
    int nt = 0;
    if (g[0] & 0x07) {
        if (p + 4 > end)
            return -1;
        nt = (g[0] & 0x04) ? b[p + 3] : 0;
        p += 4;
    }
    int q = -1;
    for (int t = 0; nt && t < 8; t++) {
        int64_t len = (int64_t)b[p] * 4;
        if (p + 1 > end || len == 0 || p + len > end)
            return -1;
        if (nt == 0x85)                           /* PDU session container: QFI in octet 2 */
            q = b[p + 2] & 0x3F;
        nt = b[p + len - 1];
        p += len;
    }
    if (nt || p + 1 > end)
        return -1;
    int v = b[p] >> 4;
    if (!((v == 4 && end - p >= 20) || (v == 6 && end - p >= 40)))
        return -1;
    *inner_fam = v;
    *teid = be32(g + 4);
    *qfi = q;
    return p;
}

/*
 * decode(buf, data_off, caplen, origlen, kind, l3_at, proto_at, outs) -> kept
 *
 * buf: the batch buffer (zero padding after the last record); data_off/caplen/origlen:
 * int64 per record; kind: L_* (ether, fixed = Linux cooked with IP at l3_at and the
 * protocol at proto_at, raw, BSD loopback in host or network order); outs: a tuple of
 * N_OUT writable buffers of at least len(data_off) items each, of the sizes in out_size,
 * or N_OUT - 2 without the tunnel ids (O_TEID, O_QFI: not written).
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
    Py_ssize_t n_out = PyTuple_GET_SIZE(outs);
    if (capb.len / 8 < n || origb.len / 8 < n || (n_out != N_OUT && n_out != O_TEID)) {
        err = PyExc_ValueError;
        goto release;
    }
    int tunnel_ids = n_out == N_OUT;
    for (got = 0; got < n_out; got++) {
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
        if (fam) {            /* the version nibble, as ip_family() in _decode.py */
            int v = b[l3] >> 4;
            fam = fam == 4 ? (v == 4 || v == 6 ? v : 0) : (v == 6 ? 6 : 0);
        }
        if ((fam == 4 && end - l3 < 20) || (fam == 6 && end - l3 < 40) || fam == 0)
            continue;
        int inner_fam, qfi = -1;
        int64_t teid = -1;
        int64_t inner = gtpu_inner(b, l3, fam, end, &inner_fam, &teid, &qfi);
        if (inner >= 0) {                                 /* the user's packet in the tunnel */
            l3 = inner;
            fam = inner_fam;
        }
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
        if (tunnel_ids) {
            PUT(O_TEID, int64_t, teid);
            PUT(O_QFI, int8_t, qfi);
        }
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
    {"conn_new", conn_new, METH_NOARGS, "conn_new() -> capsule: an empty connection table (see the module source)."},
    {"conn_number", conn_number, METH_VARARGS,
     "conn_number(table, version, src_hi, src_lo, dst_hi, dst_lo, sport, dport, proto, pflow, swap) -> "
     "connections so far: provisional connection numbers of a batch (see the module source)."},
    {"conn_keys", conn_keys, METH_VARARGS,
     "conn_keys(table, start, lo, hi, proto): the keys of connections start.., in number order."},
    {"conn_v6", conn_v6, METH_VARARGS,
     "conn_v6(table, start) -> bytes of uint64 (hi, lo) per IPv6 address number from start."},
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
