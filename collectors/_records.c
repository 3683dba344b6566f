/*
 * airlink.collectors._records: the classic-pcap record walk in C.
 *
 * Locating pcap records is a chain (each record header gives the offset of the next), so
 * it cannot be vectorised directly; collectors/_capture.py screens byte positions with
 * numpy when this module is not built. This is the same walk as
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
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

static inline uint32_t rd32(const unsigned char *p, int little)
{
    return little ? ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24))
                  : ((uint32_t)p[3] | ((uint32_t)p[2] << 8) | ((uint32_t)p[1] << 16) | ((uint32_t)p[0] << 24));
}

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

static PyMethodDef methods[] = {
    {"walk", walk, METH_VARARGS,
     "walk(buf, n, little, ns_per_tick, frac_max, limit, off, cap, orig, ts) -> "
     "(records, stop, status): the pcap record walk (see the module source)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_records",
    "The classic-pcap record walk in C (same checks as CaptureReader._pcap_walk).", -1, methods,
};

PyMODINIT_FUNC PyInit__records(void)
{
    return PyModule_Create(&module);
}
