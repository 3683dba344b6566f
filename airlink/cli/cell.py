"""``airlink cell [options] -- CMD [ARGS]``: several UEs share one live scheduled downlink."""
from __future__ import annotations

from pathlib import Path

from airlink.cli._common import add_parser, bounded, with_unit
from airlink.cli.link import QUEUES
from airlink.core import bounds as B
from airlink.core.units import parse_duration, parse_size, parse_tti

#: the modes of airlink.replay.cell.RPS_MODES, named here so that building the parser imports
#: no numpy (tests/replay/test_shell_split.py checks they agree)
RPS_MODES = ("off", "all", "pin")

EXAMPLE = """\
sudo airlink cell --preset imt-advanced --scheduler pf --users 4 --seed 1 \\
     --queue droptail --queue-args packets=500 --mac-log mac.parquet --log-dir logs/ \\
     -- sh -c 'iperf3 -c $AIRLINK_BASE -p $((5200 + AIRLINK_UE)) -R -t 10'
airlink infer nmi mac.parquet --target assigned_rate_bps --factor backlog_bytes
# every UE's queue is CoDel, CE-marking ECN-capable packets (marks per UE in --stats):
sudo airlink cell --preset imt-advanced --users 4 --queue codel --ecn --stats stats.json -- ./download.sh
# L4S (DualPI2) per UE: ECT(1) packets marked above a 1 ms sojourn, classic traffic by PI2:
sudo airlink cell --preset imt-advanced --users 4 --queue l4s --queue-args step=1ms -- ./download.sh
sudo airlink delay 20 airlink cell --preset 1xrtt --scheduler backlog --users 2 -- ./download.sh
# a 5G NR FR2 cell (120 kHz, 0.125 ms slots; the TTIs are decided in C by the compiled step):
sudo airlink cell --preset nr-fr2 --users 4 --realtime --stats stats.json -- ./download.sh
# a measured 5G cell: the other users' recorded PRBs first, 2 live UEs on what is left,
# UE channels following RNTI 23938's recorded MCS
sudo airlink cell --from-log cell.csv --preset nr-tmobile-10mhz --log-start 68.5s \\
     --follow-rnti 23938 --users 2 --duration 3s --mac-log mac.parquet -- ./download.sh
airlink infer cell mac.parquet
# scheduler-driven replay of UE 1 of a recorded airlink cell: UE 1's recorded channel, the
# other UEs' recorded subchannels per TTI taken first, PF serving the live backlog
sudo airlink cell --preset quick --mac-log rec.parquet -- ./background.sh     # the recording
sudo airlink cell --from-log rec.parquet --preset quick --follow-rnti 1 --users 1 -- ./workload.sh
# the same with the other UEs scheduled beside it from their recorded arrivals (PF reacts)
sudo airlink cell --from-log rec.parquet --log-others demand --preset quick --follow-rnti 1 --users 1 -- ./w.sh"""


def register(sub):
    p = add_parser(
        sub, "cell", "run a command in each of several UEs that share one live scheduled downlink",
        "Run CMD once in each of N UEs, every UE in its own network namespace with its own "
        "address ($AIRLINK_UE_ADDRESS; $AIRLINK_UE is 1..N, $AIRLINK_BASE the address of the "
        "outside). Downlink packets to a UE wait in its base-station queue; every TTI the "
        "simulator's scheduler (the same code as `airlink simulate`: fading channel with CSI "
        "delay, HARQ, link adaptation) decides from the channel and the live queue backlogs how "
        "many bytes each UE receives, so TCP's backlog feeds back into the scheduler. Writes a "
        "per-TTI MAC log in the simulator's mac columns (--mac-log, readable by `airlink infer`) "
        "and Mahimahi-format per-UE logs (--log-dir). A TTI handled late is counted and "
        "reported, never stretched. Needs root; under sudo CMD runs as you. The exit status is "
        "the worst of the commands'. Nests inside `airlink delay` / `airlink loss`.",
        EXAMPLE)
    p.add_argument("--preset", help="evdo, imt-advanced, hsdpa, egprs, 1xrtt, nr-fr1, nr-fr2, nr-tmobile-10mhz, "
                                    "quick (default quick) or a YAML file")
    p.add_argument("--config", type=Path, action="append", default=[],
                   help="YAML file of parameter overrides (repeatable; later wins)")
    p.add_argument("--scheduler", help="rr, maxcir, pf, lambda, backlog, mcpfs, or package.module:Class")
    bounded(p, "--users", bound=B.CELL_UES, help="number of UEs (default: the preset's)")
    bounded(p, "--seed", bound=B.SEED, default=0, help="radio seed: channel and draws as `airlink simulate`'s")
    bounded(p, "--tti", bound=B.TTI, parse=parse_tti, keep_text=True,
            help="TTI length, 0.125 to 10 ms (default: the preset's); under 0.5 ms only with the "
                 "compiled step (a built-in scheduler)")
    bounded(p, "--duration", bound=B.SIM_DURATION, parse=with_unit(parse_duration, "30s or 500ms"), keep_text=True,
            help="stop after this long (e.g. 30s); default: when every CMD exited")
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE",
                   help="any preset parameter, value in YAML syntax (e.g. --set n_subchannels=50); "
                        "see airlink.sim.config.CellConfig")
    p.add_argument("--queue", choices=QUEUES, default="droptail",
                   help="each UE's base-station queue (droptail)")
    p.add_argument("--queue-args", metavar="ARGS",
                   help="e.g. packets=100,bytes=150000 (droptail/drophead), target=5ms,interval=100ms "
                        "(codel), qdelay_ref=15ms,max_burst=150ms (pie), step=1ms,target=15ms (l4s); "
                        "without packets= or bytes= the buffer holds the preset's buffer_packets packets")
    p.add_argument("--ecn", action="store_true",
                   help="each UE's queue CE-marks ECN-capable packets instead of dropping them (codel, "
                        "pie; a full buffer still drops; l4s always marks); marks per UE in --stats, per "
                        "TTI in the MAC log (marks_packets) and as 'm' lines in --log-dir's logs")
    p.add_argument("--uplink", metavar="RATE_OR_TRACE",
                   help="per-UE uplink: a constant rate (2Mbit/s) or a capacity trace; "
                        "default unconstrained")
    p.add_argument("--mac-log", type=Path, metavar="FILE", help="per-TTI Parquet MAC log of the live run")
    p.add_argument("--log-dir", type=Path, metavar="DIR", help="Mahimahi-format logs ue<N>.down.log (and .up.log)")
    bounded(p, "--warmup", metavar="BYTES", bound=B.WARMUP_BYTES, parse=parse_size, keep_text=True,
            help="start the TTI clock only when every UE has this much queued (e.g. 300KB)")
    bounded(p, "--late-after", metavar="DURATION", bound=B.WINDOW, keep_text=True,
            parse=lambda text: parse_duration(text, "ms"),
            help="lateness from which a TTI counts as late (default half a TTI)")
    p.add_argument("--realtime", action="store_true",
                   help="run the shell's TTI loop under the real-time policy SCHED_RR instead of "
                        "niceness -10 (fewer late TTIs on a busy machine; takes CPU from everything else)")
    p.add_argument("--rps", choices=RPS_MODES, default="off",
                   help="Receive Packet Steering on the UEs' devices: a packet the loop writes to a UE "
                        "is then processed (the UE's IP and TCP receive, waking its application) on "
                        "another CPU instead of inside the loop's write. off (default); all: each UE's "
                        "flows hashed over every CPU; pin: the loop stays on its CPU and the UEs' "
                        "receiving runs on the others (with --realtime: fewer late TTIs at 0.125 ms "
                        "in docs/cell.md's runs, more without it; the work moves to the other CPUs, "
                        "it does not go away). No effect on one CPU")
    p.add_argument("--from-log", type=Path, metavar="LOG",
                   help="replay a recorded cell, an NR-Scope CSV or an airlink MAC log (--mac-log of "
                        "airlink cell, mac.parquet of airlink simulate): the other users' recorded "
                        "PRBs/subchannels per slot are taken first (cross-traffic, in the MAC log as "
                        "cross_traffic rows), the UEs get what is left; needs a preset with the log's slot "
                        "length and PRBs (NR-Scope: e.g. nr-tmobile-10mhz; a MAC log: the recorded cell's)")
    p.add_argument("--follow-rnti", metavar="RNTI[,RNTI...]",
                   help="with --from-log: the recorded RNTI (a MAC log's UE number) whose MCS each UE's "
                        "channel follows (one for all, or one per UE; 'model' = the preset's channel "
                        "model); default the busiest")
    p.add_argument("--log-direction", choices=["downlink", "uplink"], default="downlink",
                   help="with --from-log: whose DCIs are the cross-traffic (downlink)")
    p.add_argument("--log-start", metavar="DURATION",
                   help="with --from-log: start this far into the log (e.g. 68.5s; default its first slot)")
    p.add_argument("--log-others", choices=["share", "demand", "flows", "mixed"], default="share",
                   help="with --from-log: the other users' recorded PRBs are taken first (share), or, from "
                        "an airlink MAC log, they are simulated UEs scheduled beside the live ones, fed by "
                        "their recorded arrivals and channels (demand) or by their recorded on-periods, "
                        "each period's bytes at once and a UE with data throughout as a full buffer (flows), "
                        "or a UE with data throughout as a full buffer and the others by their recorded "
                        "arrivals (mixed)")
    p.add_argument("--log-channel", choices=["flat", "selective"],
                   help="with --from-log: each replayed UE's channel is its recorded wideband SINR spread "
                        "over the subchannels by the preset's fading model (selective, the default where "
                        "the log has it: an airlink MAC log with sinr_db), or its recorded MCS row on every "
                        "subchannel (flat; an NR-Scope log always). Selective replays were closer to the "
                        "live cell (docs/replay.md)")
    p.add_argument("--stats", type=Path, metavar="FILE", help="write a JSON summary (late TTIs, per-UE counters)")
    p.set_defaults(func=run, cmd=[])


def run(args) -> int:
    from airlink.cli._common import parameter_sets
    from airlink.replay.cell import CellShell
    from airlink.sim.engine import read_config_files
    from airlink.core.errors import AirlinkError
    if args.from_log is None:
        for flag, value in (("--follow-rnti", args.follow_rnti), ("--log-start", args.log_start),
                            ("--log-direction", None if args.log_direction == "downlink" else args.log_direction),
                            ("--log-others", None if args.log_others == "share" else args.log_others),
                            ("--log-channel", args.log_channel)):
            if value is not None:
                raise AirlinkError(f"{flag} needs --from-log")
    preset, overrides = read_config_files(args.config, args.preset)
    overrides.update(parameter_sets(args.sets))
    shell = CellShell(preset=preset, scheduler=args.scheduler, users=args.users, seed=args.seed,
                      tti=args.tti, duration=args.duration, overrides=overrides, queue=args.queue,
                      queue_args=None if args.queue == "infinite" else args.queue_args, ecn=args.ecn,
                      uplink=args.uplink, mac_log=args.mac_log, log_dir=args.log_dir,
                      warmup_bytes=args.warmup, late_after=args.late_after, realtime=args.realtime,
                      from_log=args.from_log, follow_rnti=args.follow_rnti, log_direction=args.log_direction,
                      log_start=args.log_start, log_others=args.log_others,
                      log_channel=args.log_channel or "selective", rps=args.rps)
    status = shell.run(args.cmd or None, stats_path=args.stats)
    s = shell.last_stats
    if s is not None and s["ttis"]:
        import sys
        print(f"airlink cell: {s['ttis']} TTIs, {s['late_ttis']} late ({100 * s['late_fraction']:.3f} %), "
              f"shell CPU {s['cpu_per_s']:.2f} s per s", file=sys.stderr)
    return status
