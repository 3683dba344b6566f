"""Trace model, Parquet metadata, schemas and unit parsing."""
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from airlink.traces import (AirlinkError, SchemaError, Trace, constant, parse_duration, parse_rate,
                            parse_size, parse_tti, validate)


def test_parquet_keeps_values_tti_and_provenance(tmp_path):
    tr = Trace(np.arange(12.0).reshape(6, 2), "1.667ms", ["1", "2"],
               meta={"source": "sim", "scheduler": "pf", "seed": 3, "parameters": {"a": 0.01}})
    tr.write_parquet(tmp_path / "t.parquet")
    back = Trace.read_parquet(tmp_path / "t.parquet")
    assert back == tr and back.tti == Fraction(1, 600)
    assert back.meta["seed"] == 3 and back.meta["scheduler"] == "pf"
    assert back.meta["parameters"] == {"a": 0.01} and "airlink_version" in back.meta


def test_parquet_errors(tmp_path):
    p = tmp_path / "x.parquet"
    pd.DataFrame({"a": [1]}).to_parquet(p)
    with pytest.raises(AirlinkError, match="no airlink trace metadata"):
        Trace.read_parquet(p)
    (tmp_path / "junk.parquet").write_bytes(b"junk")
    with pytest.raises(AirlinkError, match="not a readable Parquet"):
        Trace.read_parquet(tmp_path / "junk.parquet")


def test_constant_trace_at_sub_ms_tti():
    tr = constant(12e6, Fraction(1), "0.125ms")
    assert tr.n_tti == 8000 and tr.values[0, 0] == 187.5
    assert tr.mean_rate_bps()[0] == pytest.approx(12e6)


def test_trace_rejects_bad_values():
    with pytest.raises(AirlinkError, match="non-negative"):
        Trace([1.0, -1.0], "1ms")
    with pytest.raises(AirlinkError, match="no user"):
        Trace([1.0], "1ms").column(5)


def test_frames_and_validate():
    tr = Trace(np.ones((4, 2)), "2ms")
    f = validate(tr.to_frame(), "capacity")
    assert len(f) == 8 and f["time"].iloc[-1] == pd.Timestamp(6_000_000, unit="ns", tz="UTC")
    with pytest.raises(SchemaError, match="missing column"):
        validate(f.drop(columns="user"), "capacity")
    g = f.copy()
    g["time"] = g["time"].iloc[::-1].to_numpy()
    with pytest.raises(SchemaError, match="not sorted"):
        validate(g, "capacity")
    h = f.copy()
    h["capacity_bytes"] = "x"
    with pytest.raises(SchemaError, match="must be numeric"):
        validate(h, "capacity")
    with pytest.raises(SchemaError, match="unknown frame kind"):
        validate(f, "nope")
    naive = f.copy()
    naive["time"] = naive["time"].dt.tz_localize(None)
    with pytest.raises(SchemaError, match="UTC"):
        validate(naive, "capacity")


@pytest.mark.parametrize("text, bps", [("48Mbps", 48e6), ("12 Mbit/s", 12e6), ("500kbps", 5e5),
                                       ("1Gbps", 1e9), ("100", 100.0), ("1e6bps", 1e6)])
def test_parse_rate(text, bps):
    assert parse_rate(text) == pytest.approx(bps)


def test_parse_errors():
    for bad in ["fast", "10 furlongs", ""]:
        with pytest.raises(AirlinkError):
            parse_rate(bad)
    with pytest.raises(AirlinkError):
        parse_duration("10 years")
    with pytest.raises(AirlinkError):
        parse_tti("0ms")


def test_parse_duration_size_tti():
    assert parse_duration("10s") == 10 and parse_duration("500ms") == Fraction(1, 2)
    assert parse_duration("2min") == 120 and parse_duration(1.5) == Fraction(3, 2)
    assert parse_size("64KB") == 64000 and parse_size("16KiB") == 16384
    assert parse_tti("1.667ms") == Fraction(1, 600) and parse_tti("1.6667") == Fraction(1, 600)
    assert parse_tti("0.125ms") == Fraction(1, 8000) and parse_tti("2") == Fraction(1, 500)


def test_bundled_example_trace_is_a_simulated_pf_cell(datapath):
    """The example shipped in the package (README's offline examples) loads with its provenance."""
    from airlink.traces import read_trace
    tr = read_trace(datapath / "pf-quick-20s.parquet")
    assert tr.users == ["1", "2", "3", "4"]
    assert tr.n_tti == 20000 and tr.tti == Fraction(1, 1000)
    rates = tr.mean_rate_bps()
    assert 5e6 < rates[0] < 6e6 and list(rates) == sorted(rates, reverse=True)
    assert tr.meta.get("seed") == 1
