"""Readers and inference never turn a missing, renamed or non-numeric column into silent NaN,
and never split rows into series unless asked: faithful reductions of the real UCC and
iCellSpeed files (their first lines, with one thing broken)."""
import json

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink.core.errors import AirlinkError, FormatError


def first_lines(path, n):
    with open(path) as fh:
        return [next(fh) for _ in range(n)]


def first_file(shared_data, folder, pattern):
    files = sorted((shared_data / folder).rglob(pattern))
    if not files:
        pytest.skip(f"no {pattern} files in ../shared/data/{folder}")
    return files[0]


@pytest.fixture
def ucc_file(shared_data):
    return first_file(shared_data, "ucc-5g/Download", "*.csv")


@pytest.fixture
def icell_file(shared_data):
    return first_file(shared_data, "icellspeed/D1_static", "data_*.csv")


def replace_field(line, header, column, value):
    cells = line.rstrip("\n").split(",")
    cells[header.index(column)] = value
    return ",".join(cells) + "\n"


def test_ucc_text_in_dl_bitrate_names_file_column_line(ucc_file, tmp_path):
    lines = first_lines(ucc_file, 30)
    header = lines[0].strip().split(",")
    lines[12] = replace_field(lines[12], header, "DL_bitrate", "12,5 kbps".replace(",", ";"))
    path = tmp_path / ucc_file.name
    path.write_text("".join(lines))
    with pytest.raises(FormatError, match=rf"{path.name}: column 'DL_bitrate' line 13: '12;5 kbps' is not a number"):
        C.read(path)


def test_ucc_reduction_reads_and_missing_is_dash(ucc_file, tmp_path):
    path = tmp_path / ucc_file.name
    path.write_text("".join(first_lines(ucc_file, 30)))
    fr = C.read(path)
    raw = pd.read_csv(path, na_values=["-"])
    assert fr.attrs["reader"] == "ucc"
    assert len(fr) == len(raw) and fr["dl_bitrate_bps"].notna().sum() == raw["DL_bitrate"].notna().sum()


def test_repeated_header_line_is_skipped_and_lines_stay_true(ucc_file, tmp_path):
    lines = first_lines(ucc_file, 20)
    header = lines[0].strip().split(",")
    lines.insert(10, lines[0])                       # a second log appended to the first
    lines[15] = replace_field(lines[15], header, "RSRP", "n/a!")
    path = tmp_path / "appended.csv"
    path.write_text("".join(lines))
    with pytest.raises(FormatError, match=r"column 'RSRP' line 16: 'n/a!'"):
        C.read(path, format="ucc")
    lines[15] = replace_field(lines[15], header, "RSRP", "-100")
    path.write_text("".join(lines))
    fr = C.read(path, format="ucc")
    assert fr.attrs["repeated_headers"] == 1


def test_icellspeed_renamed_column_is_an_error(icell_file, tmp_path):
    lines = first_lines(icell_file, 20)
    lines[0] = lines[0].replace("pcell_sum_nRB", "pcell_sum_nrb")
    path = tmp_path / icell_file.name
    path.write_text("".join(lines))
    with pytest.raises(FormatError, match=r"column\(s\) 'pcell_sum_nRB' not in the file"):
        C.read(path, format="icellspeed")


def test_icellspeed_text_value_is_an_error(icell_file, tmp_path):
    lines = first_lines(icell_file, 20)
    header = lines[0].strip().split(",")
    lines[7] = replace_field(lines[7], header, "pcell_snr", "abc")
    path = tmp_path / icell_file.name
    path.write_text("".join(lines))
    with pytest.raises(FormatError, match=r"column 'pcell_snr' line 8: 'abc' is not a number"):
        C.read(path, format="icellspeed")


def test_infer_renamed_and_text_columns_one_line(run_airlink, icell_file, tmp_path):
    lines = first_lines(icell_file, 40)
    header = lines[0].strip().split(",")
    renamed = tmp_path / "renamed.csv"
    renamed.write_text("".join([lines[0].replace("pcell_sum_nRB", "pcell_nRB_sum")] + lines[1:]))
    status, _, err = run_airlink("infer", "nmi", renamed, "--target", "pcell_sum_nRB", "--factor", "pcell_snr",
                                 "--surrogates", "0")
    assert status == 2 and len(err.strip().splitlines()) == 1
    # still an iCellSpeed log by its header: its reader names the column it lacks
    assert "renamed.csv" in err and "'pcell_sum_nRB' not in the file" in err
    lines[21] = replace_field(lines[21], header, "throughput", "fast")
    text = tmp_path / "text.csv"
    text.write_text("".join(lines))
    status, _, err = run_airlink("infer", "nmi", text, "--target", "throughput", "--factor", "pcell_snr",
                                 "--surrogates", "0")
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert "text.csv: column 'throughput' row 21: 'fast' is not a number" in err


def test_carriers_split_only_when_asked(run_airlink, icell_file, tmp_path):
    frame = C.read(icell_file)
    assert frame["carrier"].nunique() > 1
    path = tmp_path / "mac.parquet"
    frame.to_parquet(path)
    status, _, err = run_airlink("infer", "nmi", path, "--target", "prbs", "--factor", "snr_db",
                                 "--surrogates", "0", "--max-lag", "5s")
    assert status == 2 and "column 'carrier' holds" in err and "by='carrier'" in err
    status, out, err = run_airlink("infer", "nmi", path, "--target", "prbs", "--factor", "snr_db",
                                   "--surrogates", "0", "--max-lag", "5s", "--by", "carrier", "--json")
    assert status == 0, err
    (row,) = json.loads(out)
    # pairs (target at t, factor at t - lag) counted within each carrier's own seconds, by hand
    want = 0
    for _, part in frame.groupby("carrier", observed=True):
        s = part.set_index(part["time"].astype("int64") // 10**9)
        target = set(s.index[s["prbs"].notna()])
        factor = set(s.index[s["snr_db"].notna()])
        want += sum(1 for t in target if t - row["lag"] in factor)
    assert row["n_pairs"] == want


def test_library_errors_name_no_cli_flags():
    import airlink.inference as inf
    frame = pd.DataFrame({"time": np.arange(30), "flow": [0, 1] * 15, "x": np.arange(30.0)})
    with pytest.raises(AirlinkError) as e:
        inf.rank_factors(frame, target="x", factors=["x"], surrogates=0)
    assert "--" not in str(e.value) and "by='flow'" in str(e.value)


def test_reader_options_are_checked_not_swallowed(shared_data, tmp_path):
    """A misspelled option is an error naming it; an option of another format is unused when
    the format is sniffed, and an error when the format is named."""
    ucc = next((shared_data / "ucc-5g").rglob("*.csv"))
    with pytest.raises(AirlinkError, match="'salvge'"):
        C.read(ucc, salvge=True)
    assert len(C.read(ucc, salvage=True)) > 0          # pcap's option, sniffed format: unused
    with pytest.raises(AirlinkError, match="'salvage' not known to the ucc reader"):
        C.read(ucc, format="ucc", salvage=True)
    with pytest.raises(TypeError):
        from airlink.collectors import ucc as U
        U.read(ucc, mapping={})
