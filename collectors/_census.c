/*
 * census_add: the per-packet part of collectors/_tcpinput._Census.add in one pass (included
 * by _records.c; the numpy version there is the twin for builds without the extension, and a
 * test compares both). For each packet of a batch, in file order (IP-packet index ipidx0 + i):
 *
 *   counts[flow] += 1; pk[side] += 1; by[side] += ip_len      side = 2 * flow + swap
 *
 * and eight trackers keep, per flow or side, the (time, index, value) of the least
 * ("first") or greatest ("last") (time, index) among the packets they take:
 *
 *   first, last      (per flow)  every packet, value swap
 *   syn              (per flow)  pure SYNs (flags & 0x12 == 0x02), value swap
 *   side_first       (per side)  every packet, value seq
 *   side_syn         (per side)  SYNs (flags & 0x02), value seq
 *   side_ack         (per side)  ACKs without SYN (flags & 0x12 == 0x10), value time
 *   side_ws, side_mss (per side, last)  SYNs announcing a window scale (wscale >= 0) / an
 *                                        MSS (mss > 0), value wscale / mss
 *
 *   census_add(pfl, swap, ts, flags, seq, ip_len, wscale, mss, ipidx0, counts, pk, by, kept)
 *
 * pfl int32[m], swap bool[m], ts int64[m], flags uint8[m], seq uint32[m], ip_len uint32[m],
 * wscale int8[m], mss uint16[m]; counts int64[F], pk int64[2F], by float64[2F]; kept: a
 * tuple of 24 int64 buffers, (time, index, value) for each tracker in the order above, of F
 * items (per flow) or 2F (per side). Flow numbers must be < F (else ValueError).
 */
enum { T_FIRST, T_LAST, T_SYN, T_SIDE_FIRST, T_SIDE_SYN, T_SIDE_ACK, T_SIDE_WS, T_SIDE_MSS, N_TRACKED };

static inline void keep_row(int64_t *kt, int64_t *ki, int64_t *kv, int64_t k, int64_t t, int64_t idx,
                            int64_t value, int last)
{
    int better = last ? (t > kt[k] || (t == kt[k] && idx > ki[k]))
                      : (t < kt[k] || (t == kt[k] && idx < ki[k]));
    if (better) {
        kt[k] = t;
        ki[k] = idx;
        kv[k] = value;
    }
}

static PyObject *census_add(PyObject *self, PyObject *args)
{
    Py_buffer in[8], out[3], kept[3 * N_TRACKED];
    long long ipidx0;
    PyObject *kept_tuple;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*y*Lw*w*w*O!", &in[0], &in[1], &in[2], &in[3], &in[4],
                          &in[5], &in[6], &in[7], &ipidx0, &out[0], &out[1], &out[2], &PyTuple_Type,
                          &kept_tuple))
        return NULL;
    int nkept = 0, bad = PyTuple_GET_SIZE(kept_tuple) != 3 * N_TRACKED;
    for (; !bad && nkept < 3 * N_TRACKED; nkept++)
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(kept_tuple, nkept), &kept[nkept],
                               PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
            bad = 1;
            break;
        }
    Py_ssize_t m = in[0].len / 4, nf = out[0].len / 8;
    static const int width[8] = {4, 1, 8, 1, 4, 4, 1, 2};
    for (int k = 0; k < 8 && !bad; k++)
        bad = in[k].len != m * width[k];
    bad = bad || out[1].len != 16 * nf || out[2].len != 16 * nf;
    for (int k = 0; k < 3 * N_TRACKED && !bad; k++) {
        int per_side = k / 3 >= T_SIDE_FIRST;
        bad = kept[k].len != 8 * nf * (per_side ? 2 : 1);
    }
    if (!bad) {
        const int32_t *pfl = in[0].buf;
        const uint8_t *swap = in[1].buf, *flags = in[3].buf;
        const int64_t *ts = in[2].buf;
        const uint32_t *seq = in[4].buf, *ip_len = in[5].buf;
        const int8_t *wscale = in[6].buf;
        const uint16_t *mss = in[7].buf;
        int64_t *counts = out[0].buf, *pk = out[1].buf;
        double *by = out[2].buf;
        int64_t *kt[N_TRACKED], *ki[N_TRACKED], *kv[N_TRACKED];
        for (int k = 0; k < N_TRACKED; k++) {
            kt[k] = kept[3 * k].buf;
            ki[k] = kept[3 * k + 1].buf;
            kv[k] = kept[3 * k + 2].buf;
        }
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t i = 0; i < m; i++) {
            int64_t f = pfl[i];
            if (f < 0 || f >= nf) {
                bad = 1;
                break;
            }
            int64_t s = swap[i] ? 1 : 0, side = 2 * f + s, t = ts[i], idx = ipidx0 + i;
            uint8_t fl = flags[i];
            counts[f] += 1;
            pk[side] += 1;
            by[side] += (double)ip_len[i];
            keep_row(kt[T_FIRST], ki[T_FIRST], kv[T_FIRST], f, t, idx, s, 0);
            keep_row(kt[T_LAST], ki[T_LAST], kv[T_LAST], f, t, idx, s, 1);
            keep_row(kt[T_SIDE_FIRST], ki[T_SIDE_FIRST], kv[T_SIDE_FIRST], side, t, idx, seq[i], 0);
            if ((fl & 0x12) == 0x02)
                keep_row(kt[T_SYN], ki[T_SYN], kv[T_SYN], f, t, idx, s, 0);
            if ((fl & 0x12) == 0x10)
                keep_row(kt[T_SIDE_ACK], ki[T_SIDE_ACK], kv[T_SIDE_ACK], side, t, idx, t, 0);
            if (fl & 0x02) {
                keep_row(kt[T_SIDE_SYN], ki[T_SIDE_SYN], kv[T_SIDE_SYN], side, t, idx, seq[i], 0);
                if (wscale[i] >= 0)
                    keep_row(kt[T_SIDE_WS], ki[T_SIDE_WS], kv[T_SIDE_WS], side, t, idx, wscale[i], 1);
                if (mss[i] > 0)
                    keep_row(kt[T_SIDE_MSS], ki[T_SIDE_MSS], kv[T_SIDE_MSS], side, t, idx, mss[i], 1);
            }
        }
        Py_END_ALLOW_THREADS
    }
    for (int k = 0; k < 8; k++)
        PyBuffer_Release(&in[k]);
    for (int k = 0; k < 3; k++)
        PyBuffer_Release(&out[k]);
    for (int k = 0; k < nkept; k++)
        PyBuffer_Release(&kept[k]);
    if (bad) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "census_add: arrays of other lengths or a flow number "
                                              "beyond the arrays");
        return NULL;
    }
    Py_RETURN_NONE;
}
