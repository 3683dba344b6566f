/*
 * airlink.collectors._tcploops: the TCP analysis' per-row loops in C, each the compiled twin
 * of a numpy form that stays the readable reference (tests compare them):
 *
 * unwrap(raw, groups, base, out) and cummax(values, groups, valid, out): the per-group
 * loops of collectors/_tcparrays.py's _unwrap and _grouped_cummax (see there), one pass each
 * instead of several whole-array numpy passes; groups are contiguous runs of equal values.
 *
 * stream_rows: the per-row chain of a TCP engine's time chunk (runs of one flow each), and stream_bins: the
 * per-bin series sums of any engine's chunk (collectors/_tcpstream.FlowStream: _rows_numpy,
 * _bin_sums_numpy).
 *
 * episodes: the loss-recovery episodes of a chunk's retransmissions in order
 * (collectors/_tcparrays.py recovery_episodes).
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

/* ---- episodes ------------------------------------------------------------------------ */

/* The loss-recovery episodes of a chunk's retransmissions, in order (collectors/_tcparrays.py
 * recovery_episodes, whose loop is the readable reference): per row i of n, its direction
 * dr int8 (0/1), flow fl int64, asked/again uint8, the reverse direction's ACK ack (int64),
 * at_ack uint8, its own snd_max snd, its row number row, the row undoing a timeout it opens
 * undo and its waiting verdict's key pend (int64); per direction d and flow, the episode's kind (int8: 0 none,
 * 1 fast, 2 timeout), limit, undoing row and waiting key (int64), read and updated in
 * place; fast uint8[n] is set for the fast rows. */
#define EP_NONE 0
#define EP_FAST 1
#define EP_TIMEOUT 2

static PyObject *episodes(PyObject *self, PyObject *args)
{
    enum { NB = 19 };
    Py_buffer b[NB];
    memset(b, 0, sizeof(b));
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*y*y*w*w*w*w*w*w*w*w*w*", &b[0], &b[1], &b[2], &b[3], &b[4],
                          &b[5], &b[6], &b[7], &b[8], &b[9], &b[10], &b[11], &b[12], &b[13], &b[14], &b[15],
                          &b[16], &b[17], &b[18]))
        return NULL;
    Py_ssize_t n = b[0].len, nf = b[10].len;
    int bad = b[1].len != 8 * n || b[2].len != n || b[3].len != n || b[4].len != 8 * n || b[5].len != n
              || b[6].len != 8 * n || b[7].len != 8 * n || b[8].len != 8 * n || b[9].len != 8 * n
              || b[14].len != nf || b[18].len != n;
    for (int d = 0; d < 2 && !bad; d++)
        bad = b[11 + 4 * d].len != 8 * nf || b[12 + 4 * d].len != 8 * nf || b[13 + 4 * d].len != 8 * nf;
    if (!bad) {
        const int8_t *dr = b[0].buf;
        const int64_t *fl = b[1].buf, *ack = b[4].buf, *snd = b[6].buf, *row = b[7].buf, *undo = b[8].buf,
                      *pend = b[9].buf;
        const unsigned char *ask = b[2].buf, *rep = b[3].buf, *at_ack = b[5].buf;
        int8_t *kind[2] = {b[10].buf, b[14].buf};
        int64_t *lim[2] = {b[11].buf, b[15].buf}, *und[2] = {b[12].buf, b[16].buf}, *pen[2] = {b[13].buf, b[17].buf};
        unsigned char *fast = b[18].buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < n && !bad; i++) {
            int d = dr[i];
            int64_t f = fl[i];
            if (d < 0 || d > 1 || f < 0 || f >= nf) {
                bad = 1;
                break;
            }
            int k = kind[d][f];
            if (k != EP_NONE && (ack[i] >= lim[d][f] || (k == EP_TIMEOUT && und[d][f] < row[i])))
                k = kind[d][f] = EP_NONE;
            fast[i] = 0;
            if (rep[i]) {
                kind[d][f] = EP_TIMEOUT, lim[d][f] = snd[i], und[d][f] = undo[i], pen[d][f] = pend[i];
            } else if (k == EP_FAST) {
                fast[i] = 1;
                if (ask[i])
                    lim[d][f] = snd[i];
            } else if (k == EP_NONE) {
                if (ask[i]) {
                    fast[i] = 1;
                    kind[d][f] = EP_FAST, lim[d][f] = snd[i], und[d][f] = INT64_MAX, pen[d][f] = -1;
                } else if (at_ack[i]) {
                    kind[d][f] = EP_TIMEOUT, lim[d][f] = snd[i], und[d][f] = undo[i], pen[d][f] = pend[i];
                }
            }
        }
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < NB; k++)
        PyBuffer_Release(&b[k]);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "episodes: arrays of different lengths, a flow outside the carry or a "
                                          "direction other than 0/1");
        return NULL;
    }
    Py_RETURN_NONE;
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
    {"episodes", episodes, METH_VARARGS,
     "episodes(dr, fl, asked, again, ack, at_ack, snd, row, undo, pend, kind0, lim0, undone0, pend0, kind1, lim1, "
     "undone1, pend1, fast): the loss-recovery episodes of a chunk's retransmissions (_tcparrays.recovery_episodes)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_tcploops",
    "The TCP analysis' per-row loops in C: grouped unwrapping and running maxima, a chunk's per-row chain, "
    "a chunk's bin sums, its retransmissions' recovery episodes.", -1, methods,
};

PyMODINIT_FUNC PyInit__tcploops(void)
{
    return PyModule_Create(&module);
}
