"""The shells: run a command in a new network namespace behind an emulated link.

``LinkShell``, ``DelayShell`` and ``LossShell`` build one stage per direction and hand
them to the event loop between the shell's two TUN devices; ``run(cmd)`` returns CMD's
exit status (128 + signal number when CMD was killed). Shells are commands, so they nest:
``DelayShell(10).run(["airlink", "link", "down.trace", "--", "iperf3", ...])``.
"""
from __future__ import annotations

import json
import resource
import signal
import time

from airlink.core import atomic
from airlink.core.errors import AirlinkError

from . import loop as _loop
from .queues import make_queue, with_ecn
from .stages import DelaySeries, DelayStage, LinkStage, LossStage, Stage, TTILogWriter, offload_wanted, relay_threads

KILL_GRACE_S = 3.0   # after SIGTERM/SIGHUP/SIGINT (or the end of a --once trace), CMD is killed


class _Shell:
    tool = "airlink"

    def _stages(self, start_ns: int, wall_ns: int, command: str):
        raise NotImplementedError

    def run(self, cmd=None, *, env=None, stats_path=None) -> int:
        """Run ``cmd`` (default: the user's shell) inside the emulated link; its exit status.

        ``stats_path`` writes a JSON summary (per-direction counters, kernel drops at the
        TUN devices). The summary is also kept in :attr:`last_stats`.
        """
        from .plumbing import VNET_HDR_SIZE, Namespace, set_offload, set_timer_slack
        vnet = VNET_HDR_SIZE if offload_wanted() else 0
        ns = Namespace(cmd, env=env, vnet_hdr=bool(vnet))
        handlers = {}
        stages = ()
        try:
            start_ns, wall_ns = time.monotonic_ns(), time.time_ns()
            ru = resource.getrusage(resource.RUSAGE_SELF)
            cpu0 = ru.ru_utime + ru.ru_stime
            down, up = stages = self._stages(start_ns, wall_ns, " ".join(ns.cmd))

            def kill_child(_sig=None, _frame=None):
                ns.signal(signal.SIGKILL)

            def forward(sig, _frame):
                ns.signal(sig)
                if signal.getitimer(signal.ITIMER_REAL)[0] == 0:
                    signal.setitimer(signal.ITIMER_REAL, KILL_GRACE_S)

            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
                handlers[s] = signal.signal(s, forward)
            handlers[signal.SIGALRM] = signal.signal(signal.SIGALRM, kill_child)
            set_timer_slack()
            fast = (down.fast(), up.fast())
            # why a stage has no C version, asked before it serves (then it is running)
            refusals = "; ".join(f"{name}: {r}" for name, r in (("downlink", down.fast_refusal()),
                                                                 ("uplink", up.fast_refusal())) if r)
            offload = False
            if vnet and None not in fast:
                # GSO super-packets only for the C stages, which serve them segment by segment,
                # and not for a queue that decides per packet (CoDel, PIE, L4S): its TUN
                # devices keep the header but no offload, so every packet is one segment
                for stage in fast:
                    stage.vnet_hdr(vnet)
                if not (down.per_packet or up.per_packet):
                    try:
                        for fd in (ns.outer_fd, ns.inner_fd):
                            set_offload(fd)
                        offload = True
                    except OSError:     # a kernel without TUN offloads: plain packets behind the header
                        pass
            ns.start()
            try:
                if None not in fast:
                    from . import _fastpath
                    logs = any(getattr(st, "log", None) is not None or getattr(st, "tti_log", None) is not None
                               for st in stages)
                    if logs:    # the logs are handed over between packets by this (Python's) thread
                        counters = _fastpath.relay(ns.outer_fd, ns.inner_fd, ns.pidfd, *fast,
                                                   lambda: (down.drain_fast(), up.drain_fast()))
                    else:
                        relay = _fastpath.relay_threads if relay_threads() == 2 else _fastpath.relay
                        counters = relay(ns.outer_fd, ns.inner_fd, ns.pidfd, *fast)
                    counters["engine"] = "c"
                else:
                    counters = _loop.run(ns.outer_fd, ns.inner_fd, down, up, stop_fd=ns.pidfd,
                                         on_finished=lambda: forward(signal.SIGTERM, None), vnet_hdr=vnet)
                    for stage in stages:
                        stage.forget_fast()
                    counters["engine"] = "python"
                    counters["engine_reason"] = refusals
                    fast = None
                counters["offload"] = offload
                if vnet and fast and not offload and (down.per_packet or up.per_packet):
                    counters["offload_reason"] = "; ".join(
                        f"{name}: the {st.kind} stage decides per packet" for name, st in
                        (("downlink", down), ("uplink", up)) if st.per_packet)
            except OSError as exc:
                if isinstance(exc, AirlinkError):
                    raise
                raise AirlinkError(f"{self.tool}: the shell's network device failed while CMD ran "
                                   f"({exc.strerror or exc}; removed from outside?): CMD was stopped") from None
            status = ns.wait()
            now = time.monotonic_ns()
            down.close(now)
            up.close(now)
            directions = {}
            for name, stage, c in (("downlink", down, fast and fast[0]), ("uplink", up, fast and fast[1])):
                st = stage.stats()
                if c is not None:
                    st.update(c.stats())
                directions[name] = st
            ru = resource.getrusage(resource.RUSAGE_SELF)
            stats = {"tool": self.tool, "command": ns.cmd, "status": status,
                     "duration_s": (now - start_ns) / 1e9,
                     "cpu_s": ru.ru_utime + ru.ru_stime - cpu0, "block": ns.block,
                     **directions,
                     "kernel": ns.device_drops(), **counters}
            self.last_stats = stats
            if stats_path:
                atomic.write_text(stats_path, json.dumps(stats, indent=2) + "\n")
            return status
        except BaseException:
            # a failure (a log that could not be written, a vanished device, ...): every log
            # not finished stays NAME.partial, none claims to be complete
            for stage in stages:
                stage.abort()
            raise
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            for s, h in handlers.items():
                signal.signal(s, h)
            ns.close()


class LinkShell(_Shell):
    """A link whose capacity follows a trace in each direction (``airlink link``).

    Parameters
    ----------
    downlink : path or Trace
        Capacity trace (Mahimahi file, airlink Parquet trace or :class:`Trace`).
    uplink : path or Trace, optional
        Uplink trace; without one the uplink is unconstrained.
    user : str or int, optional
        Column of a multi-user trace (default the first).
    once : bool
        Do not loop the trace; when it ends, CMD is stopped (as ``mm-link --once``).
    downlink_queue, uplink_queue : str
        ``infinite``, ``droptail``, ``drophead``, ``codel``, ``pie`` or ``l4s`` (DualPI2).
    downlink_queue_args, uplink_queue_args : str or dict
        ``"packets=100,bytes=150000"`` etc. (see :mod:`airlink.replay.queues`).
    downlink_ecn, uplink_ecn : bool
        The queue CE-marks ECN-capable packets instead of dropping them (see
        :mod:`airlink.replay.queues`); the same as ``ecn`` in the queue's arguments.
    downlink_log, uplink_log : path, optional
        mm-link format logs.
    downlink_tti_log, uplink_tti_log : path, optional
        Per-TTI Parquet logs (``mac`` kind columns).
    opportunity_bytes : int
        Bytes per line of a Mahimahi trace (1500).
    mode : str
        ``"saturator"`` (default): each direction drains its queue by its capacity trace.
        ``"workload"``: ``downlink`` is a CellReplay trace set (a folder, as ``airlink
        record`` writes it, or :class:`~airlink.traces.cellreplay.CellReplayTraces`) and
        both directions serve each packet by the state of the application's own queue
        (:mod:`airlink.replay.workload`); it runs on the C engine (the rule in the link
        core; the Python loop with ``AIRLINK_PURE_PYTHON=1``; a GSO super-packet served as
        its segments), logs arrivals and departures to ``downlink_log``/``uplink_log``,
        and takes no uplink trace, user, queue, ECN, per-TTI logs or ``once``.
    idle_ms : float
        Workload mode: idle time after which a packet starts a new burst on a light
        train (CellReplay's long-to-short timer; 0).

    Attributes
    ----------
    down_trace, up_trace : Trace or None
        Saturator mode: the traces as played, read and checked when the shell is made (before
        any namespace exists): one user, bytes per TTI, a TTI above 10 ms split by
        :func:`airlink.traces.split_long_ttis`; ``up_trace`` is None without an uplink.
    """

    tool = "airlink link"

    def __init__(self, downlink, *, uplink=None, user=None, once: bool = False,
                 downlink_queue: str = "infinite", downlink_queue_args=None,
                 uplink_queue: str = "infinite", uplink_queue_args=None,
                 downlink_ecn: bool = False, uplink_ecn: bool = False,
                 downlink_log=None, uplink_log=None, downlink_tti_log=None, uplink_tti_log=None,
                 opportunity_bytes: int = 1500, mode: str = "saturator", idle_ms: float = 0.0):
        if mode not in MODES:
            raise AirlinkError(f"link mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.mode = mode
        if mode == "workload":
            self._workload_init(downlink, idle_ms, uplink=uplink, user=user, once=once,
                                queues=(downlink_queue, downlink_queue_args, uplink_queue, uplink_queue_args),
                                ecn=downlink_ecn or uplink_ecn,
                                logs=(downlink_log, uplink_log, downlink_tti_log, uplink_tti_log))
            return
        _refuse_trace_set(downlink)
        self.down_trace, self.down_name = _load(downlink, user, opportunity_bytes)
        self.up_trace, self.up_name = (None, "") if uplink is None else _load(uplink, user, opportunity_bytes)
        self.user = str(user) if user is not None else self.down_trace.users[0]
        self.once = once
        # build once now so that bad options fail before any namespace exists
        self.queues = {"downlink": (downlink_queue, with_ecn(downlink_queue_args, downlink_ecn)),
                       "uplink": (uplink_queue, with_ecn(uplink_queue_args, uplink_ecn))}
        for kind, args in self.queues.values():
            make_queue(kind, args)
        self.logs = {"downlink": (downlink_log, downlink_tti_log), "uplink": (uplink_log, uplink_tti_log)}
        if uplink is None and (uplink_log or uplink_tti_log or uplink_queue != "infinite" or uplink_ecn):
            raise AirlinkError("an uplink queue or log needs an uplink trace")

    def _workload_init(self, traces, idle_ms, *, uplink, user, once, queues, ecn, logs):
        from airlink.traces.cellreplay import CellReplayTraces, read_cellreplay

        from .workload import WorkloadStage
        others = [what for what, given in (
            ("an uplink trace (the set has both directions)", uplink is not None),
            ("a user column", user is not None), ("a trace played once", once),
            ("queue disciplines", queues[0] != "infinite" or queues[2] != "infinite"
             or queues[1] or queues[3]),
            ("ECN", ecn), ("per-TTI logs", logs[2] or logs[3])) if given]
        if others:
            raise AirlinkError(f"the workload mode does not take {', '.join(others)}")
        self.traces = traces if isinstance(traces, CellReplayTraces) else read_cellreplay(traces)
        self.down_name = str(self.traces.meta.get("source") or "trace set")
        self.idle_ms = float(idle_ms)
        self.logs = {"downlink": logs[0], "uplink": logs[1]}
        WorkloadStage(self.traces.down, idle_ms=self.idle_ms)   # check now

    def _stage(self, direction, trace, name, start_ns, wall_ns, command):
        kind, args = self.queues[direction]
        queue = make_queue(kind, args)
        log_path, tti_path = self.logs[direction]
        if log_path:
            from airlink.traces import LinkLogWriter    # (pandas: only a shell with a log)
        log = LinkLogWriter(log_path, direction=direction, trace=name, queue=queue.describe(),
                            base_ms=wall_ns // 1_000_000, command=command,
                            tool="airlink link") if log_path else None
        tti_log = TTILogWriter(tti_path, user=self.user, wall_start_ns=wall_ns,
                               meta={"direction": direction, "trace": name,
                                     "queue": queue.describe(), "source": "airlink link",
                                     "airlink_version": _version()}) if tti_path else None
        return LinkStage(trace.values[:, 0], trace.tti, queue=queue, start_ns=start_ns,
                         loop=not self.once, log=log, tti_log=tti_log)

    def _stages(self, start_ns, wall_ns, command):
        if self.mode == "workload":
            from .workload import WorkloadStage
            stages = []
            for name, direction in (("downlink", self.traces.down), ("uplink", self.traces.up)):
                path = self.logs[name]
                if path:
                    from airlink.traces import LinkLogWriter
                log = LinkLogWriter(path, direction=name, trace=self.down_name, queue="workload rule",
                                    base_ms=wall_ns // 1_000_000, command=command,
                                    tool="airlink link --mode workload") if path else None
                stages.append(WorkloadStage(direction, start_ns=start_ns, idle_ms=self.idle_ms, log=log))
            return tuple(stages)
        down = self._stage("downlink", self.down_trace, self.down_name, start_ns, wall_ns, command)
        up = Stage() if self.up_trace is None else \
            self._stage("uplink", self.up_trace, self.up_name, start_ns, wall_ns, command)
        return down, up


class DelayShell(_Shell):
    """Fixed one-way delay in each direction (``delay_ms``), or a delay that follows a
    time series (``series``: a :class:`DelaySeries` or a CSV path); never reorders."""

    tool = "airlink delay"

    def __init__(self, delay_ms=None, *, series=None):
        if (delay_ms is None) == (series is None):
            raise AirlinkError("give a delay in ms or a delay series, not both")
        if series is not None and not isinstance(series, DelaySeries):
            series = DelaySeries.read_csv(series)
        self.delay = series if series is not None else float(delay_ms)
        DelayStage(self.delay)  # check now

    def _stages(self, start_ns, wall_ns, command):
        return DelayStage(self.delay, start_ns=start_ns), DelayStage(self.delay, start_ns=start_ns)


class LossShell(_Shell):
    """Random loss on one direction: independent with ``rate``, or Gilbert-Elliott
    (``gilbert=(p_gb, p_bg[, loss_g, loss_b])``); the other direction is untouched."""

    tool = "airlink loss"

    def __init__(self, direction: str, rate: float = 0.0, *, gilbert=None, seed=None):
        if direction not in ("uplink", "downlink"):
            raise AirlinkError(f"loss direction must be uplink or downlink, got {direction!r}")
        self.direction, self.rate, self.gilbert, self.seed = direction, rate, gilbert, seed
        LossStage(rate, gilbert=gilbert, seed=seed)  # check now

    def _stages(self, start_ns, wall_ns, command):
        lossy = LossStage(self.rate, gilbert=self.gilbert, seed=self.seed)
        return (lossy, Stage()) if self.direction == "downlink" else (Stage(), lossy)


#: How ``airlink link`` serves packets: by a capacity trace, or by the application's queue state.
MODES = ("saturator", "workload")


def _refuse_trace_set(trace):
    """A CellReplay trace set given to the saturator mode: say which mode replays it."""
    from airlink.traces.cellreplay import CellReplayTraces, is_cellreplay_set
    if isinstance(trace, CellReplayTraces) or (not hasattr(trace, "values") and is_cellreplay_set(trace)):
        raise AirlinkError(f"{getattr(trace, 'meta', {}).get('source', trace)}: a CellReplay trace set; "
                           "the workload mode replays it (a saturator replay takes one capacity trace "
                           "per direction, e.g. its mahimahi.down)")


def _load(trace, user, opportunity_bytes):
    from airlink.traces import Trace, read_trace, split_long_ttis
    if isinstance(trace, Trace):
        tr, name = trace, str(trace.meta.get("source", "trace"))
    else:
        tr, name = read_trace(trace, opportunity_bytes=opportunity_bytes), str(trace)
    if tr.unit != "bytes":
        raise AirlinkError(f"{name}: a link needs a capacity trace in bytes per TTI, not {tr.unit!r}")
    if user is not None:
        tr = tr.select(user)
    elif tr.n_users > 1:
        tr = tr.select(tr.users[0])
    if tr.n_tti == 0 or tr.values.sum() <= 0:
        raise AirlinkError(f"{name}: the trace has no capacity at all")
    tr = split_long_ttis(tr)   # 20 ms frames -> 2 x 10 ms, totals exact (the one rule, in traces)
    ms = tr.tti_ms
    if not 0.125 - 1e-9 <= ms <= 10 + 1e-9:
        raise AirlinkError(f"{name}: TTI of {ms:g} ms is outside 0.125..10 ms")
    return tr, name


def _version():
    from airlink import __version__
    return __version__


def link(downlink, cmd=None, **options) -> int:
    """Run ``cmd`` behind a trace-driven link; see :class:`LinkShell`. Returns its exit status."""
    stats = options.pop("stats_path", None)
    return LinkShell(downlink, **options).run(cmd, stats_path=stats)


def delay(delay_ms=None, cmd=None, *, series=None, stats_path=None) -> int:
    """Run ``cmd`` behind a one-way delay; see :class:`DelayShell`."""
    return DelayShell(delay_ms, series=series).run(cmd, stats_path=stats_path)


def loss(direction, rate=0.0, cmd=None, *, gilbert=None, seed=None, stats_path=None) -> int:
    """Run ``cmd`` behind random loss; see :class:`LossShell`."""
    return LossShell(direction, rate, gilbert=gilbert, seed=seed).run(cmd, stats_path=stats_path)
