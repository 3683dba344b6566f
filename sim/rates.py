"""Rate tables (SINR -> rate) and the SINR -> BLER error model.

A :class:`RateTable` is an ordered list of modulation and coding schemes (MCS), each with
the **SINR threshold** (dB) at which it is chosen and its **rate over the whole band**
(bit/s). The simulator divides the band rate by the number of subchannels to get the rate
of one subchannel, so one table serves any number of subchannels. A user whose reported
SINR is below the lowest threshold gets rate 0 and is never scheduled (as in the EV-DO study).

Tables built in (``RATE_TABLES``):

``evdo``
    1xEV-DO forward link, the EV-DO study: SNR (dB) -> DRC rate (kbit/s), -12.5 dB 38.4 ...
    9.5 dB 2457.6. The thresholds are the paper's.
``imt-advanced``
    The nine MCS of Kakuda & Tsuru (QPSK 1/8 ... 64QAM 3/4, 15.128 ... 274 Mbit/s over 80 MHz).
    The paper gives no thresholds; airlink uses the spectral efficiency ``eta`` of each MCS
    and an attenuated Shannon bound, ``threshold_db = 10 log10(2**eta - 1) + 3 dB`` (a 3 dB
    implementation gap), which places QPSK 1/8 at -5.4 dB and 64QAM 3/4 at 12.9 dB.
``lte-cqi``
    3GPP TS 36.213 Table 7.2.3-1 (CQI 1-15, efficiency 0.1523 ... 5.5547 bit/s/Hz) over a
    20 MHz carrier; thresholds from the same gap rule.
``egprs``
    EGPRS MCS-1..9 (called PCS-1..6 in Tan et al.) and GPRS CS-1..4, kbit/s per timeslot
    (``egprs-pcs`` = the six 8-PSK schemes of Tan et al., ``gprs-cs`` = CS-1..4). Their
    50 % BLER points are the logistic model parameters in :data:`EGPRS_BLER` (the paper
    has no curves; the values are chosen so that each more robust scheme wins at low C/I,
    roughly following published EGPRS link curves for TU3).
``hsdpa``
    HSDPA with 15 codes (CQI-like ladder up to 14.4 Mbit/s peak, the HSDPA study), gap rule.

User tables come from a CSV file with columns ``sinr_db`` and ``rate_bps`` (or
``efficiency_bps_hz`` plus ``bandwidth_hz`` in the preset), one row per MCS, see
:func:`read_rate_table`.

Error model
-----------
Block error rate of MCS ``m`` at the real SINR ``s`` (dB) is a logistic curve

    BLER_m(s) = 1 / (1 + exp(slope * (s - s50_m)))

with ``s50_m`` the 50 % point. By default ``s50_m = threshold_m - ln(9)/slope``, i.e. an
MCS chosen exactly at its threshold with perfect CSI fails 10 % of the time (the usual
link-adaptation target), and ``slope = 2 /dB`` (10 % -> 1 % within 1.2 dB, like turbo
coded blocks). HARQ with chase combining adds the linear SINRs of the attempts of one
block before the curve is read (see :mod:`airlink.sim.engine`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from airlink.core.errors import AirlinkError

GAP_DB = 3.0
DEFAULT_BLER_SLOPE = 2.0
DEFAULT_BLER_TARGET = 0.1


@dataclass
class RateTable:
    """An ordered MCS ladder: names, SINR thresholds (dB) and rates over the whole band (bit/s).

    ``s50_db`` are the 50 % points of the logistic BLER curves (dB) and ``slope`` their
    steepness (1/dB); leave ``s50_db`` empty to derive it from the thresholds and
    ``bler_target``.
    """

    name: str
    mcs: list
    threshold_db: np.ndarray
    rate_bps: np.ndarray
    slope: float = DEFAULT_BLER_SLOPE
    bler_target: float = DEFAULT_BLER_TARGET
    s50_db: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def __post_init__(self):
        self.threshold_db = np.asarray(self.threshold_db, dtype=np.float64)
        self.rate_bps = np.asarray(self.rate_bps, dtype=np.float64)
        if len(self.mcs) != len(self.threshold_db) or len(self.mcs) != len(self.rate_bps):
            raise AirlinkError(f"rate table {self.name}: names, thresholds and rates differ in length")
        if len(self.mcs) == 0:
            raise AirlinkError(f"rate table {self.name}: no rows")
        if np.any(np.diff(self.threshold_db) <= 0):
            raise AirlinkError(f"rate table {self.name}: SINR thresholds must increase")
        if np.any(self.rate_bps <= 0):
            raise AirlinkError(f"rate table {self.name}: rates must be positive")
        if len(self.s50_db) == 0:
            shift = math.log(1 / self.bler_target - 1) / self.slope
            self.s50_db = self.threshold_db - shift
        self.s50_db = np.asarray(self.s50_db, dtype=np.float64)

    def __len__(self):
        return len(self.mcs)

    def index(self, sinr_db) -> np.ndarray:
        """MCS index (0-based) chosen at ``sinr_db``; -1 below the lowest threshold."""
        return np.searchsorted(self.threshold_db, np.asarray(sinr_db, dtype=np.float64),
                               side="right") - 1

    def rate(self, sinr_db) -> np.ndarray:
        """Rate over the whole band (bit/s) chosen at ``sinr_db`` (0 below the table)."""
        i = self.index(sinr_db)
        return np.where(i >= 0, self.rate_bps[np.maximum(i, 0)], 0.0)

    def bler(self, mcs, sinr_db) -> np.ndarray:
        """Block error rate of MCS index ``mcs`` at real SINR ``sinr_db`` (logistic model)."""
        mcs = np.asarray(mcs)
        return 1.0 / (1.0 + np.exp(self.slope * (np.asarray(sinr_db, dtype=np.float64)
                                                 - self.s50_db[mcs])))

    def throughput(self, mcs, sinr_db, *, latency: bool = False) -> np.ndarray:
        """Expected throughput (bit/s) of one MCS at a SINR: ``S = R (1 - BLER)``, or with
        retransmission latency ``S = R (1 - BLER) / (1 + BLER)`` (Tan et al.)."""
        b = self.bler(mcs, sinr_db)
        s = self.rate_bps[np.asarray(mcs)] * (1 - b)
        return s / (1 + b) if latency else s

    def best(self, sinr_db, *, latency: bool = False) -> np.ndarray:
        """MCS index maximising the expected throughput at ``sinr_db`` (ideal link adaptation)."""
        s = np.asarray(sinr_db, dtype=np.float64)
        tp = np.stack([self.throughput(m, s, latency=latency) for m in range(len(self))])
        return np.argmax(tp, axis=0)

    def with_bler(self, *, slope=None, bler_target=None) -> "RateTable":
        """A copy with another BLER slope or target (thresholds unchanged)."""
        return RateTable(self.name, list(self.mcs), self.threshold_db.copy(), self.rate_bps.copy(),
                         slope if slope is not None else self.slope,
                         bler_target if bler_target is not None else self.bler_target)

    def to_dict(self) -> dict:
        return {"name": self.name, "mcs": list(self.mcs),
                "threshold_db": [round(float(x), 4) for x in self.threshold_db],
                "rate_bps": [float(x) for x in self.rate_bps],
                "bler_slope": self.slope, "s50_db": [round(float(x), 4) for x in self.s50_db]}


def gap_threshold_db(efficiency_bps_hz, gap_db: float = GAP_DB) -> np.ndarray:
    """SINR (dB) at which spectral efficiency ``eta`` is reached under an attenuated Shannon
    bound: ``10 log10(2**eta - 1) + gap_db``."""
    eta = np.asarray(efficiency_bps_hz, dtype=np.float64)
    return 10 * np.log10(2 ** eta - 1) + gap_db


def _evdo() -> RateTable:
    snr = [-12.5, -9.5, -6.5, -5.7, -4.0, -1.0, 1.3, 3.0, 7.2, 9.5]
    kbps = [38.4, 76.8, 153.6, 204.8, 307.2, 614.4, 921.6, 1228.8, 1843.2, 2457.6]
    return RateTable("evdo", [f"DRC-{i + 1} {k:g}k" for i, k in enumerate(kbps)], snr,
                     np.array(kbps) * 1e3)


IMT_MCS = [("QPSK 1/8", 15.128), ("QPSK 1/4", 30.344), ("QPSK 1/2", 60.8), ("QPSK 2/3", 81.04),
           ("16QAM 1/2", 121.76), ("16QAM 2/3", 162.32), ("64QAM 1/2", 182.64),
           ("64QAM 2/3", 243.6), ("64QAM 3/4", 274.0)]


def _imt() -> RateTable:
    mbps = np.array([r for _, r in IMT_MCS])
    eta = mbps / 80.0  # bit/s/Hz over 80 MHz
    return RateTable("imt-advanced", [f"MCS{i + 1} {n}" for i, (n, _) in enumerate(IMT_MCS)],
                     gap_threshold_db(eta), mbps * 1e6)


# 3GPP TS 36.213 Table 7.2.3-1: CQI 1..15 efficiency (bit/s/Hz)
LTE_CQI_EFFICIENCY = [0.1523, 0.2344, 0.3770, 0.6016, 0.8770, 1.1758, 1.4766, 1.9141, 2.4063,
                      2.7305, 3.3223, 3.9023, 4.5234, 5.1152, 5.5547]


def _lte(bandwidth_hz: float = 18e6) -> RateTable:
    eta = np.array(LTE_CQI_EFFICIENCY)
    return RateTable("lte-cqi", [f"CQI{i + 1}" for i in range(15)], gap_threshold_db(eta),
                     eta * bandwidth_hz)


def _hsdpa() -> RateTable:
    # 15 codes at 3.84 Mcps / SF16 = 240 ksym/s each; a ladder of transport formats up to
    # 14.4 Mbit/s (16QAM, rate ~3/4), thresholds by the gap rule on eta = rate / 3.84 MHz.
    mbps = np.array([0.365, 0.729, 1.459, 2.33, 3.32, 4.58, 6.22, 7.24, 8.65, 10.14, 11.66,
                     12.78, 14.4])
    return RateTable("hsdpa", [f"TF{i + 1}" for i in range(len(mbps))],
                     gap_threshold_db(mbps / 3.84) - 1.0, mbps * 1e6)


# EGPRS: kbit/s per timeslot (Tan et al.) and logistic BLER curves chosen by airlink:
# (name, rate kbit/s, s50 dB C/I at 50 % BLER, slope 1/dB). The paper names the 8-PSK
# schemes PCS-1..6; GPRS CS-1..4 are GMSK.
EGPRS_BLER = [
    ("PCS-1", 22.8, 3.0, 0.45), ("PCS-2", 34.3, 7.0, 0.45), ("PCS-3", 41.25, 9.5, 0.42),
    ("PCS-4", 51.6, 13.5, 0.40), ("PCS-5", 57.35, 16.0, 0.38), ("PCS-6", 69.2, 21.0, 0.35),
]
GPRS_BLER = [("CS-1", 11.2, -1.0, 0.6), ("CS-2", 14.5, 2.5, 0.55), ("CS-3", 16.7, 4.5, 0.5),
             ("CS-4", 22.8, 11.0, 0.45)]


def _logistic_table(name, rows) -> RateTable:
    names = [r[0] for r in rows]
    rate = np.array([r[1] for r in rows]) * 1e3
    s50 = np.array([r[2] for r in rows])
    slope = float(np.mean([r[3] for r in rows]))
    # a scheme is "chosen" (threshold) where its BLER falls to 10 %
    thr = s50 + math.log(9) / slope
    return RateTable(name, names, thr, rate, slope, 0.1, s50)


RATE_TABLES = {
    "evdo": _evdo,
    "imt-advanced": _imt,
    "lte-cqi": _lte,
    "hsdpa": _hsdpa,
    "egprs": lambda: _logistic_table("egprs", EGPRS_BLER),
    "egprs-pcs": lambda: _logistic_table("egprs-pcs", EGPRS_BLER),
    "gprs-cs": lambda: _logistic_table("gprs-cs", GPRS_BLER),
}


def read_rate_table(path, *, bandwidth_hz: float | None = None, name: str | None = None) -> RateTable:
    """A user rate table from CSV: columns ``sinr_db`` and ``rate_bps`` (whole-band rate) or
    ``efficiency_bps_hz`` (then ``bandwidth_hz`` is required); optional ``mcs`` names and
    ``s50_db``/``bler_slope`` for the error curves."""
    import pandas as pd
    path = Path(path)
    if not path.exists():
        raise AirlinkError(f"{path}: no such rate table file")
    try:
        df = pd.read_csv(path, comment="#")
    except Exception as exc:
        raise AirlinkError(f"{path}: not a readable CSV file ({exc})") from None
    df.columns = [str(c).strip().lower() for c in df.columns]
    if "sinr_db" not in df.columns:
        raise AirlinkError(f"{path}: rate table needs a 'sinr_db' column (has {', '.join(df.columns)})")
    if "rate_bps" in df.columns:
        rate = df["rate_bps"].to_numpy(float)
    elif "efficiency_bps_hz" in df.columns:
        if not bandwidth_hz:
            raise AirlinkError(f"{path}: efficiency_bps_hz needs bandwidth_hz in the preset")
        rate = df["efficiency_bps_hz"].to_numpy(float) * float(bandwidth_hz)
    else:
        raise AirlinkError(f"{path}: rate table needs a 'rate_bps' or 'efficiency_bps_hz' column")
    df = df.assign(_rate=rate).sort_values("sinr_db")
    for row, (s, r) in enumerate(zip(df["sinr_db"], df["_rate"]), start=2):
        if not np.isfinite(s) or not np.isfinite(r):
            raise AirlinkError(f"{path}: line {row}: sinr_db and rate must be numbers")
    names = [str(x) for x in df["mcs"]] if "mcs" in df.columns else [f"MCS{i + 1}" for i in range(len(df))]
    slope = float(df["bler_slope"].iloc[0]) if "bler_slope" in df.columns else DEFAULT_BLER_SLOPE
    s50 = df["s50_db"].to_numpy(float) if "s50_db" in df.columns else np.zeros(0)
    return RateTable(name or path.stem, names, df["sinr_db"].to_numpy(float), df["_rate"].to_numpy(),
                     slope, DEFAULT_BLER_TARGET, s50)


def rate_table(spec, *, bandwidth_hz: float | None = None, slope=None, bler_target=None) -> RateTable:
    """A RateTable by name (``evdo``, ``imt-advanced``, ``lte-cqi``, ``hsdpa``, ``egprs``,
    ``gprs-cs``), from a CSV path, or passed through."""
    if isinstance(spec, RateTable):
        table = spec
    elif isinstance(spec, str) and spec in RATE_TABLES:
        table = _lte(bandwidth_hz) if spec == "lte-cqi" and bandwidth_hz else RATE_TABLES[spec]()
    elif isinstance(spec, (str, Path)) and (str(spec).endswith(".csv") or Path(spec).exists()):
        table = read_rate_table(spec, bandwidth_hz=bandwidth_hz)
    else:
        raise AirlinkError(f"unknown rate table {spec!r} (one of {', '.join(RATE_TABLES)}, or a CSV file)")
    if slope is not None or bler_target is not None:
        table = table.with_bler(slope=slope, bler_target=bler_target)
    return table
