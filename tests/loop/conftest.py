"""Fixtures for the loop tests: a run folder with every kind of artifact, made here.

The synthetic folder holds small frames of the schema kinds in airlink.core.schema
(capacity Trace, mac, packets, flows, tcp), a summary.json, an nmi.json, a Mahimahi link log,
the experiment file and versions, so that every report section has its inputs without
needing the simulator, collectors or inference packages.
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest


def _utc(seconds):
    return pd.to_datetime(np.asarray(seconds, dtype=np.float64) * 1e9, unit="ns", utc=True)


def make_synthetic_run(outdir, *, seed: int = 1, duration_s: float = 10.0):
    """Write a complete synthetic run folder; returns a dict of what it holds."""
    from airlink.traces import Trace, validate
    rng = np.random.default_rng(seed)
    outdir.mkdir(parents=True, exist_ok=True)
    n_users, tti_s = 3, 0.001
    n = int(duration_s / tti_s)
    # capacity: bytes per 1 ms TTI, user 1 around 12 Mbit/s with slow fading
    fade = 1 + 0.5 * np.sin(np.arange(n)[:, None] * 2 * np.pi / 3000 + np.arange(n_users))
    cap = np.maximum(0, 1500 * fade * rng.uniform(0.5, 1.5, (n, n_users)))
    Trace(cap, "1ms", meta={"source": "synthetic", "scheduler": "pf", "seed": seed}) \
        .write_parquet(outdir / "capacity.parquet")
    # mac: one row per TTI and user, served when the user is chosen
    chosen = rng.integers(0, n_users, n)
    t = np.repeat(np.arange(n) * tti_s, n_users)
    users = np.tile(np.arange(1, n_users + 1).astype(str), n)
    served = np.where(np.tile(np.arange(n_users), n) == np.repeat(chosen, n_users), cap.ravel(), 0.0)
    backlog = np.abs(np.cumsum(rng.normal(0, 500, n * n_users))) + 1000
    mac = pd.DataFrame({"time": _utc(t), "user": users, "served_bytes": served,
                        "backlog_bytes": backlog, "backlog_packets": backlog // 1500,
                        "sinr_db": rng.normal(10, 3, n * n_users), "mcs": rng.integers(0, 28, n * n_users),
                        "assigned_rate_bps": served * 8 / tti_s})
    validate(mac, "mac")
    mac.to_parquet(outdir / "mac.parquet")
    thr = [float(served[users == str(u)].sum() * 8 / duration_s / 1e6) for u in range(1, n_users + 1)]
    summary = {"aggregate_throughput_mbps": sum(thr), "jain_index": 0.98, "fairness_gap": 0.1,
               "resource_fraction_min_max_ratio": 0.9,
               "users": [{"user": str(u), "throughput_mbps": thr[u - 1], "selection_ratio": 1 / 3,
                          "resource_fraction": 1 / 3, "active_time_ratio": 1.0,
                          "retransmission_ratio": 0.01, "gap_mean_ms": 3.0, "gap_std_ms": 2.0,
                          "gap_cov": 0.66, "gap_max_ms": 20.0} for u in range(1, n_users + 1)]}
    (outdir / "summary.json").write_text(json.dumps(summary))
    # packets: a bulk download 10.0.0.1:5001 -> 10.0.0.2:40000 with ACKs and 3 retransmissions
    mss, n_seg = 1448, 4000
    ts = np.sort(rng.uniform(0.05, duration_s, n_seg))
    seq = 1000 + np.arange(n_seg, dtype=np.int64) * mss
    retx_idx = np.array([500, 1500, 3000])
    seq_all = np.concatenate([seq, seq[retx_idx]])
    t_all = np.concatenate([ts, ts[retx_idx] + 0.2])
    order = np.argsort(t_all, kind="stable")
    seq_all, t_all = seq_all[order], t_all[order]
    is_retx = np.concatenate([np.zeros(n_seg, bool), np.ones(len(retx_idx), bool)])[order]
    data = pd.DataFrame({"time": t_all, "is_retx": is_retx, "src": "10.0.0.1", "dst": "10.0.0.2", "proto": 6,
                         "ip_len_bytes": mss + 52, "sport": 5001, "dport": 40000,
                         "seq": seq_all % (1 << 32), "ack": 1, "flags": 0x10, "window_bytes": 65535,
                         "payload_bytes": mss})
    acks = pd.DataFrame({"time": ts + 0.04, "is_retx": False, "src": "10.0.0.2", "dst": "10.0.0.1", "proto": 6,
                         "ip_len_bytes": 52, "sport": 40000, "dport": 5001, "seq": 1,
                         "ack": (seq + mss) % (1 << 32), "flags": 0x10,
                         "window_bytes": 3_000_000, "payload_bytes": 0})
    packets = pd.concat([data, acks]).sort_values("time", kind="stable", ignore_index=True)
    retx_rows = np.flatnonzero(packets.pop("is_retx").to_numpy(bool))
    packets["time"] = _utc(packets["time"])
    # what the collectors' TCP analysis writes: one event row per retransmitted packet
    pd.DataFrame({"time": packets["time"].iloc[retx_rows].to_numpy(), "packet": retx_rows, "flow": 0,
                  "direction": "fwd", "event": "retransmission"}).to_parquet(outdir / "events.parquet")
    validate(packets, "packets")
    packets.to_parquet(outdir / "packets.parquet")
    flows = pd.DataFrame([{"flow": 0, "src": "10.0.0.1", "dst": "10.0.0.2", "sport": 5001, "dport": 40000,
                           "proto": 6, "start": packets["time"].iloc[0], "end": packets["time"].iloc[-1],
                           "packets_fwd": len(data), "packets_rev": len(acks),
                           "bytes_fwd": int(data["ip_len_bytes"].sum()), "bytes_rev": int(acks["ip_len_bytes"].sum()),
                           "retransmissions": 3, "spurious_retransmissions": 0, "rtt_ms_median": 40.0}])
    validate(flows, "flows")
    flows.to_parquet(outdir / "flows.parquet")
    secs = np.arange(int(duration_s))
    tcp = pd.DataFrame({"time": _utc(secs), "flow": 0, "direction": "fwd",
                        "goodput_bps": rng.uniform(4e6, 8e6, len(secs)),
                        "throughput_bps": rng.uniform(4e6, 9e6, len(secs)),
                        "rtt_ms": rng.uniform(40, 120, len(secs)),
                        "inflight_packets": rng.integers(5, 60, len(secs)).astype(float),
                        "inflight_bytes": rng.uniform(1e4, 9e4, len(secs))})
    validate(tcp, "tcp")
    tcp.to_parquet(outdir / "tcp.parquet")
    lags = np.arange(-10, 11, dtype=float)
    nmi = {"analyses": [{"target": "assigned_rate_bps", "source": "mac.parquet", "resolution_s": 1.0,
                         "factors": [{"factor": f, "peak_nmi": p, "lag_s": 1.0, "p_value": pv,
                                      "threshold": 0.12, "ci": [p - 0.05, p + 0.05],
                                      "curve": {"lag_s": lags.tolist(),
                                                "nmi": (p * np.exp(-np.abs(lags - 1) / 3)).tolist()}}
                                     for f, p, pv in (("backlog_bytes", 0.57, 0.005), ("sinr_db", 0.15, 0.2))]}]}
    (outdir / "nmi.json").write_text(json.dumps(nmi))
    (outdir / "downlink.log").write_text(
        "# mahimahi mm-link (downlink) [synthetic] > downlink.log\n# base timestamp: 0\n"
        + "".join(f"{ms} # 1500\n{ms} + 1500\n{ms + 5} - 1500 5\n" for ms in range(0, 2000, 4)))
    (outdir / "experiment.yaml").write_text("name: synthetic\nradio:\n  preset: evdo\n")
    (outdir / "versions.json").write_text(json.dumps({"airlink": "test", "python": "3"}))
    return {"users": n_users, "retransmissions": 3, "segments": n_seg + 3}


@pytest.fixture
def synthetic_run(tmp_path):
    out = tmp_path / "run"
    info = make_synthetic_run(out)
    return out, info
