/*
 * airlink.collectors._tcploops: the TCP analysis' per-row loops in C, each the compiled twin
 * of a numpy form that stays the readable reference (tests compare them):
 *
 * unwrap(raw, groups, base, out) and cummax(values, groups, valid, out): the per-group
 * loops of collectors/_tcparrays.py's _unwrap and _grouped_cummax (see there), one pass each
 * instead of several whole-array numpy passes; groups are contiguous runs of equal values.
 *
 * stream_rows: the per-row chain of a TCP engine's time chunk (runs of one flow each), stream_bins: the
 * per-bin series sums of any engine's chunk, stream_seqack and stream_tsecho: its sequence/ACK and
 * timestamp RTT samples (collectors/_tcpstream.FlowStream: _rows_numpy, _bin_sums_numpy, _seqack_numpy,
 * _tsecho_numpy).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- one TCP flow in time chunks ---------------------------------------------------- */

/* stream_rows(dr, seq, ack, flags, pay, win, state, runs, rel, rela, end, am0, am1, sm0, sm1, smb,
 *             keepalive, below, dupack):
 * the per-row chain of collectors/_tcpstream.FlowStream.chunk (its numpy twin, _rows_numpy,
 * gives the same values; a test compares them), one pass instead of unwraps, running maxima
 * and neighbour comparisons per direction. The rows are runs of one flow each: run r is rows
 * runs[r]..runs[r+1]-1 (runs int64[R+1], non-decreasing, runs[R] <= n) with its flow's state
 * row r of state int64[R][28]. dr int8[n] (direction 0/1), seq/ack uint32[n],
 * flags uint8[n], pay int64[n], win uint16[n]; a state row, read and updated: base[d]
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
/* The carried state of a run, after base (0-1, read only): X(type, name, offset) per pair
 * of values [d] = st[offset + d], loaded into locals of that name before the run's rows
 * and stored back after them. */
#define ROW_STATE(X)                                                                           \
    X(int64_t, seen, 2) X(uint32_t, lseq, 4) X(int64_t, lrel, 6) X(int64_t, aseen, 8)           \
    X(uint32_t, lack, 10) X(int64_t, lrela, 12) X(int64_t, am, 14) X(int64_t, sm, 16)           \
    X(int64_t, pseen, 18) X(int64_t, prela, 20) X(int64_t, pwin, 22) X(int64_t, kseen, 24)      \
    X(int64_t, ka, 26)
#define STATE_LOAD(type, name, off) type name[2] = {(type)st[off], (type)st[(off) + 1]};
#define STATE_STORE(type, name, off) st[off] = (int64_t)name[0]; st[(off) + 1] = (int64_t)name[1];

static PyObject *stream_rows(PyObject *self, PyObject *args)
{
    Py_buffer b[19];
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*w*y*w*w*w*w*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &b[15],
                          &b[16], &b[17], &b[18]))
        return NULL;
    Py_ssize_t n = b[0].len, nruns = b[7].len / 8 - 1;
    int bad = b[1].len != 4 * n || b[2].len != 4 * n || b[3].len != n || b[4].len != 8 * n ||
              b[5].len != 2 * n || nruns < 0 || b[6].len != 28 * 8 * nruns;
    for (int k = 8; k < 16; k++)
        bad |= b[k].len != 8 * n;
    for (int k = 16; k < 19; k++)
        bad |= b[k].len != n;
    const int64_t *runs = b[7].buf;
    for (Py_ssize_t r = 0; r < nruns && !bad; r++)
        bad = runs[r] < 0 || runs[r] > runs[r + 1] || runs[r + 1] > n;
    if (!bad) {
        const int8_t *dr = b[0].buf;
        const uint32_t *seq = b[1].buf, *ack = b[2].buf;
        const uint8_t *fl = b[3].buf;
        const int64_t *pay = b[4].buf;
        const uint16_t *win = b[5].buf;
        int64_t *rel = b[8].buf, *rela = b[9].buf, *end = b[10].buf, *am0 = b[11].buf, *am1 = b[12].buf,
                *sm0 = b[13].buf, *sm1 = b[14].buf, *smb = b[15].buf;
        uint8_t *kao = b[16].buf, *blo = b[17].buf, *dup = b[18].buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t run = 0; run < nruns && !bad; run++) {
            int64_t *st = (int64_t *)b[6].buf + 28 * run;
            uint32_t base[2] = {(uint32_t)st[0], (uint32_t)st[1]};
            ROW_STATE(STATE_LOAD)
            for (Py_ssize_t i = runs[run]; i < runs[run + 1]; i++) {
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
            ROW_STATE(STATE_STORE)
        }
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < 19; k++)
        PyBuffer_Release(&b[k]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "stream_rows: arrays of different lengths, a state of other "
                                          "than 28 values per run, runs out of order or a direction "
                                          "other than 0/1");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* stream_bins(t, dr, flags, ip_len, pay, win, rela, am0, am1, sm0, sm1, fl, res_ns, flows, packets,
 *             bytes, pay_sum, rw_sum, rw_n, infl_s, infl_c):
 * the per-bin sums of FlowStream.chunk's series in one pass (its numpy twin there sums slices
 * of rows with bincount; a test compares both ways). t int64[n] (ns), dr int8[n], flags
 * uint8[n], ip_len uint32[n], pay int64[n], win uint16[n], rela/am0/am1/sm0/sm1 int64[n]
 * (the per-row chain's outputs), fl int32[n] (the row's flow; a flow's rows consecutive, in
 * time order), res_ns int64[1]; flows int64[5 * F] = per flow (offset, start_bin, nb, shift0,
 * shift1). Each float64 accumulator gets, at offset + half * nb + bin (bin = floor(t / res_ns)
 * - start_bin, else ValueError; a row past the accumulator, ValueError):
 *   packets, bytes, pay_sum += 1, ip_len, pay           at the row's own half,
 *   rw_sum += win << shift[d] (SYN: win), rw_n += 1      at the other half, rows with ACK,
 *   infl_s += max(sm[h] - max(am[1-h], 0), 0) (0 while sm[h] < 0), infl_c += 1
 *                                                        at both halves h.
 * Integer values added to integer-valued doubles below 2^53: exact in any order. */
static PyObject *stream_bins(PyObject *self, PyObject *args)
{
    enum { NB = 21 };
    Py_buffer b[NB];
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*y*y*y*y*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3],
                          &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14],
                          &b[15], &b[16], &b[17], &b[18], &b[19], &b[20]))
        return NULL;
    Py_ssize_t n = b[1].len, total = b[14].len / (Py_ssize_t)sizeof(double), nflow = b[13].len / (5 * 8);
    int bad = b[0].len != 8 * n || b[2].len != n || b[3].len != 4 * n || b[4].len != 8 * n ||
              b[5].len != 2 * n || b[11].len != 4 * n || b[12].len != 8 || b[13].len != nflow * 5 * 8;
    for (int k = 6; k < 11; k++)
        bad |= b[k].len != 8 * n;
    for (int k = 14; k < NB; k++)
        bad |= b[k].len != total * (Py_ssize_t)sizeof(double);
    int64_t res = bad ? 1 : *(const int64_t *)b[12].buf;
    bad |= res <= 0;
    if (!bad) {
        const int64_t *t = b[0].buf, *pay = b[4].buf, *rela = b[6].buf, *am0 = b[7].buf, *am1 = b[8].buf,
                      *sm0 = b[9].buf, *sm1 = b[10].buf, *fp = b[13].buf;
        const int8_t *dr = b[1].buf;
        const uint8_t *fg = b[2].buf;
        const uint32_t *ipl = b[3].buf;
        const uint16_t *win = b[5].buf;
        const int32_t *fl = b[11].buf;
        double *pk = b[14].buf, *by = b[15].buf, *py = b[16].buf, *rs = b[17].buf, *rn = b[18].buf,
               *is = b[19].buf, *ic = b[20].buf;
        Py_BEGIN_ALLOW_THREADS
        /* rows of a flow in time order stay in one bin for long: the flow and the bin's edges
         * are kept (no division per row) and its sums gathered in integers, added to the
         * doubles when the flow or the bin changes */
        int64_t cur = -1, lo = 0, hi = 0, off = 0, nb = 0, shift[2] = {0, 0};
        int32_t f = -1;
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
            if (i == n || fl[i] != f || t[i] < lo || t[i] >= hi) {
                if (cur >= 0) {
                    for (int h = 0; h < 2; h++) {
                        int64_t at = off + h * nb + cur;
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
                if (fl[i] != f) {
                    f = fl[i];
                    if (f < 0 || f >= nflow) {
                        bad = 1;
                        break;
                    }
                    off = fp[5 * f];
                    nb = fp[5 * f + 2];
                    shift[0] = fp[5 * f + 3];
                    shift[1] = fp[5 * f + 4];
                    if (off < 0 || nb <= 0 || off + 2 * nb > total) {
                        bad = 1;
                        break;
                    }
                }
                int64_t q = t[i] / res;
                if (t[i] % res != 0 && t[i] < 0)
                    q--;
                cur = q - fp[5 * f + 1];
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
                ars[1 - d] += (fg[i] & 0x02) ? (int64_t)win[i] : (int64_t)win[i] << shift[d];
                arn[1 - d] += 1;
            }
            int64_t s0 = sm0[i], s1 = sm1[i], a0 = am0[i] > 0 ? am0[i] : 0, a1 = am1[i] > 0 ? am1[i] : 0;
            ais[0] += s0 < 0 || s0 < a1 ? 0 : s0 - a1;
            ais[1] += s1 < 0 || s1 < a0 ? 0 : s1 - a0;
            aic += 1;
        }
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < NB; k++)
        PyBuffer_Release(&b[k]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "stream_bins: arrays of different lengths, a flow or row outside "
                                          "the bins or a direction other than 0/1");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- RTT samples: first rows by key, in one pass ------------------------------------ */

/* A set of int64 keys with an int64 value each, for the runs of one flow at a time, made for keys
 * that mostly come in increasing order (segment ends, TSvals, TSecrs): those are appended to a
 * sorted array (a lookup is a binary search, or a cursor when the lookups rise too); the few
 * that come out of order go to a hash table (open addressing, linear probing) whose used slots
 * are cleared when the next run begins. A value is any int64 but -1, which lookups return for
 * a key that is absent. */
typedef struct {
    int64_t key, val;           /* val -1: empty */
} Slot;

typedef struct {
    int64_t *key, *val;         /* keys in increasing order */
    Py_ssize_t n, cur;          /* count; cursor of rising lookups */
    Slot *slot;                 /* the keys that came out of order */
    Py_ssize_t mask, *used, nused;
} Keys;

/* keys for at most `most` keys (pages of the arrays' unused tails are never touched) */
static int keys_init(Keys *h, Py_ssize_t most)
{
    h->key = malloc((most + 1) * sizeof(int64_t));
    h->val = malloc((most + 1) * sizeof(int64_t));
    h->used = malloc((most + 1) * sizeof(Py_ssize_t));
    h->slot = malloc(64 * sizeof(Slot));        /* grows with the keys out of order */
    h->mask = 63;
    h->n = h->cur = h->nused = 0;
    if (h->slot)
        memset(h->slot, 0xff, 64 * sizeof(Slot));
    return h->key && h->val && h->used && h->slot;
}

static void keys_free(Keys *h)
{
    free(h->key);
    free(h->val);
    free(h->used);
    free(h->slot);
}

static void keys_reset(Keys *h)
{
    for (Py_ssize_t j = 0; j < h->nused; j++)
        h->slot[h->used[j]].val = -1;
    h->n = h->cur = h->nused = 0;
}

static inline Slot *keys_slot(const Keys *h, int64_t k)
{
    uint64_t x = (uint64_t)k * 0x9E3779B97F4A7C15ULL;
    Py_ssize_t i = (Py_ssize_t)((x ^ (x >> 29)) & (uint64_t)h->mask);
    while (h->slot[i].val != -1 && h->slot[i].key != k)
        i = (i + 1) & h->mask;
    return &h->slot[i];
}

/* first index of the sorted keys a[lo..hi) not below k */
static inline Py_ssize_t lower_bound(const int64_t *a, Py_ssize_t lo, Py_ssize_t hi, int64_t k)
{
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (a[mid] < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* k's value, -1 if absent */
static inline int64_t keys_find(const Keys *h, int64_t k)
{
    if (h->n && h->key[h->n - 1] == k)            /* the latest key again: the usual case */
        return h->val[h->n - 1];
    Py_ssize_t p = lower_bound(h->key, 0, h->n, k);
    if (p < h->n && h->key[p] == k)
        return h->val[p];
    return h->nused ? keys_slot(h, k)->val : -1;
}

/* keys_find for lookups whose keys never fall */
static inline int64_t keys_find_rising(Keys *h, int64_t k)
{
    while (h->cur < h->n && h->key[h->cur] < k)
        h->cur++;
    if (h->cur < h->n && h->key[h->cur] == k)
        return h->val[h->cur];
    return h->nused ? keys_slot(h, k)->val : -1;
}

/* adds k with value v unless present: 1 added, 0 present, -1 no memory */
static inline int keys_add(Keys *h, int64_t k, int64_t v)
{
    if (h->n == 0 || k > h->key[h->n - 1]) {
        h->key[h->n] = k;
        h->val[h->n++] = v;
        return 1;
    }
    if (k == h->key[h->n - 1] || keys_find(h, k) != -1)
        return 0;
    if (2 * (h->nused + 1) > h->mask + 1) {        /* at most half full: twice the slots */
        Py_ssize_t cap = 2 * (h->mask + 1);
        Slot *old = h->slot, *grown = malloc(cap * sizeof(Slot));
        if (grown == NULL)
            return -1;
        memset(grown, 0xff, cap * sizeof(Slot));
        h->slot = grown;
        h->mask = cap - 1;
        for (Py_ssize_t j = 0; j < h->nused; j++) {
            Slot *s = keys_slot(h, old[h->used[j]].key);
            *s = old[h->used[j]];
            h->used[j] = s - h->slot;
        }
        free(old);
    }
    Slot *s = keys_slot(h, k);
    s->key = k;
    s->val = v;
    h->used[h->nused++] = s - h->slot;
    return 1;
}

/* stream_seqack(d, dr, orig, retx, rela, am, end, t, rel, runs, am_carry, nretx, held, h_end, h_row, h_t, h_rel,
 *               h_nr, g0, keep, s_idx, s_ms, s_rel, o_run, o_end, o_row, o_t, o_rel, o_nr) -> (samples, kept):
 * the sequence/ACK RTT matching of collectors/_tcpstream.FlowStream._seqack_numpy for data direction d (ACKs
 * from a = 1 - d), in one pass over the chunk's runs of one flow each (runs int64[R+1] as for stream_rows).
 * Per row: dr int8, orig bool (d's data, SYN or FIN sent once), retx bool (a retransmission), rela int64
 * (ACK relative, -1: none), am int64 (a's ACK maximum after the row), end/t/rel int64. Per run r: am_carry
 * (a's ACK maximum before the chunk), nretx (d's retransmissions before it) and held int64[2R]: the run's
 * flow's originals held from earlier chunks are h_*[held[2r]..held[2r+1]] (int64: end, row, t, rel, nr =
 * d's retransmissions before it). A row where a's ACK maximum advances to v > 0 is a sample when the first
 * original of the flow (held first, then the run's rows) ending at v was sent before it with as many
 * retransmissions of d before it as before the ACK: s_idx (the ACK's row in the chunk), s_ms (float64: the
 * ACK's time - the original's, in ms) and s_rel (the original's first byte). keep != 0: the originals each run leaves for the next chunk (the first
 * per end, end > the run's final ACK maximum; ends in increasing order, then the few that came out of
 * order) go to o_run (run), o_end, o_row, o_t, o_rel, o_nr. Rows are counted from g0 (o_row, h_row). */
static PyObject *stream_seqack(PyObject *self, PyObject *args)
{
    enum { NB = 26 };
    Py_buffer b[NB];
    int d, keep;
    long long g0;
    if (!PyArg_ParseTuple(args, "iy*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*y*Liw*w*w*w*w*w*w*w*w*", &d, &b[0], &b[1],
                          &b[2], &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12],
                          &b[13], &b[14], &b[15], &b[16], &g0, &keep, &b[17], &b[18], &b[19], &b[20], &b[21],
                          &b[22], &b[23], &b[24], &b[25]))
        return NULL;
    Py_ssize_t n = b[0].len, nruns = b[8].len / 8 - 1, nh = b[12].len / 8, no = b[20].len / 8,
               nsmax = b[17].len / 8;
    int bad = d < 0 || d > 1 || b[1].len != n || b[2].len != n || nruns < 0 || b[9].len != 8 * nruns ||
              b[10].len != 8 * nruns || b[11].len != 16 * nruns || b[18].len != b[17].len ||
              b[19].len != b[17].len;
    for (int k = 3; k < 8; k++)
        bad |= b[k].len != 8 * n;
    for (int k = 13; k < 17; k++)
        bad |= b[k].len != 8 * nh;
    for (int k = 21; k < 26; k++)
        bad |= b[k].len != 8 * no;
    const int64_t *runs = b[8].buf, *hb = b[11].buf;
    const int8_t *dr = b[0].buf;
    const uint8_t *orig = b[1].buf, *retx = b[2].buf;
    Py_ssize_t most = 0;
    for (Py_ssize_t r = 0; r < nruns && !bad; r++) {
        bad = runs[r] < 0 || runs[r] > runs[r + 1] || runs[r + 1] > n || hb[2 * r] < 0 ||
              hb[2 * r] > hb[2 * r + 1] || hb[2 * r + 1] > nh;
        Py_ssize_t m = (runs[r + 1] - runs[r]) + (hb[2 * r + 1] - hb[2 * r]);
        if (!bad && m > most)
            most = m;
    }
    Py_ssize_t ns = 0, nout = 0;
    int nomem = 0;
    Keys h = {0};
    int64_t *rx = NULL;                 /* the run's retransmission rows of d */
    if (!bad) {
        nomem = !keys_init(&h, most);
        rx = malloc((most + 1) * sizeof(int64_t));
        nomem |= rx == NULL;
    }
    if (!bad && !nomem) {
        const int64_t *rela = b[3].buf, *am = b[4].buf, *end = b[5].buf, *t = b[6].buf, *rel = b[7].buf,
                      *amc = b[9].buf, *nrc = b[10].buf, *hend = b[12].buf, *hrow = b[13].buf, *ht = b[14].buf,
                      *hrel = b[15].buf, *hnr = b[16].buf;
        double *sms = b[18].buf;
        int64_t *sidx = b[17].buf, *srel = b[19].buf, *orun = b[20].buf, *oend = b[21].buf,
                *orow = b[22].buf, *ot = b[23].buf, *orel = b[24].buf, *onr = b[25].buf;
        Py_BEGIN_ALLOW_THREADS
        /* an original's value: its row in the chunk, or -2 - its place among the held ones; it
         * was sent with as many retransmissions of d before it as the ACK has when none came
         * after it: a row after the run's last retransmission (or a held one whose count is
         * the carried one, before any retransmission of the run) */
        for (Py_ssize_t r = 0; r < nruns && !bad; r++) {
            Py_ssize_t nrx = 0;
            keys_reset(&h);
            for (Py_ssize_t j = hb[2 * r]; j < hb[2 * r + 1] && !bad; j++)
                nomem = bad = keys_add(&h, hend[j], -2 - j) < 0;
            int64_t prev = amc[r];
            for (Py_ssize_t i = runs[r]; i < runs[r + 1] && !bad; i++) {
                int di = dr[i];
                if (di != 0 && di != 1) {
                    bad = 1;
                    break;
                }
                if (di == d) {
                    if (orig[i])
                        nomem = bad = keys_add(&h, end[i], i) < 0;
                    else if (retx[i])
                        rx[nrx++] = i;
                }
                else if (am[i] != prev && rela[i] > 0) {
                    int64_t k = keys_find_rising(&h, rela[i]);     /* the ACK maximum only rises */
                    int ok = k >= 0 ? nrx == 0 || rx[nrx - 1] < k : k != -1 && nrx == 0 && hnr[-2 - k] == nrc[r];
                    if (ok) {
                        if (ns >= nsmax) {
                            bad = 1;
                            break;
                        }
                        sidx[ns] = i;
                        sms[ns] = (double)(t[i] - (k >= 0 ? t[k] : ht[-2 - k])) / 1e6;
                        srel[ns] = k >= 0 ? rel[k] : hrel[-2 - k];
                        ns++;
                    }
                }
                prev = am[i];
            }
            /* kept: the originals of the sorted keys, then those that came out of order */
            for (Py_ssize_t q = 0; keep && !bad && q < h.n + h.nused; q++) {
                int64_t key = q < h.n ? h.key[q] : h.slot[h.used[q - h.n]].key,
                        k = q < h.n ? h.val[q] : h.slot[h.used[q - h.n]].val;
                if (key <= prev)
                    continue;
                if (nout >= no) {
                    bad = 1;
                    break;
                }
                orun[nout] = r;
                oend[nout] = key;
                if (k >= 0) {
                    Py_ssize_t lo = 0, hi = nrx;          /* retransmissions of the run before row k */
                    while (lo < hi) {
                        Py_ssize_t mid = lo + (hi - lo) / 2;
                        if (rx[mid] < k)
                            lo = mid + 1;
                        else
                            hi = mid;
                    }
                    orow[nout] = g0 + k;
                    ot[nout] = t[k];
                    orel[nout] = rel[k];
                    onr[nout] = nrc[r] + lo;
                }
                else {
                    orow[nout] = hrow[-2 - k];
                    ot[nout] = ht[-2 - k];
                    orel[nout] = hrel[-2 - k];
                    onr[nout] = hnr[-2 - k];
                }
                nout++;
            }
        }
        Py_END_ALLOW_THREADS
    }
    keys_free(&h);
    free(rx);
    for (int k = 0; k < NB; k++)
        PyBuffer_Release(&b[k]);
    if (nomem)
        return PyErr_NoMemory();
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "stream_seqack: arrays of different lengths, runs or held bounds out "
                                          "of order, a direction other than 0/1 or no room for the held rows");
        return NULL;
    }
    return Py_BuildValue("nn", ns, nout);
}

/* stream_tsecho(d, dr, flags, has_ts, tsval, tsecr, t, runs, fkey, held, h_key, h_row, h_t, echoed, e_key, g0,
 *               keep, s_idx, s_ms, s_key, o_run, o_key, o_row, o_t, x_key) -> (samples, kept, echoed):
 * the timestamp RTT matching of collectors/_tcpstream.FlowStream._tsecho_numpy for data direction d (echoes
 * from a = 1 - d), in one pass over the chunk's runs of one flow each (runs as for stream_rows). Per row:
 * dr int8, flags uint8 (ACK: 0x10), has_ts bool, tsval/tsecr uint32, t int64. A value's key is
 * fkey[r] + value (fkey int64[R]: the run's flow * 2^32, or 0 for an engine of one flow). Per run, bounds
 * int64[2R] into what earlier chunks left: held -> h_key/h_row/h_t (d's first row with each TSval, by key)
 * and echoed -> e_key (the TSecr keys a echoed, ascending). A row of a with ACK and timestamps echoing a key
 * for the first time (not in e_key, not earlier in the chunk) is a sample when d sent that TSval first at an
 * earlier row: s_idx (the echo's row in the chunk), s_ms (float64: the echo's time - the TSval row's, in
 * ms), s_key. keep != 0: each
 * run's first rows per TSval not echoed in this chunk go to o_run, o_key, o_row, o_t (held first, then in
 * row order), and the keys echoed for the first time to x_key. Rows are counted from g0. */
typedef struct {
    int64_t key, row, t;
} FirstRow;

static PyObject *stream_tsecho(PyObject *self, PyObject *args)
{
    enum { NB = 22 };
    Py_buffer b[NB];
    int d, keep;
    long long g0;
    if (!PyArg_ParseTuple(args, "iy*y*y*y*y*y*y*y*y*y*y*y*y*y*Liw*w*w*w*w*w*w*w*", &d, &b[0], &b[1], &b[2],
                          &b[3], &b[4], &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &g0,
                          &keep, &b[14], &b[15], &b[16], &b[17], &b[18], &b[19], &b[20], &b[21]))
        return NULL;
    Py_ssize_t n = b[0].len, nruns = b[6].len / 8 - 1, nh = b[9].len / 8, nx = b[13].len / 8,
               no = b[17].len / 8, nxo = b[21].len / 8, nsmax = b[14].len / 8;
    int bad = d < 0 || d > 1 || b[1].len != n || b[2].len != n || b[3].len != 4 * n || b[4].len != 4 * n ||
              b[5].len != 8 * n || nruns < 0 || b[7].len != 8 * nruns || b[8].len != 16 * nruns ||
              b[10].len != 8 * nh || b[11].len != 8 * nh || b[12].len != 16 * nruns ||
              b[15].len != b[14].len || b[16].len != b[14].len || b[18].len != 8 * no || b[19].len != 8 * no ||
              b[20].len != 8 * no;
    const int64_t *runs = b[6].buf, *hb = b[8].buf, *eb = b[12].buf;
    const int8_t *dr = b[0].buf;
    const uint8_t *fg = b[1].buf, *hts = b[2].buf;
    Py_ssize_t most_first = 0, most_seen = 0;
    for (Py_ssize_t r = 0; r < nruns && !bad; r++) {
        bad = runs[r] < 0 || runs[r] > runs[r + 1] || runs[r + 1] > n || hb[2 * r] < 0 ||
              hb[2 * r] > hb[2 * r + 1] || hb[2 * r + 1] > nh || eb[2 * r] < 0 || eb[2 * r] > eb[2 * r + 1] ||
              eb[2 * r + 1] > nx;
        if (bad)
            break;
        Py_ssize_t len = runs[r + 1] - runs[r], mf = len + (hb[2 * r + 1] - hb[2 * r]);
        most_first = mf > most_first ? mf : most_first;
        most_seen = len > most_seen ? len : most_seen;
    }
    Py_ssize_t ns = 0, nout = 0, nxn = 0;
    int nomem = 0;
    Keys first = {0}, seen = {0};
    FirstRow *f = NULL;
    if (!bad) {
        nomem = !keys_init(&first, most_first);
        nomem |= !keys_init(&seen, most_seen);
        f = malloc((most_first + 1) * sizeof(FirstRow));
        nomem |= f == NULL;
    }
    if (!bad && !nomem) {
        const uint32_t *tsv = b[3].buf, *tse = b[4].buf;
        const int64_t *t = b[5].buf, *fk = b[7].buf, *hkey = b[9].buf, *hrow = b[10].buf, *ht = b[11].buf,
                      *ekey = b[13].buf;
        double *sms = b[15].buf;
        int64_t *sidx = b[14].buf, *skey = b[16].buf, *orun = b[17].buf, *okey = b[18].buf,
                *orow = b[19].buf, *ot = b[20].buf, *xkey = b[21].buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t r = 0; r < nruns && !bad; r++) {
            Py_ssize_t nf = 0, ec = eb[2 * r];
            keys_reset(&first);
            keys_reset(&seen);
            for (Py_ssize_t j = hb[2 * r]; j < hb[2 * r + 1] && !bad; j++) {
                int was = keys_add(&first, hkey[j], nf);
                nomem = bad = was < 0;
                if (was == 1)
                    f[nf++] = (FirstRow){hkey[j], hrow[j], ht[j]};
            }
            for (Py_ssize_t i = runs[r]; i < runs[r + 1]; i++) {
                int di = dr[i];
                if (di != 0 && di != 1) {
                    bad = 1;
                    break;
                }
                if (!hts[i])
                    continue;
                if (di == d) {
                    int64_t k = fk[r] + (int64_t)tsv[i];
                    int was = keys_add(&first, k, nf);
                    if (was < 0) {
                        nomem = bad = 1;
                        break;
                    }
                    if (was == 1)
                        f[nf++] = (FirstRow){k, g0 + i, t[i]};
                    continue;
                }
                if (!(fg[i] & 0x10))
                    continue;
                int64_t k = fk[r] + (int64_t)tse[i];
                /* rising: above every value echoed so far in this chunk (the usual case) */
                int rising = seen.n == 0 || k > seen.key[seen.n - 1], earlier;
                if (!rising && keys_find(&seen, k) >= 0)
                    continue;
                if (rising) {
                    while (ec < eb[2 * r + 1] && ekey[ec] < k)
                        ec++;
                    earlier = ec < eb[2 * r + 1] && ekey[ec] == k;
                }
                else {
                    Py_ssize_t p = lower_bound(ekey, eb[2 * r], eb[2 * r + 1], k);
                    earlier = p < eb[2 * r + 1] && ekey[p] == k;
                }
                if (keys_add(&seen, k, earlier ? 0 : 1) < 0) {     /* 0: echoed in an earlier chunk */
                    nomem = bad = 1;
                    break;
                }
                if (earlier)
                    continue;
                if (keep) {
                    if (nxn >= nxo) {
                        bad = 1;
                        break;
                    }
                    xkey[nxn++] = k;
                }
                int64_t q = rising ? keys_find_rising(&first, k) : keys_find(&first, k);
                if (q >= 0) {
                    if (ns >= nsmax) {
                        bad = 1;
                        break;
                    }
                    sidx[ns] = i;
                    sms[ns] = (double)(t[i] - f[q].t) / 1e6;
                    skey[ns] = k;
                    ns++;
                }
            }
            for (Py_ssize_t e = 0; keep && !bad && e < nf; e++) {
                if (keys_find(&seen, f[e].key) == 1)
                    continue;
                if (nout >= no) {
                    bad = 1;
                    break;
                }
                orun[nout] = r;
                okey[nout] = f[e].key;
                orow[nout] = f[e].row;
                ot[nout] = f[e].t;
                nout++;
            }
        }
        Py_END_ALLOW_THREADS
    }
    keys_free(&first);
    keys_free(&seen);
    free(f);
    for (int k = 0; k < NB; k++)
        PyBuffer_Release(&b[k]);
    if (nomem)
        return PyErr_NoMemory();
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "stream_tsecho: arrays of different lengths, runs or bounds out of "
                                          "order, a direction other than 0/1 or no room for the kept rows");
        return NULL;
    }
    return Py_BuildValue("nnn", ns, nout, nxn);
}

static PyMethodDef methods[] = {
    {"unwrap", unwrap, METH_VARARGS,
     "unwrap(raw, groups, base, out): 32-bit values unwrapped within contiguous groups (tcp._unwrap)."},
    {"cummax", cummax, METH_VARARGS,
     "cummax(values, groups, valid, out): running maximum within contiguous groups (tcp._grouped_cummax)."},
    {"stream_rows", stream_rows, METH_VARARGS,
     "stream_rows(dr, seq, ack, flags, pay, win, state, runs, rel, rela, end, am0, am1, sm0, sm1, smb, "
     "keepalive, below, dupack): the per-row chain of a time chunk's runs of one flow each (_tcpstream; "
     "see the module source)."},
    {"stream_bins", stream_bins, METH_VARARGS,
     "stream_bins(t, dr, flags, ip_len, pay, win, rela, am0, am1, sm0, sm1, fl, res_ns, flows, packets, bytes, "
     "pay_sum, rw_sum, rw_n, infl_s, infl_c): the per-bin series sums of a time chunk's flows (see the module "
     "source)."},
    {"stream_seqack", stream_seqack, METH_VARARGS,
     "stream_seqack(d, dr, orig, retx, rela, am, end, t, rel, runs, am_carry, nretx, held, h_end, h_row, h_t, h_rel, "
     "h_nr, g0, keep, s_idx, s_ms, s_rel, o_run, o_end, o_row, o_t, o_rel, o_nr): a chunk's sequence/ACK RTT "
     "samples of data direction d (see the module source)."},
    {"stream_tsecho", stream_tsecho, METH_VARARGS,
     "stream_tsecho(d, dr, flags, has_ts, tsval, tsecr, t, runs, fkey, held, h_key, h_row, h_t, echoed, e_key, g0, "
     "keep, s_idx, s_ms, s_key, o_run, o_key, o_row, o_t, x_key): a chunk's timestamp RTT samples of data "
     "direction d (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tcploops",
    "The TCP analysis' per-row loops in C: grouped unwrapping and running maxima, a chunk's per-row chain, "
    "bin sums and RTT matching.", -1, methods,
};

PyMODINIT_FUNC PyInit__tcploops(void)
{
    return PyModule_Create(&module);
}
