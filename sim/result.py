"""The outcome of a simulation and its output folder."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from airlink.traces import Trace, jsonable, write_trace

if TYPE_CHECKING:
    import pandas as pd


#: MAC log columns of few distinct values, stored dictionary-encoded; the others (SINR, bytes,
#: times) rarely repeat, and trying a dictionary on them costs more time than it saves bytes
DICTIONARY_COLUMNS = ("user", "subchannels", "mcs", "harq_retransmissions", "backlog_packets", "drops_packets")


class MacColumns:
    """The MAC log as numpy columns (:meth:`airlink.sim.step.Radio.mac_columns`: ``time`` in
    integer UTC nanoseconds, ``user`` as strings, then the MAC columns; one row per TTI and
    user, the users in the order ``users``), turned into the ``mac`` frame (:meth:`frame`)
    or straight into an Arrow table (:meth:`table`) with the same column types:
    ``simulate`` then writes its files without loading pandas."""

    def __init__(self, columns: dict, users):
        self.columns, self.users = columns, [str(u) for u in users]

    def frame(self) -> "pd.DataFrame":
        """The frame of kind ``mac`` (``time`` as UTC datetimes). Its columns are not copied:
        they may be views of the arrays the columns came from (``capacity_bytes`` is its own
        memory, not ``served_bytes``'s)."""
        import pandas as pd
        cols = dict(self.columns)
        cols["time"] = pd.to_datetime(cols["time"].view("datetime64[ns]"), utc=True)
        cols["capacity_bytes"] = cols["capacity_bytes"].copy()     # not the served column's memory
        return pd.DataFrame(cols, copy=False)

    def table(self, *, nan_is_null: bool = True):
        """An Arrow table equal to ``pyarrow.Table.from_pandas(self.frame(), preserve_index=False)``
        (types, values, order; no ``pandas`` schema metadata): ``time`` timestamp[ns, UTC],
        ``user`` string, the other columns as in numpy (int64, float64, bool). A float NaN is
        null, or with ``nan_is_null=False`` a value (as ``pyarrow.array`` stores it)."""
        import pyarrow as pa
        from airlink.core.arrowarrays import numpy_array, strings
        n_rows = len(self.columns["time"])
        arrays = []
        for name, col in self.columns.items():
            if name == "time":
                arrays.append(numpy_array(np.asarray(col, np.int64), pa.timestamp("ns", tz="UTC")))
            elif name == "user":
                n_u = len(self.users)
                if n_u and n_rows % n_u == 0 and _tiled(col, self.users):
                    codes = np.tile(np.arange(n_u, dtype=np.int32), n_rows // n_u)
                    arrays.append(strings(self.users, codes))
                else:           # not the documented layout: Arrow's own conversion
                    arrays.append(pa.array(col, pa.string()))
            else:
                arrays.append(numpy_array(np.asarray(col), nan_is_null=nan_is_null))
        return pa.Table.from_arrays(arrays, names=list(self.columns))


def _tiled(col, users: list) -> bool:
    """Whether the ``user`` column ``col`` is ``users`` repeated, row after row (the layout of
    :meth:`airlink.sim.step.Radio.mac_columns`). Every row is compared: a MAC log with rows
    of its own between the users' (a measured cell's cross-traffic) can start like one."""
    return bool((np.asarray(col, object).reshape(-1, len(users)) == np.array(users, object)).all())


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

    def __init__(self, capacity: Trace, mac, summary: dict, config: dict):
        self.capacity, self.summary, self.config = capacity, summary, config
        self._mac = mac         # a frame, or the MacColumns it is made from on first use

    @property
    def mac(self) -> "pd.DataFrame":
        if isinstance(self._mac, MacColumns):
            self._mac = self._mac.frame()
        return self._mac

    @mac.setter
    def mac(self, frame):
        self._mac = frame

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
        if isinstance(self._mac, MacColumns):        # the frame was never asked for: no pandas
            table = self._mac.table()
        else:
            table = pa.Table.from_pandas(self._mac, preserve_index=False)
        header = {"kind": "mac", "meta": jsonable(self.capacity.meta)}
        meta = dict(table.schema.metadata or {})
        meta[b"airlink"] = json.dumps(header).encode()
        from airlink.core.atomic import atomic_path, write_text
        with atomic_path(out / "mac.parquet") as tmp:
            pq.write_table(table.replace_schema_metadata(meta), tmp,
                           use_dictionary=[c for c in DICTIONARY_COLUMNS if c in table.column_names])
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


def read_mac(path) -> "pd.DataFrame":
    """Read a ``mac.parquet`` written by :meth:`SimResult.write` (provenance in ``.attrs``)."""
    import pyarrow.parquet as pq
    table = pq.read_table(path)
    frame = table.to_pandas()
    raw = (table.schema.metadata or {}).get(b"airlink")
    if raw:
        frame.attrs["airlink"] = json.loads(raw)
    return frame
