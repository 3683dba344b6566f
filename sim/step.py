"""The simulator's per-TTI step, shared by ``airlink simulate`` and the live cell shell.

:class:`Radio` holds everything a cell carries from one TTI to the next - the channel
(with its CSI delay line), the random streams of block errors and tie-breaking, the
scheduler's state (PF averages, round-robin pointer, backlog-driven channel grants), the
HARQ queues and the link-adaptation state - and :meth:`Radio.step` runs TTIs through the
one compiled loop (:func:`airlink.sim.kernel.run_chunk`). The simulator steps a whole chunk
at a time; the cell shell steps one TTI at a time with the *live* queue backlogs
(``backlog=``). Both go through :meth:`Radio.step`, so their decisions are the same by
construction: a UE whose live queue is empty is skipped exactly as the simulator skips a
user without data.

Inputs that do not depend on the queues (channel, reported SINR after the CSI delay,
arrivals, block-error and tie-breaking draws) are produced chunk by chunk by
:meth:`Radio.inputs`, which must be called for consecutive chunks; the chunk size
(``chunk_elements / (users x subchannels)`` TTIs, at most the run) is the same for both
users of the class, so both see the same numbers.

Usage (what the cell shell does)::

    radio = Radio(cfg, scheduler, live=True)       # cfg from resolve_config()
    inp = radio.inputs(0, radio.chunk)
    out = radio.new_outputs(radio.chunk)
    radio.step(inp, 0, 1, out, backlog=queue_bytes)    # TTI 0 with live backlogs (bytes)
    out["served"][0]                                   # bytes delivered per UE in TTI 0
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from airlink.traces import parse_duration, parse_tti
from airlink.core.errors import AirlinkError

from . import kernel as K
from .channel import ChannelModel, measured_snr_db, snr_from_geometry
from .block_errors import error_thresholds
from .config import LINK_ADAPTATION_MODES
from .nr_harq import inverse_gap
from .nr_rates import nr_rate_table_of
from .rates import rate_table
from .sched_backlog import BacklogScheduler
from .sched_base import Context
from .traffic import Traffic

if TYPE_CHECKING:
    import pandas as pd

#: per-TTI outputs of :meth:`Radio.step` (arrays (n, users)); the integer ones are counts
OUTPUTS = ("served", "tx", "nsub", "mcs", "retx", "backlog", "drops", "blocks", "active", "gaveup")
_INT_OUTPUTS = {"nsub", "retx", "drops", "blocks", "active", "gaveup"}

#: columns of the ``mac`` frame (after ``time`` and ``user``), simulated or live
MAC_COLUMNS = ("subchannels", "mcs", "sinr_db", "sinr_reported_db", "served_bytes", "capacity_bytes",
               "tx_bytes", "harq_retransmissions", "backlog_bytes", "backlog_packets",
               "assigned_rate_bps", "arrivals_bytes", "drops_packets")

#: link adaptation name -> the kernel's mode id
LINK_ADAPTATION = {name: i for i, name in enumerate(LINK_ADAPTATION_MODES)}


@dataclass
class ChunkInputs:
    """What the TTIs ``k0 .. k0+n-1`` need besides the queues.

    real, rep : float32 (n, U, C) linear SINR, real and as reported (``csi_delay_tti`` old)
    arrivals : float64 (n, U) bytes arriving (zeros in a live cell: the queues are real)
    u_err : float64 (n, slots) block-error thresholds ``z`` (a block fails when
        ``SINR < s50_m * z``); perm : int64 (n, U) the tie-breaking order of each TTI
    sinr_db, sinr_rep_db : float32 (n, U) wideband means in dB (for the MAC log)
    """

    k0: int
    n: int
    real: np.ndarray
    rep: np.ndarray
    arrivals: np.ndarray
    u_err: np.ndarray
    perm: np.ndarray
    sinr_db: np.ndarray
    sinr_rep_db: np.ndarray


def parse_cfg_tti(value) -> Fraction:
    """The TTI of a configuration as an exact Fraction of seconds."""
    return value if isinstance(value, Fraction) else parse_tti(str(value))


class Radio:
    """A cell's radio and scheduler between TTIs (see the module docstring).

    Parameters
    ----------
    cfg : dict
        Full parameter set (:func:`airlink.sim.resolve_config`) with ``seed``.
    scheduler : scheduler object (:func:`airlink.sim.engine.make_scheduler`)
    n_users, n_subchannels : validated sizes
    n_tti : number of TTIs of the run (sets the chunk size and a measured channel's length)
    live : bool
        The queues are real and given to :meth:`step` as ``backlog``: no traffic model,
        no full-buffer users, no drops by the simulator (the live queues drop).
    max_chunk : int, optional
        At most this many TTIs per chunk (a live cell without an end). Chunk boundaries
        change the channel only by float32 rounding (~1e-6), which can in rare cases flip an
        MCS at a threshold: for bit-identical decisions use the simulator's chunks (None).
    """

    def __init__(self, cfg: dict, scheduler, *, n_users: int, n_subchannels: int, n_tti: int,
                 live: bool = False, max_chunk: int | None = None):
        n_u, n_c = n_users, n_subchannels
        self.cfg, self.scheduler, self.live = cfg, scheduler, live
        self.n_users, self.n_subchannels, self.n_tti = n_u, n_c, n_tti
        self.tti = parse_cfg_tti(cfg["tti"])
        tti_s = self.tti_s = float(self.tti)
        seed = int(cfg["seed"])
        if cfg["rate_table"] == "nr":
            table = nr_rate_table_of(cfg, self.tti)
            if cfg["bler_slope"] is not None or cfg["bler_target"] is not None:
                table = table.with_bler(slope=cfg["bler_slope"], bler_target=cfg["bler_target"])
        else:
            table = rate_table(cfg["rate_table"], bandwidth_hz=cfg["bandwidth_hz"],
                               slope=cfg["bler_slope"], bler_target=cfg["bler_target"])
        self.table = table
        per_sub = cfg["table_rates"] == "subchannel"
        self.bytes_per_mcs = table.rate_bps / (1 if per_sub else n_c) * tti_s / 8 * float(cfg["payload_fraction"])
        snr_series = None
        if cfg["channel_trace"] is not None:
            import pandas as pd
            frame = cfg["channel_trace"]
            if not isinstance(frame, pd.DataFrame):
                frame = _read_frame(frame)
            s = measured_snr_db(frame, n_tti, tti_s, column=cfg["channel_column"],
                                method=cfg["channel_resample"])
            snr_series = np.repeat(s[:, None], n_u, axis=1) + _offsets(cfg, n_u)[None, :]
        self.channel = ChannelModel(
            n_users=n_u, n_subchannels=n_c, tti_s=tti_s, snr_db=_snr_db(cfg, n_u),
            profile=_per_user_list(cfg["profile"], n_u), speed_kmh=_per_user_list(cfg["speed_kmh"], n_u),
            carrier_hz=float(cfg["carrier_hz"]), subchannel_hz=float(cfg["subchannel_hz"]),
            shadowing_std_db=float(cfg["shadowing_std_db"]), shadowing_corr_m=float(cfg["shadowing_corr_m"]),
            seed=seed, n_osc=int(cfg["n_oscillators"]), snr_series_db=snr_series)
        self.traffic = Traffic(_per_user_list(cfg["traffic"], n_u), n_users=n_u, tti_s=tti_s,
                               rate_bps=_per_user_list(cfg["traffic_rate_bps"], n_u),
                               packet_bytes=_per_user_list(cfg["packet_bytes"], n_u), on_s=cfg["on_s"],
                               off_s=cfg["off_s"], exponential=cfg["onoff_exponential"],
                               trace=cfg["traffic_trace"], seed=seed)
        self._rng = np.random.default_rng([seed, 0x5C4E])          # block errors
        self._rng_ties = np.random.default_rng([seed, 0x71E5])     # tie-breaking order
        scheduler.reset(n_users=n_u, n_subchannels=n_c, tti_s=tti_s, rng=np.random.default_rng([seed, 0x05C1]))
        kid = getattr(scheduler, "kernel_id", None)
        kp = scheduler.kernel_params() if kid is not None else {}
        self.sched_id = kid if kid is not None else 5

        # link adaptation lookup: best expected-throughput scheme per 0.1 dB
        self.lut_lo, self.lut_step = -40.0, 0.1
        self.best_lut = table.best(np.arange(self.lut_lo, 70.0, self.lut_step)).astype(np.int64)
        la_mode = LINK_ADAPTATION[cfg["link_adaptation"]]
        self.pkt = pkt = self.traffic.packet.astype(np.float64)          # per user
        buf = 0 if live else int(cfg["buffer_packets"] or 0)
        self.full = full = np.zeros(n_u, bool) if live else self.traffic.full_mask
        bl_interval = max(1, int(round(float(kp.get("interval_s", 0.1)) / tti_s)))
        self.ip = ip = np.zeros(K.N_IP, np.int64)
        ip[K.IP_SCHED] = self.sched_id
        ip[K.IP_MAX_TX] = int(cfg["harq_max_tx"])
        ip[K.IP_HARQ_PRIORITY] = int(bool(cfg["harq_priority"]))
        ip[K.IP_BUFFER_PACKETS] = buf
        ip[K.IP_LA_MODE] = la_mode
        ip[K.IP_LA_INTERVAL] = int(cfg["la_interval"])
        ip[K.IP_BL_INTERVAL] = bl_interval
        ip[K.IP_GREEDY_TTI] = int(round(float(kp.get("greedy_s", 0)) / tti_s))
        ip[K.IP_PF_WINDOW] = int(kp.get("pf_window", 0))
        ip[K.IP_SECTOR_CHANNELS] = int(cfg["backlog_sector_channels"])
        ip[K.IP_GREEDY_CHANNELS] = int(kp.get("greedy_channels", 0))
        ip[K.IP_HARQ_FEEDBACK] = int(cfg["harq_feedback_tti"])
        ip[K.IP_HARQ_PROCESSES] = n_proc = int(cfg["harq_processes"])
        self.fp = fp = np.zeros(K.N_FP, np.float64)
        fp[K.FP_PF_A] = float(kp.get("pf_a", cfg["pf_a"]))
        fp[K.FP_LAMBDA] = float(kp.get("lam", cfg["lam"]))
        fp[K.FP_CHANNEL_BYTES] = float(cfg["backlog_channel_bps"]) * tti_s / 8
        fp[K.FP_DRAIN_TTI] = float(kp.get("drain_s", 0.5)) / tti_s
        fp[K.FP_GREEDY_BYTES] = float(kp.get("greedy_bytes", 0))
        fp[K.FP_LA_BLER_UP] = float(cfg["la_bler_up"])
        fp[K.FP_LA_BLER_DOWN] = float(cfg["la_bler_down"])
        fp[K.FP_LA_HYBRID_DB] = float(cfg["la_hybrid_db"])
        fp[K.FP_OLLA_STEP_DB] = float(cfg["la_olla_step_db"])
        fp[K.FP_OLLA_MAX_DB] = float(cfg["la_olla_max_db"])
        fp[K.FP_BLER_TARGET] = table.bler_target
        fp[K.FP_HARQ_INV_GAP] = inverse_gap(cfg["harq_combining"])
        ring = int(cfg["harq_ring"])
        self.state = dict(
            backlog=np.zeros(n_u), inflight=np.zeros(n_u), avg_thr=np.zeros(n_u),
            pend_bytes=np.zeros((n_u, ring)), pend_mcs=np.zeros((n_u, ring), np.int64),
            pend_acc=np.zeros((n_u, ring)), pend_tx=np.zeros((n_u, ring), np.int64),
            pend_head=np.zeros(n_u, np.int64), pend_count=np.zeros(n_u, np.int64),
            misc=np.zeros(4, np.int64), user_mcs=np.full(n_u, len(table) // 2, np.int64),
            la_ci_sum=np.zeros(n_u), la_err=np.zeros(n_u, np.int64), la_blocks=np.zeros(n_u, np.int64),
            assigned_ch=np.zeros(n_u, np.int64), greedy_cnt=np.zeros(n_u, np.int64),
            full_u=full.astype(np.int64), pkt_u=pkt, olla_db=np.zeros(n_u),
            pend_ready=np.zeros((n_u, ring), np.int64), pend_proc=np.zeros((n_u, ring), np.int64),
            proc_state=np.zeros((n_u, 2, max(n_proc, 1)), np.int64))
        self.bl_thr = np.asarray(kp.get("bl_thr_db", [0.0]), dtype=np.float64)
        self.bl_ch = np.asarray(kp.get("bl_channels", [1]), dtype=np.int64)
        # float32 like the SINR, so that every path compares the same numbers
        self.thr_lin = (10 ** (table.threshold_db.astype(np.float64) / 10)).astype(np.float32)
        self.s50 = 10 ** (table.s50_db.astype(np.float64) / 10)
        self.beta = table.slope * 10 / np.log(10)
        self.csi_delay = int(cfg["csi_delay_tti"])
        self.chunk = max(1, min(n_tti, int(cfg["chunk_elements"]) // (n_u * n_c), max_chunk or n_tti))
        self.n_slots = max(n_c, n_u)
        #: resources per TTI for the summary: code channels (backlog scheduler) or subchannels
        self.n_resources = int(cfg["backlog_sector_channels"]) if isinstance(scheduler, BacklogScheduler) else n_c
        self._hist = self._hist_db = None      # the CSI delay lines (see inputs)
        self._next_k0 = 0
        self._dummy_forced = np.zeros((1, 1), np.int64)
        self._lut = np.array([self.lut_lo, self.lut_step])     # the live step's lut_lo, lut_step

    # -- inputs -------------------------------------------------------------------------------
    def inputs(self, k0: int, n: int, *, mac_log: bool = True, line: np.ndarray | None = None) -> ChunkInputs:
        """Channel, arrivals and random draws of TTIs ``k0 .. k0+n-1`` (chunks in order).

        ``line``: memory for the channel (float32, C-ordered, at least ``csi_delay_tti + n``
        rows of (users, subchannels), e.g. shared memory): the reported SINR is its first
        ``n`` rows and the real SINR its last ``n`` (:attr:`ChunkInputs.rep` and ``real`` are
        views of it); by default an array of its own. The values are the same either way."""
        if k0 != self._next_k0:
            raise AirlinkError(f"radio inputs must come in order: expected TTI {self._next_k0}, got {k0}")
        self._next_k0 = k0 + n
        n_u = self.n_users
        d = self.csi_delay
        if d > 0:
            # the delay line: the last d TTIs of the previous chunk (TTI 0 repeated before the
            # first), then this chunk's channel, in one fresh array (or the caller's); rep and
            # real are its first and last n rows (no copy of the chunk, and every chunk's
            # arrays stay its own)
            line = np.empty((d + n, n_u, self.n_subchannels), np.float32) if line is None else line[:d + n]
            real = self.channel.sinr_chunk(k0, n, out=line[d:])
            line[:d] = real[0] if self._hist is None else self._hist
            rep = line[:n]
            self._hist = line[n:].copy()
        else:
            real = rep = self.channel.sinr_chunk(k0, n, out=None if line is None else line[:n])
        arr = np.zeros((n, n_u)) if self.live else self.traffic.chunk(k0, n)
        u_err, perm = self.draws(n)
        if mac_log:
            sinr_db, sinr_rep_db = self._wideband_db(real, rep, k0, n)
        else:
            sinr_db = sinr_rep_db = np.zeros((0, n_u), np.float32)
            self._hist_db = None
        return ChunkInputs(k0, n, real, rep, arr, u_err, perm, sinr_db, sinr_rep_db)

    def _wideband_db(self, real, rep, k0: int, n: int):
        """``10 log10`` of the mean linear SINR over the subchannels (float32 (n, U)), real
        and reported. The reported one is the real one delayed by ``csi_delay_tti`` (the
        same rows give the same means), through a line of the last ``d`` values like the
        SINR's; computed from ``rep`` when the previous chunk kept no line (no MAC log)."""
        d = self.csi_delay
        sinr_db = _wideband_db(real)
        if d == 0:
            return sinr_db, sinr_db.copy()
        if k0 > 0 and self._hist_db is None:
            self._hist_db = _wideband_db(self._hist)
            return sinr_db, _wideband_db(rep)
        head = np.repeat(sinr_db[:1], d, axis=0) if k0 == 0 else self._hist_db
        line = np.concatenate([head, sinr_db])
        self._hist_db = line[n:].copy()
        return sinr_db, line[:n]

    def draws(self, n: int) -> tuple:
        """``(u_err, perm)`` of the next ``n`` TTIs: block-error thresholds (float64 (n,
        slots): :func:`airlink.sim.block_errors.error_thresholds`) and tie-breaking orders
        (int64 (n, users)), as :class:`ChunkInputs` holds them."""
        u_err = error_thresholds(self._rng.random((n, self.n_slots)), 1 / self.beta)
        perm = self._rng_ties.permuted(np.tile(np.arange(self.n_users, dtype=np.int64), (n, 1)), axis=1)
        return u_err, perm

    def new_outputs(self, rows: int) -> dict:
        """Zeroed per-TTI output arrays (see :data:`OUTPUTS`) with ``rows`` rows."""
        return {n: np.zeros((rows, self.n_users), np.int64 if n in _INT_OUTPUTS else np.float64)
                for n in OUTPUTS}

    # -- the step -----------------------------------------------------------------------------
    def step(self, inp: ChunkInputs, i0: int, i1: int, out: dict, *, backlog=None) -> None:
        """Run TTIs ``inp.k0 + i0 .. inp.k0 + i1 - 1``, adding their results to the rows
        ``0 .. i1 - i0 - 1`` of ``out`` (arrays from :meth:`new_outputs`, zeroed).

        ``backlog`` (live cells, one TTI at a time): bytes queued per UE at the start of
        the TTI, which replace the simulator's own queue; bytes of blocks waiting for a
        HARQ retransmission are part of it (they leave a queue only once delivered).
        """
        st = self.state
        if backlog is not None:
            if i1 - i0 != 1:
                raise AirlinkError("live backlogs are given one TTI at a time")
            K.apply_live_backlog(np.ascontiguousarray(backlog, dtype=np.float64), st["backlog"], st["inflight"])
        s = slice(i0, i1)
        self.ip[K.IP_TTI] = inp.k0 + i0
        args = (self.thr_lin, self.bytes_per_mcs, self.s50, self.best_lut, self.lut_lo, self.lut_step,
                self.ip, self.fp, *self._state_arrays())
        if self.sched_id != 5:
            K.run_chunk(inp.rep[s], inp.real[s], inp.arrivals[s], inp.u_err[s], inp.perm[s],
                        self._dummy_forced, *args, *(out[n][:i1 - i0] for n in OUTPUTS))
            return
        # a scheduler given as a Python object: its assignment, TTI by TTI (kernel mode 5)
        sched = self.scheduler
        n_u = self.n_users
        rate_of = np.concatenate([[0.0], self.bytes_per_mcs])
        for k in range(i0, i1):
            rate = rate_of[np.searchsorted(self.thr_lin, inp.rep[k], side="right")]
            qb = np.where(self.full, np.inf, st["backlog"] + inp.arrivals[k])
            eligible = (qb - st["inflight"] > 1e-9) | (st["pend_count"] > 0)
            ctx = Context(tti=inp.k0 + k, rate_bytes=rate, eligible=eligible, backlog_bytes=qb,
                          pending_retx=st["pend_count"].copy(), order=inp.perm[k].copy())
            assign = np.asarray(sched.assign(ctx), dtype=np.int64).reshape(1, -1)
            if assign.shape[1] != inp.rep.shape[2] or assign.max(initial=-1) >= n_u or assign.min(initial=0) < -1:
                raise AirlinkError(f"scheduler {getattr(sched, 'name', None) or type(sched).__name__!r} "
                                   f"returned an invalid assignment (need {inp.rep.shape[2]} user indices "
                                   f"in -1..{n_u - 1}, got {assign.ravel()[:8]})")
            self.ip[K.IP_TTI] = inp.k0 + k
            t = slice(k, k + 1)
            r = k - i0
            K.run_chunk(inp.rep[t], inp.real[t], inp.arrivals[t], inp.u_err[t], inp.perm[t], assign, *args,
                        *(out[n][r:r + 1] for n in OUTPUTS))
            sched.update(out["tx"][r] * 8.0)

    def _state_arrays(self) -> tuple:
        """What the kernel carries from TTI to TTI, in :func:`~airlink.sim.kernel.run_chunk`'s order."""
        st = self.state
        return (st["backlog"], st["inflight"], st["avg_thr"], st["pend_bytes"], st["pend_mcs"], st["pend_acc"],
                st["pend_tx"], st["pend_head"], st["pend_count"], st["misc"], st["user_mcs"], st["la_ci_sum"],
                st["la_err"], st["la_blocks"], st["assigned_ch"], st["greedy_cnt"], st["full_u"], st["pkt_u"],
                st["olla_db"], st["pend_ready"], st["pend_proc"], st["proc_state"], self.bl_thr, self.bl_ch)

    @property
    def compiled_live_step(self) -> bool:
        """Whether :meth:`live_step` can be used: numba compiled the kernel and the scheduler
        is one of the kernel's own (a scheduler class runs TTI by TTI in :meth:`step`)."""
        return K.COMPILED and self.sched_id != 5

    def live_step(self, inp: ChunkInputs, out: dict, seen: np.ndarray):
        """``(address, block)`` of the compiled live step (:func:`airlink.sim.kernel.live_step_address`)
        for the chunk ``inp`` with outputs ``out`` (:meth:`new_outputs`-like, ``inp.n`` rows)
        and ``seen`` (float64 (n, users)): row ``i`` holds the live backlogs (bytes) that TTI
        ``inp.k0 + i`` is decided with. Calling ``step(block, i, inp.k0 + i)`` does what
        ``step(inp, i, i + 1, rows i of out, backlog=seen[i])`` does. ``block`` refers to the
        arrays: keep them (and it) alive while it is used. Besides the given arrays it points
        only to the radio's own, which stay where they are for the radio's life: a block
        stays valid for later chunks given in the same memory (the cell's radio slots)."""
        if not self.compiled_live_step:
            raise AirlinkError("the live step is compiled only for the kernel's own schedulers, with numba")
        lut = self._lut
        arrays = (inp.rep, inp.real, inp.arrivals, inp.u_err, inp.perm, self._dummy_forced, self.thr_lin,
                  self.bytes_per_mcs, self.s50, self.best_lut, lut, self.ip, self.fp, *self._state_arrays(),
                  *(out[n] for n in OUTPUTS), seen)
        return K.live_step_address(), K.live_step_block(arrays)

    # -- the MAC log ------------------------------------------------------------------------------
    def mac_columns(self, out: dict, sinr_db, sinr_rep_db, arrivals, *, start_ns: int = 0,
                    k0: int = 0) -> dict:
        """The ``mac`` columns of ``len(out['served'])`` TTIs from TTI ``k0`` as numpy arrays,
        one row per TTI and user (users ``"1"`` .. ``"N"``); ``time`` = TTI start in integer
        UTC nanoseconds (``start_ns`` + k x TTI).

        ``assigned_rate_bps`` = bits sent in the TTI / TTI length, or for the backlog-driven
        scheduler, code channels held x the channel rate; ``backlog_packets`` =
        ``ceil(backlog_bytes / packet_bytes)``; ``mcs`` = mean 1-based MCS of the blocks sent.
        """
        n_u = self.n_users
        n = out["served"].shape[0]
        users = [str(i + 1) for i in range(n_u)]
        ns = self.tti * 10**9
        k = np.arange(k0, k0 + n, dtype=np.int64)
        t = int(start_ns) + (k * ns.numerator) // ns.denominator
        blocks = out["blocks"]
        with np.errstate(invalid="ignore", divide="ignore"):
            mcs = np.where(blocks > 0, out["mcs"] / np.maximum(blocks, 1), 0.0)
        if self.scheduler.__class__ is BacklogScheduler:
            assigned = out["nsub"] * float(self.cfg["backlog_channel_bps"])
        else:
            assigned = out["tx"] * 8 / self.tti_s
        backlog = out["backlog"]
        return {
            "time": np.repeat(t, n_u),
            "user": np.tile(np.array(users, dtype=object), n),
            "subchannels": out["nsub"].ravel(),
            "mcs": mcs.ravel(),
            "sinr_db": np.asarray(sinr_db).astype(np.float64).ravel(),
            "sinr_reported_db": np.asarray(sinr_rep_db).astype(np.float64).ravel(),
            "served_bytes": out["served"].ravel(),
            "capacity_bytes": out["served"].ravel(),
            "tx_bytes": out["tx"].ravel(),
            "harq_retransmissions": out["retx"].ravel(),
            "backlog_bytes": backlog.ravel(),
            "backlog_packets": np.ceil(backlog / self.pkt[None, :] - 1e-9).astype(np.int64).ravel(),
            "assigned_rate_bps": assigned.ravel().astype(np.float64),
            "arrivals_bytes": np.asarray(arrivals).ravel(),
            "drops_packets": out["drops"].ravel(),
        }

    def mac_frame(self, out: dict, sinr_db, sinr_rep_db, arrivals, *, start_ns: int = 0,
                  k0: int = 0) -> "pd.DataFrame":
        """:meth:`mac_columns` as a frame of kind ``mac`` (``time`` as UTC datetimes,
        :meth:`airlink.sim.result.MacColumns.frame`). Its columns are not copied: they may be
        views of ``out``'s arrays, which the caller leaves to the frame."""
        from .result import MacColumns
        return MacColumns(self.mac_columns(out, sinr_db, sinr_rep_db, arrivals, start_ns=start_ns,
                                           k0=k0), [str(i + 1) for i in range(self.n_users)]).frame()


def _wideband_db(sinr) -> np.ndarray:
    """``10 log10`` of the mean over the last axis of linear SINR values, float32."""
    with np.errstate(divide="ignore"):
        return (10 * np.log10(sinr.mean(axis=2))).astype(np.float32)


def n_tti_of(cfg: dict) -> int:
    """TTIs in ``cfg['duration']`` (an error when not even one fits)."""
    tti = parse_cfg_tti(cfg["tti"])
    duration = parse_duration(cfg["duration"])
    n_tti = int(duration / tti)
    if n_tti < 1:
        raise AirlinkError(f"duration {float(duration):g} s holds no {float(tti) * 1000:g} ms TTI")
    return n_tti


def _snr_db(cfg: dict, n_users: int):
    if cfg.get("distance_m") is not None:
        bw = cfg["noise_bandwidth_hz"] or cfg["subchannel_hz"]
        dist = np.resize(np.atleast_1d(np.asarray(cfg["distance_m"], dtype=np.float64)), n_users)
        return snr_from_geometry(dist, tx_power_dbm=cfg["tx_power_dbm"],
                                 antenna_gain_db=cfg["antenna_gain_db"],
                                 noise_figure_db=cfg["noise_figure_db"], bandwidth_hz=bw,
                                 offset_db=_offsets(cfg, n_users)).tolist()
    snr = cfg["snr_db"]
    if isinstance(snr, (list, tuple)):
        snr = list(snr)
        if len(snr) != n_users:
            if len(snr) < 1:
                raise AirlinkError("snr_db: no values")
            # a preset's list for another number of users: spread its range evenly
            snr = np.linspace(max(snr), min(snr), n_users).tolist() if n_users > 1 else [snr[0]]
    else:
        snr = [float(snr)] * n_users
    return (np.asarray(snr, dtype=np.float64) + _offsets(cfg, n_users)).tolist()


def _offsets(cfg: dict, n_users: int) -> np.ndarray:
    """``snr_offset_db`` per user (a scalar, or a list repeated to ``n_users``)."""
    off = _per_user_list(cfg["snr_offset_db"], n_users)
    off = np.atleast_1d(np.asarray(off, dtype=np.float64))
    return np.resize(off, n_users)


def _per_user_list(value, n_users):
    if isinstance(value, (list, tuple)) and len(value) not in (1, n_users):
        return [value[i % len(value)] for i in range(n_users)]
    return value


def _read_frame(path) -> "pd.DataFrame":
    import pandas as pd
    path = Path(path)
    if not path.exists():
        raise AirlinkError(f"{path}: no such channel trace file")
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    frame = pd.read_csv(path)
    frame.columns = [str(c).strip() for c in frame.columns]
    if "time" not in frame.columns:
        col = next((c for c in frame.columns if c.lower() in ("time", "time_s", "timestamp", "seconds")), None)
        if col is None:
            raise AirlinkError(f"{path}: channel trace needs a time column (time, time_s or seconds)")
        t = frame[col]
        frame["time"] = pd.to_datetime(t, unit="s", utc=True) if np.issubdtype(t.dtype, np.number) \
            else pd.to_datetime(t, utc=True)
    frame.columns = [c.lower() for c in frame.columns]
    return frame
