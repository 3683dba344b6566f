"""The outcome of a simulation and its output folder."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from airlink.traces import Trace, jsonable, write_trace


#: MAC log columns of few distinct values, stored dictionary-encoded; the others (SINR, bytes,
#: times) rarely repeat, and trying a dictionary on them costs more time than it saves bytes
DICTIONARY_COLUMNS = ("user", "subchannels", "mcs", "harq_retransmissions", "backlog_packets", "drops_packets")


@dataclass
class SimResult:
    """What :func:`airlink.sim.simulate` returns.

    capacity : Trace, bytes served per TTI per user (users ``"1"`` .. ``"N"``), with the
        preset, scheduler, parameters and seed in ``meta``
    mac : DataFrame of kind ``mac`` (see :mod:`airlink.core.schema`): per TTI and user,
        ``subchannels``, ``mcs`` (mean 1-based MCS index of the blocks sent, 0 if none),
        ``sinr_db``/``sinr_reported_db`` (wideband, real and as reported after the CSI
        delay), ``served_bytes``, ``capacity_bytes``, ``tx_bytes``, ``harq_retransmissions``,
        ``backlog_bytes``/``backlog_packets`` (after the TTI; for full-buffer traffic the
        buffer is always full: ``buffer_packets`` packets), ``assigned_rate_bps``
        (bits scheduled per second in the TTI; for the backlog scheduler the code-channel
        rate assigned), ``arrivals_bytes``, ``drops_packets``
    summary : dict, the content of ``summary.json`` (see :mod:`airlink.sim.metrics`)
    config : dict, every parameter used (preset merged with overrides)
    """

    capacity: Trace
    mac: pd.DataFrame
    summary: dict
    config: dict

    def write(self, outdir, mahimahi: bool = False) -> Path:
        """Write ``capacity.parquet``, ``mac.parquet``, ``summary.json``, ``config.yaml``
        (and ``user<N>.down`` Mahimahi traces with ``mahimahi``) into ``outdir``; returns it.
        The same seed and parameters give byte-identical files. Users that were never served
        get no Mahimahi trace (the format cannot express zero capacity); their names are
        left in ``skipped_mahimahi``."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        import yaml
        out = Path(outdir)
        out.mkdir(parents=True, exist_ok=True)
        self.capacity.write_parquet(out / "capacity.parquet")
        table = pa.Table.from_pandas(self.mac, preserve_index=False)
        header = {"kind": "mac", "meta": jsonable(self.capacity.meta)}
        meta = dict(table.schema.metadata or {})
        meta[b"airlink"] = json.dumps(header).encode()
        from airlink.core.atomic import atomic_path, write_text
        with atomic_path(out / "mac.parquet") as tmp:
            pq.write_table(table.replace_schema_metadata(meta), tmp,
                           use_dictionary=[c for c in DICTIONARY_COLUMNS if c in self.mac.columns])
        write_text(out / "summary.json", json.dumps(jsonable(self.summary), indent=2) + "\n")
        write_text(out / "config.yaml", yaml.safe_dump(jsonable(self.config), sort_keys=True))
        self.skipped_mahimahi = []
        if mahimahi:
            for u in self.capacity.users:
                if self.capacity.column(u).sum() <= 0:
                    # a Mahimahi trace needs at least one delivery opportunity
                    self.skipped_mahimahi.append(u)
                    continue
                write_trace(self.capacity, out / f"user{u}.down", "mahimahi", user=u)
        return out

    def __repr__(self):
        return (f"SimResult({self.capacity.n_tti} TTIs x {self.capacity.n_users} users, "
                f"preset={self.config.get('preset')!r}, scheduler={self.config.get('scheduler')!r}, "
                f"aggregate={self.summary.get('aggregate_throughput_mbps', 0):.3f} Mbit/s)")


def read_mac(path) -> pd.DataFrame:
    """Read a ``mac.parquet`` written by :meth:`SimResult.write` (provenance in ``.attrs``)."""
    import pyarrow.parquet as pq
    table = pq.read_table(path)
    frame = table.to_pandas()
    raw = (table.schema.metadata or {}).get(b"airlink")
    if raw:
        frame.attrs["airlink"] = json.loads(raw)
    return frame
