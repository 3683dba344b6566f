"""The cell shell: several real applications share one live, scheduled downlink.

``airlink cell`` gives every UE its own network namespace and address behind one shell;
a base-station queue per UE holds the downlink packets, and once per TTI the simulator's
scheduler (the same :meth:`airlink.sim.step.Radio.step` as ``airlink simulate``: channel
with CSI delay, HARQ with block errors, link adaptation, RR / MaxCIR / PF / MC-PFS /
R/T^lambda / backlog-driven) decides from the channel and the **live** queue backlogs how
many bytes each UE receives. TCP sets the backlog from the rate it sees; the scheduler sets
the rate from the backlog: the loop of the source papers, closed with real applications.

Who decides: with the C packet path, numba and one of the kernel's own schedulers, the C
loop (:mod:`airlink.replay._cellpath`) decides every TTI itself, many TTIs per call from
Python, by calling the simulator's step compiled as a C function
(:mod:`airlink.sim.kernel_live`); otherwise Python decides each TTI
(:func:`decide_and_serve`, the readable reference the C loop must equal; a scheduler given
as a Python class runs only there). ``--stats`` says which (``scheduler_step``).

Time: the clock starts once every UE's command has been started (no packet can flow
before; with ``warmup_bytes``, once every queue also holds that much); TTI ``k`` covers
``[start + k*tti, start + (k+1)*tti)``; at its end the scheduler
decides with the bytes queued by then and the bytes granted leave the queue at once
(byte-granular, as :class:`airlink.replay.server.ByteServer`; fractional bytes carry to
the next TTI). A TTI handled more than ``late_after`` (half a TTI by default) after its end
is *late*: counted, logged (``late`` column) and reported, never stretched - the TTI grid
stays fixed to the clock.

Addresses: the shell takes an address block like every shell (``AIRLINK_BASE`` is the
outermost side's address), cuts it into parts (:func:`airlink.replay.plumbing.divide_block`)
and gives UE ``i`` the ``.2`` of part ``i``; downlink packets go to the UE whose part holds
their destination. CMD runs once per UE, as the user who ran sudo, with ``AIRLINK_UE``
(1..N) and ``AIRLINK_UE_ADDRESS`` set; the exit status is the worst (largest) of theirs.

Library entry point (``cmd`` may also be a list of N commands, one per UE)::

    from airlink.replay.cell import run_cell
    status = run_cell(["sh", "-c", "iperf3 -c $AIRLINK_BASE -p $((5200+AIRLINK_UE)) -R -t 10"],
                      preset="imt-advanced", scheduler="pf", users=4, seed=1,
                      queue="droptail", queue_args="packets=500", mac_log="mac.parquet")
"""
from __future__ import annotations

import gc
import ipaddress
import json
import os
import resource
import signal
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from airlink.core.atomic import atomic_path, commit, create_partial, write_text
from airlink.core.bounds import CELL_UES, SEED
from airlink.core.envflags import env_flag
from airlink.core.errors import AirlinkError
from airlink.core.units import parse_duration, parse_rate, parse_size

from .cell_pypath import PyCellPath
from .cell_radio import LIVE_ARRAYS, RadioFeed
from .eventlog import EventLogThread
from .queues import PER_PACKET, core_parameters, make_queue, parse_queue_args, with_ecn
from .server import EVENT, carry_budgets
from .stages import LinkStage, Stage, offload_wanted

KILL_GRACE_S = 3.0
DRAIN_QUIET_NS = 30_000_000     # after every CMD exited: stop once 30 ms pass without a packet ...
DRAIN_MAX_NS = 1_000_000_000    # ... or after 1 s
PREFETCH = 2                    # chunks of radio inputs made ahead of the clock
UNBOUNDED_S = 24 * 3600         # the radio's horizon when no duration is given
MEASURED_UNBOUNDED_S = 3600     # ... and with a measured channel trace (held in memory)
UNBOUNDED_CHUNK_S = 2           # radio inputs per chunk of a run without a duration
RADIO_RT_PRIORITY = 5           # with --realtime, the radio process's SCHED_RR priority (the loop's is 10)
LOOP_NICE = -10                 # the TTI loop's niceness (without --realtime): it wakes up first ...
LOOP_SLICE_NS = 100_000         # ... and asks for a 0.1 ms time slice (the shortest), so it preempts at once
RESCUE_DIVISOR = 3              # a rescuer moves a loop still asleep a third of --late-after past a TTI's end
                                # (AIRLINK_CELL_RESCUE=0: no rescuers; see _cellpath.c) ...
RESCUE_MIN_TTI = Fraction(1, 2000)  # ... nor with TTIs under 0.5 ms
START_POLL_NS = 2_000_000       # before the clock starts: look at the UEs' commands this often ...
START_WAIT_NS = 2_000_000_000   # ... and start it at the latest this long after they were let go
_EVENT = EVENT       # the logged events of either packet path (see .server.EVENT)
NEVER_NS = 2**62     # a wake-up time that never comes
MIN_TTI = Fraction(1, 8000)             # the shortest TTI (NR's 120 kHz slots, FR2) ...
MIN_PYTHON_STEP_TTI = Fraction(1, 2000)  # ... and the shortest the Python step keeps up with

#: live columns the cell writes over the simulator's in its MAC log, and the ones it adds
LIVE_COLUMNS = ("backlog_bytes", "backlog_packets", "arrivals_bytes", "drops_packets", "drops_bytes",
                "marks_packets", "backlog_seen_bytes", "late", "lateness_us")
#: MAC log columns stored dictionary-encoded besides the simulator's (airlink.sim.result's
#: DICTIONARY_COLUMNS): the live marks, a measured cell's PRBs and MCS indices (few values each)
LIVE_DICTIONARY_COLUMNS = ("marks_packets", "prbs", "mcs_index")


class CellShell:
    """A live cell: N UEs in their own namespaces, one scheduled downlink (``airlink cell``).

    Parameters (keyword-only; ``None`` means the preset's value)
    ----------
    preset : name or YAML file of a simulator preset (default ``quick``)
    scheduler : ``rr``, ``maxcir``, ``pf``, ``lambda``, ``backlog``, ``mcpfs``, a dotted path
        or a scheduler object (see :mod:`airlink.sim.sched_base`)
    users : number of UEs
    seed : the radio's seed: the same seed gives the simulator's channel and draws
    tti : TTI length (``"1ms"``; 0.125 to 10 ms; under 0.5 ms only with the compiled step: one
        of the kernel's schedulers, numba and the C packet path)
    duration : stop after this long (CMDs get SIGTERM); None: until every CMD has exited
    overrides : further preset parameters (``{"n_subchannels": 50, "pf_a": 0.01}``)
    queue, queue_args : each UE's base-station queue, any of :mod:`airlink.replay.queues`:
        ``droptail``/``drophead`` (``packets=``/``bytes=``), ``codel`` (``target=``,
        ``interval=``), ``pie`` (``qdelay_ref=``, ``max_burst=``, ``seed=``), ``l4s``
        (DualPI2: ``step=``, ``target=``, ...) or ``infinite``; arguments as a
        ``"k=v,..."`` string or a dict. A limited queue given neither ``packets=`` nor
        ``bytes=`` holds the preset's ``buffer_packets`` packets (500 when the preset has
        none): for CoDel, PIE and L4S that is the tail-drop safety net of a full buffer.
        PIE's and L4S's ``seed=`` is UE 1's; UE ``i`` draws its coins from ``seed + i - 1``
    ecn : every UE's queue CE-marks ECN-capable packets instead of dropping them (codel,
        pie; ``l4s`` always marks; a full buffer still drops); the same as ``ecn`` in
        ``queue_args``. Marks are counted per UE in the stats, per TTI in the MAC log
        (``marks_packets``) and as ``m`` lines of the per-UE logs
    uplink : None (unconstrained: what a UE sends leaves as it comes, or with
        ``AIRLINK_CELL_UPLINK_SLOTS=1`` at the end of the TTI it was sent in), a rate
        (``"2Mbit/s"``, constant per UE) or a capacity trace (path or
        :class:`airlink.traces.Trace`; column ``i`` for UE ``i`` when it has one per UE, else
        the same trace for every UE), served on its own grid
    mac_log : path of the per-TTI Parquet MAC log: the simulator's ``mac`` columns, with the
        live queue's ``backlog_bytes``/``backlog_packets`` (after the TTI's service, as the
        simulator's), ``arrivals_bytes`` and ``drops_packets`` (those before the clock
        started count in TTI 0), plus ``drops_bytes``,
        ``backlog_seen_bytes`` (what the scheduler saw at its decision: queued bytes less
        the fraction of a byte already granted), ``late`` and ``lateness_us`` (how long
        after its end the TTI was handled)
    log_dir : folder for Mahimahi-format per-UE logs ``ue<N>.down.log`` (and ``ue<N>.up.log``
        with a constrained uplink)
    warmup_bytes : hold the TTI clock until every UE has this many bytes queued (int or
        ``"300KB"``): to start from full queues, as a full-buffer simulation does
    late_after : lateness (duration) from which a TTI counts as late (default half a TTI)
    realtime : run the shell's TTI loop under the real-time policy ``SCHED_RR`` (priority
        10) so that a busy machine delays TTIs less, and the radio process
        (:mod:`airlink.replay.cell_radio`) under it at priority 5, so that its inputs are
        ready in time; the UEs' commands keep the normal policy. Off by default (it takes
        CPU from everything else): the loop then runs at niceness -10 with a 0.1 ms time
        slice where the kernel allows one (Linux 6.12+).
    rps : Receive Packet Steering on the UEs' devices, so that the receiving UEs' TCP runs
        on another CPU than the TTI loop's (:func:`_steer_receive`; docs/cell.md): ``off``
        (default), ``all`` (the UEs' packets hashed over every CPU) or ``pin`` (the loop
        pinned to its CPU, the UEs' receiving on the others; no rescuers then: they move a
        late loop to another CPU). Nothing on one CPU.
    from_log : an NR-Scope CSV or an airlink MAC log: replay that recorded cell
        (:mod:`airlink.replay.cell_fromlog`): the other users' recorded PRBs per slot are
        taken first, the UEs are scheduled on the rest
    follow_rnti : with ``from_log``, the RNTI whose recorded MCS each UE's channel follows: one
        for every UE or a list of one per UE; ``"busiest"`` (default) or ``"model"`` (the preset's)
    log_direction : with ``from_log``, whose DCIs are the cross-traffic (``downlink``)
    log_start : with ``from_log``, where in the log TTI 0 is (a duration; default its first slot)
    log_others : with ``from_log``, ``"share"`` (the other users' recorded PRBs are taken first)
        or ``"demand"`` (an airlink MAC log's other UEs scheduled beside the live ones, fed by
        their recorded arrivals: :mod:`airlink.replay.cell_fromlog`) or ``"flows"`` (the same
        fed by their recorded on-periods: :func:`airlink.replay.cell_fromlog.as_flows`) or
        ``"mixed"`` (those with data throughout full buffers, the others fed as in ``"demand"``)
    log_channel : with ``from_log``, ``"selective"`` (default: the replayed UEs' recorded
        wideband SINR over the cell's fading model, where an airlink MAC log has it; else flat)
        or ``"flat"`` (their recorded rate-table row on every subchannel; an NR-Scope log
        always): :func:`airlink.replay.cell_fromlog.measured_cell`
    """

    tool = "airlink cell"

    def __init__(self, *, preset=None, scheduler=None, users=None, seed: int = 0, tti=None,
                 duration=None, overrides=None, queue: str = "droptail", queue_args=None, ecn: bool = False,
                 uplink=None, mac_log=None, log_dir=None, warmup_bytes=None, late_after=None,
                 realtime: bool = False, from_log=None, follow_rnti=None, log_direction: str = "downlink",
                 log_start=None, log_others: str = "share", log_channel: str = "selective", rps: str = "off"):
        from airlink.sim.engine import check_config, make_scheduler, resolve_config, scheduler_name
        over = dict(overrides or {})
        for key, value in (("n_users", users), ("tti", tti)):
            if value is not None:
                over[key] = value
        sched_spec = scheduler if scheduler is not None else over.pop("scheduler", None)
        cfg = resolve_config(preset, {**over, "scheduler": sched_spec if isinstance(sched_spec, str) else None})
        if sched_spec is None or isinstance(sched_spec, str):
            sched_spec = cfg["scheduler"]
        self.scheduler = make_scheduler(sched_spec, cfg)
        cfg["scheduler"] = sched_spec if isinstance(sched_spec, str) else scheduler_name(self.scheduler)
        cfg["seed"] = int(SEED.check(seed))
        self.n_users, self.n_subchannels = check_config(cfg)
        CELL_UES.check(self.n_users)             # one namespace, veth pair and queue per UE
        from airlink.sim.step import parse_cfg_tti
        self.tti = parse_cfg_tti(cfg["tti"])
        self.measured = None
        if from_log is not None:
            from .cell_fromlog import measured_for
            self.measured = measured_for(cfg, self.scheduler, from_log, n_users=self.n_users,
                                         n_prbs=self.n_subchannels, tti=self.tti, follow=follow_rnti,
                                         direction=log_direction, start=log_start, others=log_others,
                                         channel=log_channel)
        if not MIN_TTI <= self.tti <= Fraction(1, 100):
            raise AirlinkError(f"a cell's TTI must be {float(MIN_TTI) * 1000:g} to 10 ms, "
                               f"got {float(self.tti) * 1000:g} ms")
        why = _why_python_step(self.scheduler, _cellpath() is not None, self.measured)
        if self.tti < MIN_PYTHON_STEP_TTI and why:
            raise AirlinkError(f"a cell's TTI under {float(MIN_PYTHON_STEP_TTI) * 1000:g} ms needs the compiled "
                               f"step, which is not used here ({why}); got {float(self.tti) * 1000:g} ms")
        self.duration = None if duration is None else parse_duration(duration)
        if self.duration is not None:
            self.n_tti = int(self.duration / self.tti)
            if self.n_tti < 1:
                raise AirlinkError(f"duration {float(self.duration):g} s holds no TTI")
            cfg["duration"] = f"{float(self.duration):g}s"
        else:
            self.n_tti = None
            horizon = MEASURED_UNBOUNDED_S if cfg["channel_trace"] is not None else UNBOUNDED_S
            cfg["duration"] = f"{horizon}s"
        self.cfg = cfg
        queue_args = with_ecn(queue_args, ecn)
        if queue != "infinite":
            options = parse_queue_args(queue_args) if isinstance(queue_args, str) or queue_args is None \
                else dict(queue_args)
            if not options.get("packets") and not options.get("bytes"):
                options["packets"] = int(cfg["buffer_packets"] or 500)     # the preset's buffer
            queue_args = options
        self.queue_kind, self.queue_args = queue, queue_args
        make_queue(queue, queue_args)       # bad options fail before any namespace exists
        self.uplink = _uplink_capacity(uplink, self.n_users, self.tti)
        self.mac_log = None if mac_log is None else Path(mac_log)
        self.log_dir = None if log_dir is None else Path(log_dir)
        self.warmup_bytes = None if warmup_bytes is None else parse_size(warmup_bytes)
        late = Fraction(self.tti) / 2 if late_after is None else parse_duration(late_after, "ms")
        self.late_ns = int(late * 10**9)
        self.realtime = bool(realtime)
        if rps not in RPS_MODES:
            raise AirlinkError(f"--rps must be one of {', '.join(RPS_MODES)}, got {rps!r}")
        self.rps = rps
        # the environment's switches, read (and a bad value refused) before anything starts:
        # GSO super-packets through the TUNs, the rescuers' delay (ns, 0: none), TUN writes in a thread
        self.offload = _offload_wanted(queue)
        self.rescue_ns = 0 if rps == "pin" else _rescue_ns(self.late_ns, self.tti)
        self.writer_thread = _writer_wanted()
        self.uplink_slots = _uplink_slots_wanted()
        self.last_stats = None

    def _radio(self, live=True):
        from airlink.sim.step import Radio, n_tti_of
        # with a duration, the simulator's chunks (identical draws); without, chunks of at
        # most UNBOUNDED_CHUNK_S, so that no chunk of an endless run is huge
        cap = None if self.n_tti is not None else max(1, int(UNBOUNDED_CHUNK_S / self.tti))
        if self.measured is not None:
            from .cell_fromlog import FromLogRadio
            return FromLogRadio(self.cfg, self.scheduler, measured=self.measured, n_users=self.n_users,
                                n_subchannels=self.n_subchannels, n_tti=n_tti_of(self.cfg), live=live,
                                max_chunk=cap)
        return Radio(self.cfg, self.scheduler, n_users=self.n_users, n_subchannels=self.n_subchannels,
                     n_tti=n_tti_of(self.cfg), live=live, max_chunk=cap)

    # -- running -------------------------------------------------------------------------
    def run(self, cmd=None, *, env=None, stats_path=None) -> int:
        """Run ``cmd`` once in every UE's namespace; the worst exit status (128 + signal
        number for a command killed by a signal). ``cmd`` is one argument list for every UE,
        or a list of N argument lists (UE ``i`` runs the ``i``-th). ``stats_path`` writes a
        JSON summary (also kept in :attr:`last_stats`)."""
        from .plumbing import VNET_HDR_SIZE, Namespace, OuterSide, divide_block, require_root, set_offload, \
            set_timer_slack
        cmds = _per_ue_commands(cmd, self.n_users)
        require_root(self.tool)
        base_env = dict(os.environ if env is None else env)
        # a throw-away radio compiles/loads the step before any clock runs
        _warm_up(self._radio())
        radio = self._radio()
        # the radio process is forked before any namespace or TUN device exists
        horizon = radio.n_tti if self.n_tti is None else self.n_tti
        mac = None if self.mac_log is None else _MacLog(self, radio, make_queue(self.queue_kind, self.queue_args).describe())
        feed = RadioFeed(radio, horizon=horizon, ahead=PREFETCH, mac=mac)
        outer = None
        namespaces = []
        handlers = {}
        vnet = VNET_HDR_SIZE if self.offload else 0
        try:
            outer = OuterSide(base_env.get("AIRLINK_BLOCK"), vnet_hdr=bool(vnet))
            blocks = divide_block(outer.block, self.n_users)
            for i, block in enumerate(blocks, start=1):
                net = ipaddress.ip_network(block)
                inner, gateway = str(net.network_address + 2), str(net.network_address + 1)
                ue_env = dict(base_env)
                ue_env.update(AIRLINK_UE=str(i), AIRLINK_UE_ADDRESS=inner, AIRLINK_USERS=str(self.n_users))
                ue_env.setdefault("AIRLINK_BASE", outer.outer)
                namespaces.append(Namespace(cmds[i - 1], env=ue_env, outer_side=outer, block=block,
                                            addresses=(inner, gateway), vnet_hdr=bool(vnet)))
            offload = False
            if vnet:
                try:
                    for fd in (outer.fd, *(ns.inner_fd for ns in namespaces)):
                        set_offload(fd)
                    offload = True
                except OSError:     # a kernel without TUN offloads: plain packets behind the header
                    pass
            rps = _steer_receive(self.rps, namespaces)
            cmdline = " | ".join(" ".join(ns.cmd) for ns in namespaces) if cmds[0] is not cmds[-1] \
                else " ".join(namespaces[0].cmd)

            def forward(sig, _frame):
                for ns in namespaces:
                    ns.signal(sig)
                if signal.getitimer(signal.ITIMER_REAL)[0] == 0:
                    signal.setitimer(signal.ITIMER_REAL, KILL_GRACE_S)

            def kill_all(_sig=None, _frame=None):
                for ns in namespaces:
                    ns.signal(signal.SIGKILL)

            for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
                handlers[s] = signal.signal(s, forward)
            handlers[signal.SIGALRM] = signal.signal(signal.SIGALRM, kill_all)
            set_timer_slack()
            # after the UEs and the radio process were forked: they keep their priority
            if self.realtime:
                try:
                    os.sched_setscheduler(0, os.SCHED_RR, os.sched_param(10))
                    # the loop waits for the radio's inputs: under load a normal process got too
                    # little CPU to make them in time at 0.125 ms TTIs
                    os.sched_setscheduler(feed.pid, os.SCHED_RR, os.sched_param(RADIO_RT_PRIORITY))
                except OSError as exc:
                    raise AirlinkError(f"cannot use the real-time scheduling policy: {exc.strerror}") from None
            else:
                _raise_loop_priority()
            ru = resource.getrusage(resource.RUSAGE_SELF)
            cpu0 = ru.ru_utime + ru.ru_stime
            faults0 = ru.ru_minflt + ru.ru_majflt
            live = _LiveCell(self, radio, feed, outer, namespaces, cmdline, vnet=vnet)
            _pin_loop(rps)
            # everything allocated so far (numpy, pandas, numba, pyarrow modules) leaves the
            # collector's view: a full collection during the run then takes microseconds,
            # not the tens of milliseconds that made TTIs late
            gc.collect()
            gc.freeze()
            for ns in namespaces:
                ns.start()
            try:
                live.loop(stop=lambda: forward(signal.SIGTERM, None))
            except OSError as exc:
                if isinstance(exc, AirlinkError):
                    raise
                raise AirlinkError(f"{self.tool}: a network device of the cell failed while the UEs ran "
                                   f"({exc.strerror or exc}; removed from outside?): the UEs' commands "
                                   f"were stopped") from None
            finally:
                gc.unfreeze()
            statuses = [ns.wait() for ns in namespaces]
            ru = resource.getrusage(resource.RUSAGE_SELF)
            stats = live.finish(statuses, cpu_s=ru.ru_utime + ru.ru_stime - cpu0,
                                page_faults=ru.ru_minflt + ru.ru_majflt - faults0,
                                kernel=[ns.device_drops() for ns in namespaces])
            stats["offload"] = offload
            stats["rps"] = rps
            if self.measured is not None:
                stats["measured_cell"] = self.measured.describe()
            self.last_stats = stats
            if stats_path:
                write_text(stats_path, json.dumps(stats, indent=2, default=str) + "\n")
            return max(statuses)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            for s, h in handlers.items():
                signal.signal(s, h)
            for ns in namespaces:
                ns.signal(signal.SIGKILL)
            for ns in namespaces:
                try:
                    ns.wait()
                finally:
                    ns.close()
            if outer is not None:
                outer.close()
            feed.kill()


def run_cell(cmd=None, *, stats_path=None, env=None, **options) -> int:
    """Run ``cmd`` in every UE of a live cell; see :class:`CellShell` for the options.
    Returns the worst exit status."""
    return CellShell(**options).run(cmd, env=env, stats_path=stats_path)


def _ue_queue_args(args, u: int):
    """UE ``u``'s (0-based) queue arguments: a given coin ``seed`` moves on by ``u``, so that
    the UEs' PIE / L4S queues draw independent coins (reproducibly)."""
    if isinstance(args, dict) and args.get("seed") is not None:
        return {**args, "seed": int(args["seed"]) + u}
    return args


def _per_ue_commands(cmd, n_users) -> list:
    """One argument list (or None: the user's shell) per UE."""
    if cmd and all(isinstance(c, (list, tuple)) for c in cmd):
        if len(cmd) != n_users:
            raise AirlinkError(f"{len(cmd)} commands for {n_users} UEs: give one command, or one per UE")
        return [list(c) for c in cmd]
    one = list(cmd) if cmd else None
    return [one] * n_users


def _uplink_capacity(uplink, n_users, tti):
    """Per-UE ``(capacity bytes per TTI array, tti, name)`` or None (unconstrained)."""
    if uplink is None:
        return None
    from airlink.traces import Trace, read_trace
    if isinstance(uplink, (int, float)) or (isinstance(uplink, str) and not Path(uplink).exists()
                                            and any(c.isdigit() for c in uplink)):
        bps = parse_rate(uplink)
        if not bps > 0:
            raise AirlinkError(f"uplink rate must be positive, got {uplink!r}")
        cap = np.array([bps * float(tti) / 8])
        return [(cap, tti, f"{bps:g} bit/s")] * n_users
    tr = uplink if isinstance(uplink, Trace) else read_trace(uplink)
    name = str(uplink) if not isinstance(uplink, Trace) else str(tr.meta.get("source", "trace"))
    if tr.unit != "bytes":
        raise AirlinkError(f"{name}: an uplink needs a capacity trace in bytes per TTI, not {tr.unit!r}")
    out = []
    for i in range(n_users):
        col = tr.values[:, i if tr.n_users == n_users else 0]
        if col.sum() <= 0:
            raise AirlinkError(f"{name}: UE {i + 1}'s uplink trace has no capacity at all")
        out.append((col, tr.tti, name))
    return out


def _raise_loop_priority():
    """Niceness ``LOOP_NICE`` and, on Linux 6.12 or later (EEVDF's custom slices), a time slice
    of ``LOOP_SLICE_NS`` for the calling thread: a task with a short slice preempts the one
    running when it wakes up, instead of waiting for that one's slice (1-3 ms) to end."""
    import ctypes
    import struct
    libc = ctypes.CDLL(None, use_errno=True)
    # struct sched_attr (56 bytes): size, policy (SCHED_OTHER), flags, nice, priority,
    # runtime (the slice), deadline, period, util_min, util_max; 314 = sched_setattr (x86-64)
    attr = ctypes.create_string_buffer(struct.pack("IIQiIQQQII", 56, 0, 0, LOOP_NICE, 0, LOOP_SLICE_NS, 0, 0, 0, 0))
    if os.uname().machine != "x86_64" or libc.syscall(314, 0, attr, 0) != 0:
        os.setpriority(os.PRIO_PROCESS, 0, LOOP_NICE)


def _command_started(pid: int) -> bool:
    """Whether the command of the UE namespace whose first process is ``pid`` has been
    started: the namespace's init (``pid``'s child) forked it and it called exec (its command
    line is no longer its init's); True also when the namespace's processes are gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            init = f.read().split()
        if not init:
            return False
        with open(f"/proc/{init[0]}/task/{init[0]}/children") as f:
            cmd = f.read().split()
        if not cmd:
            return False
        with open(f"/proc/{init[0]}/cmdline", "rb") as f:
            init_cmdline = f.read()
        with open(f"/proc/{cmd[0]}/cmdline", "rb") as f:
            return f.read() != init_cmdline
    except OSError:
        return True


def _rescue_ns(late_ns: int, tti) -> int:
    """How long after a TTI's end a rescuer thread moves the loop, still not back from its
    wait, to a CPU that runs (0: no rescuers, with ``AIRLINK_CELL_RESCUE=0`` or TTIs shorter
    than ``RESCUE_MIN_TTI``, where their wake-ups, one per TTI each, cost more CPU than they
    save)."""
    if not env_flag("AIRLINK_CELL_RESCUE", True) or tti < RESCUE_MIN_TTI:
        return 0
    return late_ns // RESCUE_DIVISOR


RPS_MODES = ("off", "all", "pin")


def _steer_receive(mode: str, namespaces) -> dict:
    """Receive Packet Steering on the UEs' devices (``--rps``); what was set, for the stats.

    A TUN write runs the receiving UE's stack (IP, its TCP receive, waking its application)
    in the writer's context: in the TTI loop. With RPS on a UE's ``airlink0`` the write only
    queues the packet on the backlog of a CPU of its ``rps_cpus`` (and sends that CPU an
    IPI), where the stack then runs. ``all``: every CPU the shell may use (each UE's flows
    hashed to one of them; those hashed to the loop's CPU are processed there as before).
    ``pin``: every CPU but the one the loop runs on now (``loop_cpu``), where
    :func:`_pin_loop` keeps it. Nothing with one CPU; AirlinkError when a device refuses.
    Only the UEs' own devices change; the setting goes with their namespaces."""
    from .plumbing import INNER_DEVICE, set_rps
    cpus = os.sched_getaffinity(0)
    if mode == "off" or len(cpus) < 2:
        return {"mode": "off"}
    import ctypes
    here = ctypes.CDLL(None).sched_getcpu()
    here = here if here in cpus else min(cpus)
    target = cpus if mode == "all" else cpus - {here}
    ok = set_rps([(ns.ns_fd, INNER_DEVICE) for ns in namespaces], target)
    if not all(ok):
        raise AirlinkError(f"--rps {mode}: Receive Packet Steering could not be set on {ok.count(False)} of "
                           f"{len(ok)} UE devices (a kernel without RPS, or no sysfs to mount?)")
    return {"mode": mode, "cpus": sorted(target), **({"loop_cpu": here} if mode == "pin" else {}),
            "applied": sum(ok)}


def _pin_loop(rps: dict) -> None:
    """With ``--rps pin``, the calling thread (the TTI loop) stays on ``rps["loop_cpu"]``;
    threads started before (the logs' writer, the C path's writer) keep every CPU."""
    if rps.get("mode") == "pin":
        os.sched_setaffinity(0, {rps["loop_cpu"]})


def _writer_wanted() -> bool:
    """Whether the C packet path's TUN writes run in a writer thread of their own, off the
    TTI loop's (``AIRLINK_CELL_WRITER=1``; by default the loop writes itself: on a shared
    2-core machine the thread cost CPU and did not make fewer TTIs late at 0.125 ms; see
    replay/_cellpath.c and docs/cell.md)."""
    return env_flag("AIRLINK_CELL_WRITER", False)


def _uplink_slots_wanted() -> bool:
    """Whether the UEs' unconstrained uplink leaves at TTI ends (the slotted uplink,
    ``AIRLINK_CELL_UPLINK_SLOTS=1``: read once per TTI, before its downlink service;
    replay/_cellpath.c and docs/cell.md, "Time, and late TTIs") rather than as each packet
    comes (the default: the slotted uplink saved loop CPU at 1 ms TTIs but made more 0.125 ms
    slots late, benchmarks/RESULTS.md)."""
    return env_flag("AIRLINK_CELL_UPLINK_SLOTS", False)


def _warm_up(radio):
    """Compile (or load) the step before any clock runs: the Python step's kernel and, where
    it can be used, the compiled step."""
    inp = radio.inputs(0, 1)
    radio.step(inp, 0, 1, radio.new_outputs(1), backlog=np.zeros(radio.n_users))
    if radio.compiled_live_step:
        from airlink.sim.kernel import live_step_address
        live_step_address()


class _MacLog:
    """Writes the cell's MAC log chunk by chunk (in the radio process: :mod:`.cell_radio`)."""

    def __init__(self, shell: CellShell, radio, queue_desc: str):
        self.shell, self.radio, self.queue_desc = shell, radio, queue_desc
        self._writer = None

    def write(self, out, live, sinr_db, sinr_rep_db, k0, wall_start_ns):
        import pyarrow.parquet as pq
        from airlink.sim.result import DICTIONARY_COLUMNS, MacColumns
        cols = self.radio.mac_columns(out, sinr_db, sinr_rep_db, live["arrivals_bytes"],
                                      start_ns=wall_start_ns, k0=k0)
        for name in LIVE_COLUMNS:
            cols[name] = live[name].ravel()
        measured = getattr(self.radio, "measured", None)
        if measured is not None:        # a measured cell's cross-traffic rows (replay/cell_fromlog.py)
            cols = self.radio.measured_columns(cols, out, k0, wall_start_ns)
        # the simulator's MAC table (NaN kept as a value, as pyarrow.array stores it)
        table = MacColumns(cols, [str(u + 1) for u in range(self.radio.n_users)]).table(nan_is_null=False)
        if self._writer is None:
            from airlink import __version__
            shell = self.shell
            cfg = {k: v for k, v in shell.cfg.items() if k != "description"}
            meta = {"source": "airlink cell", "preset": cfg["preset"], "scheduler": cfg["scheduler"],
                    "parameters": cfg, "seed": cfg["seed"], "rate_table": self.radio.table.name,
                    "tti_s": f"{shell.tti.numerator}/{shell.tti.denominator}",
                    "queue": self.queue_desc, "airlink_version": __version__,
                    "late_after_us": shell.late_ns // 1000}
            if measured is not None:
                meta["measured_cell"] = measured.describe()
            header = json.dumps({"kind": "mac", "meta": meta}, default=str).encode()
            schema = table.schema.with_metadata({b"airlink": header})
            # dictionaries only for the columns of few distinct values, as the simulator's MAC log
            names = set(table.column_names)
            self._writer = pq.ParquetWriter(create_partial(shell.mac_log), schema,
                                            use_dictionary=[c for c in DICTIONARY_COLUMNS + LIVE_DICTIONARY_COLUMNS
                                                            if c in names])
        self._writer.write_table(table.replace_schema_metadata(self._writer.schema.metadata))

    def close(self, written: bool):
        if self._writer is not None:
            self._writer.close()
            commit(self.shell.mac_log)
        else:
            _empty_mac(self.shell.mac_log)


def _offload_wanted(queue_kind: str) -> bool:
    """Whether the cell opens its TUN devices for offload (GSO super-packets, queued whole and
    served segment by segment by the link core; see docs/replay.md): as the link shells, unless
    ``AIRLINK_OFFLOAD=0`` or the C packet path is off or not built, and not for a queue that
    decides per packet (CoDel, PIE, L4S), which is fed packets of one segment."""
    return offload_wanted() and _cellpath() is not None and queue_kind not in PER_PACKET


def _cellpath():
    """The C per-packet path (:mod:`airlink.replay._cellpath`), or None when not built or
    ``AIRLINK_PURE_PYTHON=1`` (as the link shells: the Python loop, for comparisons)."""
    if env_flag("AIRLINK_PURE_PYTHON", False):
        return None
    try:
        from . import _cellpath
    except ImportError:
        return None
    return _cellpath


class _LiveCell:
    """The real-time loop of one run (state and counters); see :class:`CellShell`.

    Packets move in C (:mod:`airlink.replay._cellpath`, with the GIL released between TTIs;
    every queue of :mod:`airlink.replay.queues`, in the C link core), or without the C module
    in its Python twin (:class:`airlink.replay.cell_pypath.PyCellPath`); one loop
    (:meth:`loop`) and one :meth:`_tti` drive either."""

    def __init__(self, shell: CellShell, radio, feed, outer, namespaces, cmdline, vnet: int = 0):
        self.shell, self.radio, self.feed = shell, radio, feed
        self.outer_fd = outer.fd
        self.n = n = shell.n_users
        self.inner_fds = [ns.inner_fd for ns in namespaces]
        self.pidfds = {ns.pidfd: i for i, ns in enumerate(namespaces)}
        self.namespaces = namespaces
        self._commands_started = False
        self.started = False
        self.queues = [make_queue(shell.queue_kind, _ue_queue_args(shell.queue_args, u)) for u in range(n)]
        self.carry = np.zeros(n)
        self._backlog = np.zeros(n)
        self._budgets = np.zeros(n, np.int64)
        net = ipaddress.ip_network(outer.block)
        parts = [ipaddress.ip_network(b) for b in (ns.block for ns in namespaces)]
        self.net_base = int(net.network_address)
        self.net_mask = int(net.netmask)
        self.part_shift = 32 - parts[0].prefixlen
        self.tti_ns = shell.tti * 10**9
        self._tti_num, self._tti_den = self.tti_ns.numerator, self.tti_ns.denominator
        self.uplinks = []
        self.down_logs = [None] * n
        self.wall_start_ns = time.time_ns()
        cp = _cellpath()
        q0 = self.queues[0]
        self._logs = shell.log_dir is not None
        self.compiled_path = cp is not None
        # the TTIs decided in C by the compiled step, or in Python (see decide_and_serve)
        self.compiled_step = _why_python_step(shell.scheduler, cp is not None, shell.measured) is None
        if cp is not None:
            kind, packets, nbytes, _aqm = core_parameters(q0)
            self.path = cp.Cell(self.outer_fd, self.inner_fds, self.net_base, self.net_mask, self.part_shift,
                                kind, packets, nbytes, log=self._logs, rescue_ns=shell.rescue_ns,
                                vnet=vnet, writer=shell.writer_thread)
            self.writer = bool(self.path.writer)
            for u, q in enumerate(self.queues):     # each UE's queue with its own coins
                self.path.set_aqm(u, core_parameters(q)[3])
        else:
            self.writer = False
            self.path = PyCellPath(self.outer_fd, self.inner_fds, self.net_base, self.net_mask, self.part_shift,
                                   self.queues, log=self._logs)
        if shell.log_dir is not None:
            from airlink.traces import LinkLogWriter
            shell.log_dir.mkdir(parents=True, exist_ok=True)
            self.down_logs = [LinkLogWriter(shell.log_dir / f"ue{i + 1}.down.log", direction="downlink",
                                            trace=f"cell {shell.cfg['preset']} {shell.cfg['scheduler']}",
                                            queue=q0.describe(), base_ms=self.wall_start_ns // 1_000_000,
                                            command=cmdline, tool="airlink cell") for i in range(n)]
        self._event_log = EventLogThread(name="airlink-cell-log") if self._logs else None
        # the cell's frame: the grid every TTI boundary lies on, the constrained uplinks'
        # from now and the downlink's once the clock starts (see _start)
        self.frame_ns = start = time.monotonic_ns()
        for i in range(n):
            if shell.uplink is None:
                self.uplinks.append(Stage())
                continue
            cap, tti, name = shell.uplink[i]
            log = None
            if shell.log_dir is not None:
                from airlink.traces import LinkLogWriter
                log = LinkLogWriter(shell.log_dir / f"ue{i + 1}.up.log", direction="uplink", trace=name,
                                    queue="infinite", base_ms=self.wall_start_ns // 1_000_000,
                                    command=cmdline, tool="airlink cell")
            self.uplinks.append(LinkStage(cap, tti, queue=make_queue("infinite"), start_ns=start, log=log))
            # the stage checked the trace; the packet path serves it, on the same grid
            tti_ns = self.uplinks[-1].server._tti_ns
            self.path.set_uplink(i, np.ascontiguousarray(cap, dtype=np.float64), tti_ns.numerator,
                                 tti_ns.denominator, start)
        # the constrained uplinks' logs
        self._up_logs = self._logs and shell.uplink is not None
        self.ttis = 0
        self.late = 0
        self.max_late_ns = 0
        self.slot = None
        self._step_blocks = {}          # per radio slot: (address, block) of the compiled step
        self._next = None               # the next chunk, taken from the radio process early
        self._tried_next = False        # ... once per chunk, halfway through it
        self.rows = 0
        # the first chunk of radio inputs exists before any clock runs
        self._first = feed.next_chunk(counted=False)
        if self.compiled_step:      # every slot's step block, before any clock runs
            for j, s in enumerate(feed.slots):
                self._step_blocks[j] = radio.live_step(s.inputs(0, feed.rows), s.out, s.live["backlog_seen_bytes"])

    # -- the TTI -------------------------------------------------------------------------------
    def _new_chunk(self, chunk):
        self.slot, self.inp, self.out, self.live = chunk
        self.rows = 0
        self._tried_next = False
        if self.compiled_step:
            live = self.live
            # a slot's arrays stay in place (shared memory): its step block was made at the
            # start (making it took a few hundred microseconds of Python at every chunk's
            # start, which made TTIs late); the step reads rows 0 .. inp.n - 1 of it
            self._step_address, self._step_block = self._step_blocks[self.slot]
            self.path.set_chunk(self._step_block, self.inp.k0, self.out["served"],
                                *(live[name] for name, _ in LIVE_ARRAYS))

    def _release(self):
        """Hand the current chunk back to the radio process (its rows go to the MAC log)."""
        if self.slot is not None:
            self.feed.release(self.slot, self.rows, self.inp.k0, self.wall_tti0_ns)
            self.slot = None

    def _tti(self, k, now):
        """Decide and serve TTI ``k`` with the Python step (it ended at ``boundary(k + 1)``,
        handled at ``now``)."""
        i = k - self.inp.k0
        if i >= self.inp.n:
            self._release()
            self._new_chunk(self.feed.next_chunk())
            i = 0
        t_end = self._boundary(k + 1)
        late_ns = now - t_end
        decide_and_serve(self.path, self.radio, self.inp, i, self.out, self.live, self.carry, t_end,
                         backlog=self._backlog, budgets=self._budgets)
        live = self.live
        if self._logs:
            self._log_events()
        live["late"][i] = late_ns > self.shell.late_ns
        live["lateness_us"][i] = max(late_ns, 0) // 1000
        self.rows = i + 1
        self.ttis += 1
        if late_ns > self.shell.late_ns:
            self.late += 1
        if late_ns > self.max_late_ns:
            self.max_late_ns = late_ns

    def _run_compiled(self, k, wake_ns, running):
        """The compiled step: the C loop decides every TTI from ``k`` as it ends (to the
        chunk's end or the run's), moving packets in between, and comes back at a chunk's
        end, when a UE's command ended, at ``wake_ns`` or to have its logs drained.
        Returns ``(next k, index of the ended command in running or -1)``."""
        ended = None
        if k - self.inp.k0 >= self.inp.n:
            # the chunk that ended goes back to the radio process once the next one's first
            # TTI is decided: its messages then take nothing from the time before that decision
            ended = (self.slot, self.rows, self.inp.k0)
            chunk, self._next = self._next or self.feed.next_chunk(), None
            self._new_chunk(chunk)
            wake_ns = min(wake_ns, self._boundary(k + 1))
        # halfway through a chunk (once), the next one is taken if it is made already: a
        # message and views less to handle at the chunk's end, where TTIs wait for them
        half = self.inp.k0 + self.inp.n // 2
        if not self._tried_next and self.feed.more:
            if k > half:
                self._tried_next = True
                self._next = self.feed.next_chunk(wait=False)
            else:
                wake_ns = min(wake_ns, self._boundary(half + 1))
        stop = self.inp.k0 + self.inp.n
        if self.shell.n_tti is not None:
            stop = min(stop, self.shell.n_tti)
        path = self.path
        try:
            k, j = path.run(k, stop, wake_ns, running)
        finally:
            if ended is not None:
                self.feed.release(*ended, self.wall_tti0_ns)
        if self._logs:
            self._log_events()
        self.rows = k - self.inp.k0
        self.ttis, self.late, self.max_late_ns = path.ttis, path.late_ttis, path.max_lateness_ns
        return k, j

    def _log_events(self):
        """The packet path's logged events since the last call, handed to the logs' writer
        thread (the downlinks', and the constrained uplinks' through their stages' writers)."""
        for u, raw in enumerate(self.path.take_events()):
            if raw:
                self._event_log.put(self.down_logs[u], raw, self.base_mono)
        if self._up_logs:
            for u, raw in enumerate(self.path.take_events(True)):
                if raw:
                    st = self.uplinks[u]
                    self._event_log.put(st.log, raw, st.base_ns)

    def _boundary(self, k):
        """When TTI ``k`` starts (ns, exact: integer arithmetic on the TTI as a fraction)."""
        return self.start_ns + k * self._tti_num // self._tti_den

    # -- the loop ------------------------------------------------------------------------
    def loop(self, stop):
        """Move packets and run TTIs until every CMD has exited (then a short drain, TTIs
        still running, so that closing handshakes get through) or the duration is over
        (then CMDs get SIGTERM; the loop ends when they have exited)."""
        try:
            self._loop(stop)
        finally:
            # every queued TUN write is done (the writer joined) before the devices close
            self.path.close()
        if self.started:
            self._release()

    def _loop(self, stop):
        clock = time.monotonic_ns
        path = self.path
        running = list(self.pidfds)
        warmup = self.shell.warmup_bytes
        self.base_mono = clock()
        limit = self.shell.n_tti
        started = over = False
        drain_until = None
        drain_start = 0
        k = 0
        while True:
            now = clock()
            if started and not over:
                if not self.compiled_step:
                    k = self._run_due(k, now)
                if limit is not None and k >= limit:
                    over = True
                    path.set_uplink_slots(False)    # no TTI ends any more: packets go as they come
                    stop()              # the run's duration is over: CMDs get SIGTERM
            if not running and (over or drain_until is not None and (
                    now >= drain_until or now - max(path.last_packet_ns, drain_start) > DRAIN_QUIET_NS)):
                break
            if not started and self._may_start(warmup, running):
                started = self.started = self._start(clock())
                continue
            if started and not over:
                deadline = self._boundary(k + 1)
            else:
                deadline = now + (DRAIN_QUIET_NS if started else START_POLL_NS)
            if drain_until is not None:
                deadline = min(deadline, now + DRAIN_QUIET_NS)
            if started and not over and self.compiled_step:
                k, j = self._run_compiled(k, now + DRAIN_QUIET_NS if drain_until is not None else NEVER_NS,
                                          running)
            else:
                j = path.wait(deadline, running)
            if j >= 0:
                del running[j]
                if not running and drain_until is None:
                    drain_start = clock()
                    drain_until = drain_start + DRAIN_MAX_NS

    def _run_due(self, k, now):
        """Run every TTI that ended by ``now`` (up to the duration); the next TTI to run.
        Each TTI's lateness is taken when its own decision starts."""
        limit = self.shell.n_tti
        clock = time.monotonic_ns
        while self._boundary(k + 1) <= now and (limit is None or k < limit):
            self._tti(k, clock())
            k += 1
        return k

    def _start(self, now):
        """TTI 0 starts at the cell frame's first TTI boundary from now (less than a TTI
        away): the boundaries the constrained uplinks have been served on since the shell
        came up, so that an uplink TTI and a downlink TTI end together, as in a cell. The
        first chunk's inputs were made before. Packets that arrived (or were dropped) before
        count in TTI 0's row of the MAC log."""
        self._new_chunk(self._first)
        since = time.monotonic_ns() - self.frame_ns
        k0 = -(-since * self._tti_den // self._tti_num)          # ceil(since / TTI)
        self.start_ns = self.frame_ns + k0 * self._tti_num // self._tti_den
        if self.compiled_step:
            self.path.set_step(self._step_address, self.carry, self.start_ns, self._tti_num, self._tti_den,
                               self.shell.late_ns)
        # the MAC log's time of TTI 0
        self.wall_tti0_ns = time.time_ns() + (self.start_ns - time.monotonic_ns())
        if self.shell.uplink_slots:
            self.path.set_uplink_slots(True)        # the uplink on the TTIs' grid while they run
        return True

    def _may_start(self, warmup, running) -> bool:
        """Whether the TTI clock starts now: once every UE's command has been started (and
        every queue holds ``warmup`` bytes, when asked for)."""
        if not self._commands_started:
            alive = {self.pidfds[fd] for fd in running}
            self._commands_started = time.monotonic_ns() - self.base_mono > START_WAIT_NS or all(
                _command_started(ns.pid) for i, ns in enumerate(self.namespaces) if i in alive)
            if not self._commands_started:
                return False
        return warmup is None or self._all_backlogged(warmup)

    def _all_backlogged(self, warmup):
        self.path.backlog(self._backlog)
        return bool((self._backlog >= warmup).all())

    # -- the end ---------------------------------------------------------------------------
    def _ue_counters(self, u) -> tuple:
        """``(downlink, uplink)`` counters of UE ``u`` (0-based) for the stats."""
        c = self.path.ue_stats(u)
        up, st = c.pop("uplink"), self.uplinks[u]     # the stage the packet path stands in for
        if st.kind == "link":
            up = {"stage": "link", **up, "queue": st.queue.describe()}
        else:
            up = {"stage": st.kind, **{k: v for k, v in up.items() if k not in ("capacity_bytes", "ttis")}}
        return {**c, "queue": self.queues[u].describe()}, up

    def finish(self, statuses, *, cpu_s, page_faults, kernel) -> dict:
        now = time.monotonic_ns()
        if self._logs:
            self._log_events()
            self._event_log.close()
        for u in range(self.n):
            if self.down_logs[u] is not None:
                self.down_logs[u].close()
            self.uplinks[u].close(now)
        radio_cpu_s = self.feed.close()
        ues = []
        for u in range(self.n):
            down, up = self._ue_counters(u)
            ues.append({"ue": u + 1, "status": statuses[u], "downlink": down, "uplink": up, "kernel": kernel[u]})
        duration = (now - self.base_mono) / 1e9
        ttis = self.ttis
        cpu_s += radio_cpu_s
        return {"tool": "airlink cell", "preset": self.shell.cfg["preset"],
                "scheduler": self.shell.cfg["scheduler"], "seed": self.shell.cfg["seed"],
                "users": self.n, "tti_ms": float(self.shell.tti) * 1000, "status": max(statuses),
                "duration_s": duration, "cpu_s": cpu_s, "cpu_per_s": cpu_s / duration if duration > 0 else None,
                "page_faults": page_faults, "radio_cpu_s": radio_cpu_s, "radio_waits": self.feed.waits,
                "radio_wait_s": self.feed.wait_ns / 1e9, "packet_path": "C" if self.compiled_path else "Python",
                "scheduler_step": _step_description(self.compiled_step, self.shell.scheduler, self.compiled_path,
                                                    self.shell.measured),
                "loop_rescues": self.path.rescues, "tun_writer": "thread" if self.writer else "loop",
                "uplink_slots": self.shell.uplink_slots and self.shell.uplink is None,
                "ttis": ttis, "late_ttis": self.late, "late_fraction": self.late / ttis if ttis else 0.0,
                "late_after_us": self.shell.late_ns // 1000, "max_lateness_us": max(self.max_late_ns, 0) // 1000,
                "unroutable_packets": self.path.unroutable, "write_errors": self.path.write_errors, "ues": ues}


def decide_and_serve(path, radio, inp, i: int, out: dict, live: dict, carry: np.ndarray, t_end: int, *,
                     backlog=None, budgets=None) -> None:
    """Decide and serve one TTI with the Python step: the readable reference of the C loop's
    compiled step (replay/_cellpath.c, ``decide_tti``), which must do the same.

    The scheduler decides row ``i`` of the chunk ``inp`` (:meth:`airlink.sim.step.Radio.step`)
    with the live backlogs ``max(queued bytes - carry, 0)`` per UE (the bytes queued, less the
    fraction of a byte it already served), written to ``live["backlog_seen_bytes"][i]``; the
    whole bytes of what it served leave the queues at ``t_end`` and the fractions carry to the
    next TTI (:func:`airlink.replay.server.carry_budgets`); ``path.serve`` fills the rest of row
    ``i`` of ``live``. ``backlog``/``budgets``: scratch arrays (float64 / int64, one per UE).
    """
    n = len(carry)
    backlog = np.zeros(n) if backlog is None else backlog
    budgets = np.zeros(n, np.int64) if budgets is None else budgets
    path.backlog(backlog)
    np.maximum(backlog - carry, 0.0, out=backlog)
    row = {name: a[i:i + 1] for name, a in out.items()}
    radio.step(inp, i, i + 1, row, backlog=backlog)
    live["backlog_seen_bytes"][i] = backlog
    budgets[:] = carry_budgets(carry, out["served"][i])
    path.serve(budgets, live["backlog_bytes"][i], live["backlog_packets"][i], live["arrivals_bytes"][i],
               live["drops_packets"][i], live["drops_bytes"][i], live["marks_packets"][i], t_end)


def _why_python_step(scheduler, c_path: bool, measured=None):
    """Why the cell's TTIs would be decided by the Python step, or None (the compiled step).
    ``measured``: the recorded cell of ``--from-log``, whose other users as demand are
    scheduled by a radio of their own beside the live UEs (cell_fromlog.FromLogRadio.step)."""
    from airlink.sim import kernel
    if env_flag("AIRLINK_PYTHON_STEP", False):
        return "AIRLINK_PYTHON_STEP is set"
    if measured is not None and measured.demand is not None:
        return "the recorded cell's other users scheduled as demand"
    if getattr(scheduler, "kernel_id", None) is None:
        return "a scheduler class without a compiled twin"
    if not kernel.COMPILED:
        return "numba is not available"
    if not c_path:
        return "the Python packet path"
    return None


def _step_description(compiled: bool, scheduler, c_path: bool, measured=None) -> str:
    """Which step decided the TTIs, and why not the compiled one (``--stats``' scheduler_step)."""
    why = _why_python_step(scheduler, c_path, measured)
    return "compiled (called from the C loop)" if compiled else f"Python ({why})" if why else "Python"


def _empty_mac(path):
    """A MAC log with the columns and no rows (the clock never started)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from airlink.sim.step import MAC_COLUMNS
    cols = {"time": pa.array([], pa.timestamp("ns", tz="UTC")), "user": pa.array([], pa.string())}
    for name in MAC_COLUMNS + tuple(c for c in LIVE_COLUMNS if c not in MAC_COLUMNS):
        cols[name] = pa.array([], pa.float64())
    with atomic_path(path) as tmp:
        pq.write_table(pa.table(cols), tmp)
