"""The live cell's step as a C function: :func:`airlink.sim.kernel.run_chunk` for one TTI,
compiled by numba as a ``cfunc`` that the cell's C loop (replay/_cellpath.c) calls.

``live_step(const int64_t *block, int64_t i, int64_t k)`` runs TTI ``k`` (global index)
from row ``i`` of the chunk arrays that ``block`` points to (:func:`airlink.sim.kernel.live_step_block`:
``(address, d0, d1, d2)`` per array of :data:`airlink.sim.kernel.LIVE_STEP_ARRAYS`):

1. ``ip[IP_TTI] = k``;
2. :func:`airlink.sim.kernel.apply_live_backlog` with row ``i`` of ``seen`` (the live queues'
   bytes at the decision);
3. :func:`airlink.sim.kernel.run_chunk` on row ``i`` of every per-TTI array.

It is the simulator's own step (the same compiled function, called with arrays of the same
types as ``airlink simulate`` gives it), so the cell and the simulator decide alike by
construction. It touches no Python object, so the C loop calls it without the GIL.
Importing this module compiles it (or loads it from numba's cache); it needs numba, and
:func:`airlink.sim.kernel.live_step_address` imports it only when ``kernel.COMPILED``.
"""
from __future__ import annotations

import numba
from numba import carray, types
from numba.extending import intrinsic

from .compiled_cache import cached_cfunc
from .kernel import IP_TTI, KERNEL_SOURCES, LIVE_STEP_ARRAYS, apply_live_backlog, run_chunk

_N_BLOCK = 4 * len(LIVE_STEP_ARRAYS)
_NAMES = [entry[0] for entry in LIVE_STEP_ARRAYS]
# the entries the step reads by name (the others go to run_chunk in their order)
_LUT, _IP, _BACKLOG, _INFLIGHT, _SEEN = (_NAMES.index(n) for n in ("lut", "ip", "backlog", "inflight", "seen"))


def _pointer_to(nbtype):
    """An intrinsic that turns an int64 address into a typed pointer (what ``carray`` takes)."""
    @intrinsic
    def cast(typingctx, addr):
        sig = types.CPointer(nbtype)(types.int64)

        def codegen(context, builder, signature, args):
            return builder.inttoptr(args[0], context.get_value_type(signature.return_type))
        return sig, codegen
    return cast


_f4p = _pointer_to(types.float32)
_f8p = _pointer_to(types.float64)
_i8p = _pointer_to(types.int64)
_inline = numba.njit(inline="always")


# one reader per (dtype, dimensions) of block entry j; the per-TTI arrays give row i as an
# array of one row, C-ordered like the simulator's chunks
@_inline
def _f8_1(b, j):
    return carray(_f8p(b[4 * j]), (b[4 * j + 1],))


@_inline
def _i8_1(b, j):
    return carray(_i8p(b[4 * j]), (b[4 * j + 1],))


@_inline
def _f4_1(b, j):
    return carray(_f4p(b[4 * j]), (b[4 * j + 1],))


@_inline
def _f8_2(b, j):
    return carray(_f8p(b[4 * j]), (b[4 * j + 1], b[4 * j + 2]))


@_inline
def _i8_2(b, j):
    return carray(_i8p(b[4 * j]), (b[4 * j + 1], b[4 * j + 2]))


@_inline
def _i8_3(b, j):
    return carray(_i8p(b[4 * j]), (b[4 * j + 1], b[4 * j + 2], b[4 * j + 3]))


@_inline
def _f4_row3(b, j, i):
    n1, n2 = b[4 * j + 2], b[4 * j + 3]
    return carray(_f4p(b[4 * j] + i * n1 * n2 * 4), (1, n1, n2))


@_inline
def _f8_row2(b, j, i):
    n1 = b[4 * j + 2]
    return carray(_f8p(b[4 * j] + i * n1 * 8), (1, n1))


@_inline
def _i8_row2(b, j, i):
    n1 = b[4 * j + 2]
    return carray(_i8p(b[4 * j] + i * n1 * 8), (1, n1))


# numba.cfunc(..., cache=True), the cache fresh only while sim/kernel.py (whose run_chunk
# is compiled into this function) is unchanged: numba would check this file alone
@cached_cfunc(types.void(types.CPointer(types.int64), types.int64, types.int64), KERNEL_SOURCES, nogil=True)
def live_step(block, i, k):
    # entry numbers: the positions in LIVE_STEP_ARRAYS, which follows run_chunk's arguments
    b = carray(block, (_N_BLOCK,))
    ip = _i8_1(b, _IP)
    ip[IP_TTI] = k
    lut = _f8_1(b, _LUT)
    seen = _f8_row2(b, _SEEN, i)
    backlog = _f8_1(b, _BACKLOG)
    inflight = _f8_1(b, _INFLIGHT)
    apply_live_backlog(seen[0], backlog, inflight)
    run_chunk(_f4_row3(b, 0, i), _f4_row3(b, 1, i), _f8_row2(b, 2, i), _f8_row2(b, 3, i), _i8_row2(b, 4, i),
              _i8_2(b, 5), _f4_1(b, 6), _f8_1(b, 7), _f8_1(b, 8), _i8_1(b, 9), lut[0], lut[1], ip, _f8_1(b, 12),
              backlog, inflight, _f8_1(b, 15),
              _f8_2(b, 16), _i8_2(b, 17), _f8_2(b, 18), _i8_2(b, 19), _i8_1(b, 20), _i8_1(b, 21),
              _i8_1(b, 22), _i8_1(b, 23), _f8_1(b, 24), _i8_1(b, 25), _i8_1(b, 26), _i8_1(b, 27), _i8_1(b, 28),
              _i8_1(b, 29), _f8_1(b, 30), _f8_1(b, 31), _i8_2(b, 32), _i8_2(b, 33), _i8_3(b, 34), _f8_1(b, 35),
              _i8_1(b, 36),
              _f8_row2(b, 37, i), _f8_row2(b, 38, i), _i8_row2(b, 39, i), _f8_row2(b, 40, i), _i8_row2(b, 41, i),
              _f8_row2(b, 42, i), _i8_row2(b, 43, i), _i8_row2(b, 44, i), _i8_row2(b, 45, i), _i8_row2(b, 46, i))

