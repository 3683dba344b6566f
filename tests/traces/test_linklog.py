"""mm-link log files: the writer's output and hand-written Mahimahi lines parse back."""
import numpy as np
import pytest

from airlink.traces import FormatError, LinkLogWriter, per_ms, read_log, write_log
from airlink.traces.stats import linklog_summary

MM_LOG = """\
# mahimahi mm-link (downlink) [/usr/share/mahimahi/traces/Verizon-LTE-short.down] > down.log
# command line: mm-link Verizon-LTE-short.up Verizon-LTE-short.down --downlink-log=down.log
# queue: droptail [packets=100]
# init timestamp: 1488844446543
# base timestamp: 1488844446543
0 # 1504
0 + 1504
0 - 1504 0
3 + 80
5 # 1504
5 # 1504
5 - 80 2
7 + 1504
7 d 2 3008
"""


def test_hand_written_mm_link_lines(tmp_path):
    p = tmp_path / "down.log"
    p.write_text(MM_LOG)
    f = read_log(p)
    h = f.attrs["header"]
    assert h["init_timestamp"] == 1488844446543 and h["queue"] == "droptail [packets=100]"
    assert list(f["event"].astype(str)) == ["opportunity", "arrival", "departure", "arrival",
                                            "opportunity", "opportunity", "departure", "arrival", "drop"]
    assert f["time_ms"].tolist() == [0, 0, 0, 3, 5, 5, 5, 7, 7]
    drop = f.iloc[-1]
    assert drop["packets"] == 2 and drop["bytes"] == 3008
    assert f.loc[f["event"] == "departure", "delay_ms"].tolist() == [0, 2]
    b = per_ms(f)
    assert b["capacity_bytes"].sum() == 3 * 1504 and b["departures_bytes"].sum() == 1584
    assert b.loc[5, "capacity_bytes"] == 3008 and b.loc[7, "drops_bytes"] == 3008
    s = linklog_summary(f)
    assert s["drops_packets"] == 2 and s["delay_ms_p95"] == pytest.approx(1.9)


def test_writer_round_trip(tmp_path):
    p = tmp_path / "w.log"
    rng = np.random.default_rng(1)
    with LinkLogWriter(p, direction="uplink", trace="up.trace", queue="infinite",
                       base_ms=1700000000000, command="airlink link up.trace") as w:
        t = 0
        for _ in range(500):
            t += int(rng.integers(0, 3))
            w.opportunity(t, 1504)
            w.arrival(t, 1400)
            w.departure(t + 2, 1400, 2)
        w.drop(t + 3, 3, 4500)
        w.opportunity(t + 3.5, 700)  # a sub-millisecond TTI
    f = read_log(p)
    assert f.attrs["header"]["base_timestamp"] == 1700000000000
    assert f.attrs["header"]["command_line"] == "airlink link up.trace"
    assert (f["event"] == "opportunity").sum() == 501
    assert f["time_ms"].iloc[-1] == pytest.approx(t + 3.5)
    write_log(f, tmp_path / "again.log")
    g = read_log(tmp_path / "again.log")
    assert g.drop(columns=[]).equals(f) or (g.values == f.values).all()


@pytest.mark.parametrize("line, message", [
    ("5 x 1500", "line 6: expected 'TIME EVENT SIZE'"),
    ("5 - 1500", "line 6: a departure line has 4 fields"),
    ("abc # 1500", "line 6: not a number"),
    ("5 + -3", "line 6: negative value"),
    ("nan + 3", "line 6: not a number"),
    # values beyond 2**53 would be rounded as float64 (or wrap as int64): refused, not cast
    (f"5 + {2 ** 63}", "line 6: value out of range"),
    (f"5 d 1 {2 ** 53}", "line 6: value out of range"),
    (f"{2 ** 53} # 1504", "line 6: value out of range"),
])
def test_malformed_log_lines(tmp_path, line, message):
    head = "\n".join(MM_LOG.splitlines()[:5])
    p = tmp_path / "bad.log"
    p.write_text(head + "\n" + line + "\n")
    with pytest.raises(FormatError, match=message):
        read_log(p)


def test_a_header_value_of_thousands_of_digits_stays_text(tmp_path):
    """Python refuses int() of more than 4,300 digits; such a header value is kept as the
    text it is, and an ordinary timestamp is still a number."""
    p = tmp_path / "long.log"
    p.write_text(MM_LOG.replace("# init timestamp: 1488844446543", "# init timestamp: " + "9" * 5000))
    h = read_log(p).attrs["header"]
    assert h["init_timestamp"] == "9" * 5000 and h["base_timestamp"] == 1488844446543


def test_empty_log(tmp_path):
    p = tmp_path / "empty.log"
    p.write_text("")
    with pytest.raises(FormatError, match="empty log"):
        read_log(p)


def test_well_formed_lines_are_read_in_one_pass(tmp_path, monkeypatch):
    """The per-line parser is for lines the whole-file read cannot take; an ordinary log
    (opportunities and arrivals have no fourth field) never reaches it."""
    from airlink.traces import mmlinklog

    def refuse(*args):
        raise AssertionError("line-by-line parse of a well-formed log")
    monkeypatch.setattr(mmlinklog, "_slow_parse", refuse)
    p = tmp_path / "down.log"
    p.write_text(MM_LOG)
    assert len(read_log(p)) == 9
