"""The infer stage: NMI factor rankings of the run's own frames, computed by
:func:`airlink.inference.rank_factors` exactly as ``airlink infer nmi`` computes them.

Each analysis names a ``source``:

* ``mac`` - the simulator's ``mac.parquet`` as written, one user (``radio.user``);
* ``tcp`` - ``series-tcp.parquet``, written here: the busiest TCP direction of the collect
  stage's ``tcp`` frame on a regular grid, joined by real timestamps
  (:func:`airlink.collectors.timegrid.to_grid`) with the link shell's per-TTI log (capacity
  offered as ``capacity_bps``, queue ``backlog_bytes``). Without that log there is no clock
  shared by the capture and the trace, so ``capacity_bps`` is left out and the analysis
  says so.

Every entry of ``nmi.json`` carries the ``airlink infer nmi`` command line that reproduces
its table from the run folder, and ``significant`` (``p_value < alpha``); the stage's note
names a factor only when it is significant.
"""
from __future__ import annotations

import shlex
from pathlib import Path

import numpy as np

from airlink import rundir
from airlink.experiment.context import RunContext
from airlink.experiment.spec import (EXPERIMENT_MAX_LAG, MAC_MAX_LAG, MAC_PAIRS_PER_CELL, MAC_RESOLUTIONS,
                                     RESOLUTION)
from airlink.inference.frames import user_order
from airlink.traces import AirlinkError, parse_duration
from airlink.core.parquetframe import read_parquet_frame

TCP_SERIES = "series-tcp.parquet"
MAC_FACTORS = ("backlog_bytes", "sinr_db", "harq_retransmissions")
TCP_FACTORS = {"goodput_bps": ("capacity_bps", "rtt_ms", "inflight_packets", "backlog_bytes"),
               "rtt_ms": ("capacity_bps", "inflight_packets", "backlog_bytes")}


def nmi_table(paths, *, target: str, factors, resolution, max_lag, bins: int, surrogates: int,
              bootstrap: int, user=None, seed: int = 0, curves: bool = False) -> tuple:
    """(the gridded frame, the factor table) of ``airlink infer nmi PATHS --target T --factor F
    ... --resolution R --max-lag L --bins B --surrogates S --bootstrap N [--user U] --seed K``:
    frames read and gridded by :func:`airlink.inference.read_frames`, ranked by
    :func:`airlink.inference.rank_factors`."""
    from airlink import inference as inf
    frame = inf.read_frames(paths, resolution=resolution, columns=[target, *factors])
    return frame, inf.rank_factors(frame, target=target, factors=list(factors), max_lag=max_lag,
                                   bins=bins, surrogates=surrogates, bootstrap=bootstrap, user=user,
                                   seed=seed, curves=curves)


def nmi_command(paths, *, target: str, factors, resolution, max_lag, bins: int, surrogates: int,
                bootstrap: int, user=None, seed: int = 0) -> str:
    """The ``airlink infer nmi`` command line equal to :func:`nmi_table` with these options."""
    argv = ["airlink", "infer", "nmi", *map(str, paths), "--target", target]
    for f in factors:
        argv += ["--factor", f]
    argv += ["--resolution", str(resolution), "--max-lag", str(max_lag), "--bins", str(bins),
             "--surrogates", str(surrogates), "--bootstrap", str(bootstrap), "--seed", str(seed)]
    if user is not None:
        argv += ["--user", str(user)]
    return " ".join(shlex.quote(a) for a in argv)


def mac_grid(path, bins: int) -> str:
    """The default ranking's grid for the MAC log at ``path``: the coarsest of
    :data:`~airlink.experiment.spec.MAC_RESOLUTIONS` at which the log's span gives at least
    ``MAC_PAIRS_PER_CELL * bins**2`` steps, else the finest. The span is ``max - min`` of its
    ``time`` column (Parquet statistics where every row group has them)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq
    f = pq.ParquetFile(path)
    j = f.schema_arrow.get_field_index("time")
    stats = [f.metadata.row_group(g).column(j).statistics for g in range(f.metadata.num_row_groups)]
    if stats and all(st is not None and st.has_min_max for st in stats):
        lo, hi = min(st.min for st in stats), max(st.max for st in stats)
    else:
        t = f.read(columns=["time"]).column("time")
        lo, hi = pc.min(t).as_py(), pc.max(t).as_py()
    if lo is None:
        return MAC_RESOLUTIONS[-1]
    span_s = (hi - lo).total_seconds() if hasattr(hi - lo, "total_seconds") else float(hi - lo) / 1e9
    need = MAC_PAIRS_PER_CELL * bins * bins
    for r in MAC_RESOLUTIONS:
        if int(span_s / float(parse_duration(r))) + 1 >= need:
            return r
    return MAC_RESOLUTIONS[-1]


def _finite(v):
    return None if v is None or not np.isfinite(v) else float(v)


class InferStage:
    """The infer stage (stage 4) of a run: ``InferStage(ctx).run(i)`` -> ``(status, note)``.
    Reads from ``ctx`` (:class:`~airlink.experiment.context.RunContext`) the experiment, the
    run folder's frames and the radio stage's ``user``; writes ``nmi.json`` (and a cell's
    fairness and jitter) through ``ctx.folder``."""

    def __init__(self, ctx: RunContext):
        self.ctx = ctx
        self._tcp_flow = None      # (flow, direction, flows in the capture) of the tcp analysis

    def run(self, i):
        cfg = self.ctx.exp.model.infer
        if not cfg.enabled:
            self.ctx.progress.stage(i, "infer", "turned off")
            return "skipped", "turned off"
        analyses = [a.model_dump() for a in cfg.nmi] if cfg.nmi else self._default_analyses(cfg.bins)
        from airlink.experiment.cellrun import cell_mac_path, write_cell_reports
        cell_note = None
        if cell_mac_path(self.ctx.out) is not None:
            try:
                cell_note = write_cell_reports(self.ctx.folder, self.ctx.out)
            except AirlinkError as exc:
                self.ctx.note(f"inference: fairness and jitter of the cell: {exc}")
        if not analyses and cell_note:
            return "done", cell_note
        if not analyses:
            self.ctx.progress.stage(i, "infer", "no series to analyse")
            return "skipped", "no mac.parquet or tcp.parquet to analyse"
        self.ctx.progress.stage(i, "infer", f"{len(analyses)} NMI factor ranking(s), {cfg.surrogates} surrogates each")
        done, notes, skipped = [], [], []
        for a in analyses:
            if a["source"] == "mac" and self._mac_log() is None:
                # e.g. `airlink run --trace T`: a replayed trace has no MAC log to analyse
                skipped.append(f"{a['source']}/{a['target']}: skipped, this run has no MAC log (a trace "
                               f"replay has none; the radio stage simulates mac.parquet, a cell writes "
                               f"cell-mac.parquet)")
                continue
            try:
                done.append(self._analyse(a, cfg))
            except AirlinkError as exc:
                notes.append(f"{a['source']}/{a['target']}: {exc}")
        for n in skipped:
            self.ctx.note(f"inference: {n}")
        if not done and not notes:
            return "skipped", "; ".join(skipped)
        self.ctx.folder.write_json("nmi.json", {"analyses": done}, stage="infer")
        for n in notes:
            self.ctx.note(f"inference: {n}")
        found = []
        for a in done:
            sig = [f["factor"] for f in a["factors"] if f["significant"]]
            if sig:
                found.append(f"{a['target']}<-{sig[0]}")
            elif a["factors"] and all(f["cannot_tell"] for f in a["factors"]):
                found.append(f"{a['target']}: cannot tell")     # no factor had the pairs for an answer
            else:
                found.append(f"{a['target']}: no significant factor")
        note = ", ".join(found) or "; ".join(notes)
        return ("done" if done else "failed"), (f"{note}; {cell_note}" if cell_note else note)

    def _mac_log(self) -> Path | None:
        """The run's MAC log: the simulator's (radio stage) or the live cell's."""
        found = rundir.find(self.ctx.out, "mac")
        return found[0] if found else None

    def _default_analyses(self, bins: int) -> list:
        out = []
        mac = self._mac_log()
        if mac is not None:
            import pyarrow.parquet as pq
            cols = set(pq.read_schema(mac).names)
            factors = [c for c in MAC_FACTORS if c in cols]
            if "assigned_rate_bps" in cols and factors:
                resolution = mac_grid(mac, bins)
                # the replayed user of a simulated cell; every UE of a live cell
                users = [None]
                if self.ctx.exp.model.cell is not None:
                    users = sorted(pq.read_table(mac, columns=["user"]).column("user").unique().to_pylist(),
                                   key=user_order)
                for u in users:
                    out.append({"source": "mac", "target": "assigned_rate_bps", "factors": factors,
                                "resolution": resolution, "max_lag": MAC_MAX_LAG,
                                **({"user": str(u)} if u is not None else {})})
        if rundir.find(self.ctx.out, "tcp"):
            res = self.ctx.exp.model.collect.resolution
            for target, factors in TCP_FACTORS.items():
                out.append({"source": "tcp", "target": target, "factors": list(factors),
                            "resolution": res, "max_lag": EXPERIMENT_MAX_LAG})
        return out

    def _analyse(self, a: dict, cfg) -> dict:
        res = a.get("resolution") or RESOLUTION
        res_s = float(parse_duration(str(res)))
        target = a["target"]
        if a["source"] == "mac":
            path, user = self._mac_log(), (a.get("user") or self.ctx.user)
            if path is None:
                raise AirlinkError("no MAC log (the radio stage simulates mac.parquet, a cell writes "
                                   "cell-mac.parquet)")
        else:
            path, user = self._tcp_series(res), None
        import pyarrow.parquet as pq
        cols = set(pq.read_schema(path).names)
        if target not in cols:
            raise AirlinkError(f"{path.name}: no column {target!r} (have {', '.join(sorted(cols))})")
        factors = [f for f in a["factors"] if f in cols]
        skipped = [f for f in a["factors"] if f not in cols]
        if not factors:
            raise AirlinkError(f"{path.name}: none of the factors {', '.join(a['factors'])} is a column")
        rel = [path.relative_to(self.ctx.out)]
        max_lag = a["max_lag"]
        if not isinstance(max_lag, str):       # a bare number in an experiment file is seconds
            max_lag = f"{max_lag}s"
        opts = dict(target=target, factors=factors, resolution=res, max_lag=max_lag,
                    bins=int(a.get("bins") or cfg.bins), surrogates=cfg.surrogates,
                    bootstrap=cfg.bootstrap, user=user, seed=int(a.get("seed") or cfg.seed))
        _, table = nmi_table([path], **opts, curves=True)
        D = int(table.attrs["max_lag"])
        entries = []
        for r in table.to_dict(orient="records"):
            p = _finite(r["p_value"])
            entries.append({"factor": r["factor"], "peak_nmi": float(r["peak_nmi"]), "lag": int(r["lag"]),
                            "lag_s": _finite(r["lag_s"]), "at_edge": bool(r["at_edge"]), "p_value": p,
                            "significant": bool(p is not None and p < cfg.alpha and not r["cannot_tell"]),
                            "cannot_tell": r["cannot_tell"] or None, "min_pairs": int(r["min_pairs"]),
                            "threshold": _finite(r["threshold"]), "bias_corrected": _finite(r["bias_corrected"]),
                            "ci": [_finite(r["ci_low"]), _finite(r["ci_high"])], "n_pairs": int(r["n_pairs"]),
                            "surrogates": cfg.surrogates, "curve": table.attrs["curves"][r["factor"]]})
        note = f"not columns of {path.name}: {', '.join(skipped)}" if skipped else ""
        if a["source"] == "tcp" and "capacity_bps" in skipped:
            note += (" (the busiest flow's UE is not known, so the cell's MAC log is not joined)"
                     if self.ctx.exp.model.cell is not None else
                     " (no link log: the capture and the trace share no clock, so capacity is left out)")
        samples = int(table["n_pairs"].max()) if len(table) else 0
        if a["source"] == "tcp":
            covers = (f"TCP flow {self._tcp_flow[0]} ({self._tcp_flow[1]}), the busiest direction of "
                      f"{self._tcp_flow[2]} flow(s); the others are not analysed") if self._tcp_flow else "TCP"
        else:
            covers = f"user {user}" if user is not None else "the MAC log's only user"
        covers += f"; {samples} sample pairs of {res}"
        return {"source": a["source"], "frame": rel[0].as_posix(), "target": target, "user": user, "covers": covers,
                "resolution_s": res_s, "max_lag_samples": D, "bins": opts["bins"], "alpha": cfg.alpha,
                "samples": int(table["n_pairs"].max()) if len(table) else 0, "factors": entries,
                "note": note, "command": nmi_command(rel, **opts)}

    def _tcp_series(self, resolution) -> Path:
        """Write ``series-tcp.parquet`` (module notes) and return its path."""
        from airlink.collectors.timegrid import to_grid
        tcp_paths = rundir.find(self.ctx.out, "tcp")
        if not tcp_paths:
            raise AirlinkError("no tcp frame (the collect stage writes tcp.parquet)")
        from airlink.report import main_direction
        rows = main_direction(read_parquet_frame(tcp_paths[0]))
        if rows is None or not len(rows):
            raise AirlinkError(f"{tcp_paths[0].name}: no TCP direction with goodput or throughput")
        flow, direction = rows["flow"].iloc[0], rows["direction"].iloc[0]
        all_flows = read_parquet_frame(tcp_paths[0], columns=["flow"])["flow"].nunique()
        self._tcp_flow = (int(flow), str(direction), int(all_flows))
        rows = rows.drop(columns=["flow", "direction"])
        frame = to_grid(rows.select_dtypes(exclude="object"), resolution=resolution,
                        source=tcp_paths[0].name)
        sources = [tcp_paths[0].name]
        link, lk = self.ctx.out / "link-downlink.parquet", None
        if link.exists():
            lk = read_parquet_frame(link)
        else:
            link, lk = self._cell_rows_of_flow(flow)
        if lk is not None:
            keep = [c for c in ("capacity_bytes", "backlog_bytes") if c in lk.columns]
            if keep:
                lk = lk[["time", *keep]] if "time" in lk.columns else lk[keep]
                grid = to_grid(lk, resolution=resolution, how={"capacity_bytes": "rate", "backlog_bytes": "mean"},
                               source=link.name)
                frame = frame.merge(grid, on="time", how="left")
                sources.append(link.name)
        return self.ctx.folder.write_frame(TCP_SERIES, frame, kind="series", stage="infer",
                                       provenance={"sources": sources, "flow": int(flow), "direction": str(direction),
                                                   "resolution": str(resolution), "grid": "collectors.timegrid.to_grid"})

    def _cell_rows_of_flow(self, flow) -> tuple:
        """(the cell's MAC log path, its rows of the UE that ran ``flow``), or (None, None):
        in a cell run the flow's UE is the one whose application's local address and port is
        an end of the flow (``flows.parquet`` of the same capture; ``run.json``). The MAC log
        and the capture share the real clock, so they join by timestamp like a link log."""
        from airlink.experiment.cellrun import cell_mac_path
        mac = cell_mac_path(self.ctx.out)
        flows_paths = rundir.find(self.ctx.out, "flows")
        if mac is None or not flows_paths:
            return None, None
        flows = read_parquet_frame(flows_paths[0])
        row = flows[flows["flow"] == flow]
        if not len(row):
            return None, None
        f = row.iloc[0]
        ends = {f"{f['src']}:{f['sport']}", f"{f['dst']}:{f['dport']}"}
        ue = next((a["ue"] for a in self.ctx.info.get("applications", []) if a.get("local") in ends), None)
        if ue is None:
            return None, None
        rows = read_parquet_frame(mac, filters=[("user", "==", str(ue))])
        return mac, rows.drop(columns=["user"])
