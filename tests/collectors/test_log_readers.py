"""Readers of the formats researchers have: G-NetTrack-style Android logs, headerless
throughput traces, per-transfer tables without time, XCAL-style exports. Each file is
written by the test; expected values are worked by hand from the written text."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from airlink import collectors as C
from airlink import traces as T
from airlink.traces import AirlinkError, FormatError, validate

GNT_HEADER = ("Timestamp\tLongitude\tLatitude\tSpeed\tOperatorname\tCellID\tNetworkMode\tRSRP\tRSRQ\tSNR\tCQI\t"
              "DL_bitrate\tUL_bitrate")
GNT_ROWS = ["2019.12.03_10.21.13\t-8.4\t51.9\t12\tOp\t37\tLTE\t-95\t-11\t6.0\t9\t2500\t120",
            "2019.12.03_10.21.15\t-8.4\t51.9\t14\tOp\t37\tLTE\t-97\t-12\t4.0\t8\t-\t80",
            "2019.12.03_10.21.16\t-8.4\t51.9\t15\tOp\t38\t5G\t-90\t-10\t9.5\t12\t10000\t300"]


def test_gnettrack_log(tmp_path):
    f = tmp_path / "gnettrack.txt"
    f.write_text(GNT_HEADER + "\n" + "\n".join(GNT_ROWS) + "\n")
    fr = C.read(f)                                         # sniffed
    validate(fr, "rf")
    assert fr.attrs["reader"] == "gnettrack"
    assert list(fr["time"]) == [pd.Timestamp(s, tz="UTC") for s in
                                ("2019-12-03 10:21:13", "2019-12-03 10:21:15", "2019-12-03 10:21:16")]
    assert fr["dl_bitrate_bps"].tolist()[0] == 2.5e6 and np.isnan(fr["dl_bitrate_bps"].iloc[1])
    assert fr["ul_bitrate_bps"].tolist() == [120e3, 80e3, 300e3]
    assert fr["rsrp_dbm"].tolist() == [-95, -97, -90] and fr["network_mode"].tolist() == ["LTE", "LTE", "5G"]
    # the phone's zone: 10:21:13 in Dublin in December is 10:21:13 UTC; in Berlin 09:21:13 UTC
    berlin = C.read(f, format="gnettrack", tz="Europe/Berlin")
    assert berlin["time"].iloc[0] == pd.Timestamp("2019-12-03 09:21:13", tz="UTC")
    # G-NetTrack's generic names for level/quality, comma-separated
    g = tmp_path / "level.csv"
    g.write_text("Timestamp,NetworkTech,Level,Qual,DL_bitrate\n2020.01.01_00.00.00,LTE,-101,-14,64\n"
                 "2020.01.01_00.00.01,LTE,-102,-15,128\n")
    lv = C.read(g)
    assert lv.attrs["reader"] == "gnettrack" and lv["rsrp_dbm"].tolist() == [-101, -102]
    assert lv["rsrq_db"].tolist() == [-14, -15] and lv["dl_bitrate_bps"].tolist() == [64e3, 128e3]


def test_gnettrack_log_to_trace_holds_its_steps(tmp_path, run_airlink):
    f = tmp_path / "gnettrack.txt"
    rows = [r.replace("\t-\t", "\t5000\t") for r in GNT_ROWS] + [GNT_ROWS[2].replace("10.21.16", "10.21.17")]
    f.write_text(GNT_HEADER + "\n" + "\n".join(rows) + "\n")
    status, text, err = run_airlink("trace", "from-log", f, "--column", "dl_bitrate_bps", "-o",
                                    tmp_path / "t.parquet", "--json")
    assert status == 0, err
    s = json.loads(text)
    # rows at 13, 15, 16, 17 s (spacing 1 s): 2.5 Mbit/s for 2 s (held over the gap), 5 Mbit/s
    # for 1 s, 10 Mbit/s for 2 s (the last row holds one spacing)
    assert T.read_trace(tmp_path / "t.parquet").values[:, 0].tolist() == [312500.0, 312500.0, 625000.0, 1250000.0,
                                                                           1250000.0]
    assert s["gaps"]["filled_ttis"] == {"hold": 1}


def test_headerless_throughput_trace(tmp_path):
    f = tmp_path / "lumos.txt"
    f.write_text("0\t10.5\n1\t20\n2.5\t0\n")
    fr = C.read(f)
    validate(fr, "throughput")
    assert fr.attrs["reader"] == "throughput-trace" and "from the trace's start" in fr.attrs["time_origin"]
    assert fr["throughput_bps"].tolist() == [10.5e6, 20e6, 0.0]
    assert fr["interval_s"].tolist() == [1.0, 1.5, 1.25]                     # last: the median step
    assert fr["bytes"].tolist() == [10.5e6 / 8, 20e6 * 1.5 / 8, 0.0]
    assert fr["time"].iloc[1] == pd.Timestamp(1e9, unit="ns", tz="UTC")
    e = tmp_path / "epoch.csv"
    e.write_text("1700000000,1.5\n1700000001,2.5\n")
    ep = C.read(e)
    assert ep["time"].iloc[0] == pd.Timestamp("2023-11-14 22:13:20", tz="UTC") and "epoch" in ep.attrs["time_origin"]
    bits = tmp_path / "bits.txt"
    bits.write_text("0 12000000\n1 13000000\n")
    with pytest.raises(FormatError, match="median throughput 1.25e\\+07 is not plausible in Mbit/s"):
        C.read(bits)
    assert C.read(bits, unit="bit/s")["throughput_bps"].tolist() == [12e6, 13e6]
    tr = T.from_log(fr, column="throughput_bps", gaps="error")
    assert tr.values[:, 0].sum() == pytest.approx(fr["bytes"].sum() - 0.0)


def test_per_transfer_table_has_no_time_axis(tmp_path, run_airlink):
    f = tmp_path / "uplink.csv"
    f.write_text("rsrp,rsrq,sinr,cqi,payload,throughput,velocity\n-90,-10,12,11,1,10.5,3.2\n"
                 "-100,-12,3,7,5,4.25,0\n")
    fr = C.read(f)
    validate(fr, "transfers")
    assert fr.attrs["reader"] == "transfers" and fr.attrs["time_axis"] is None
    assert fr.index.name == "transfer" and fr["transfer"].tolist() == [0, 1]
    assert fr["payload_bytes"].tolist() == [1e6, 5e6] and fr["throughput_bps"].tolist() == [10.5e6, 4.25e6]
    assert fr["sinr_db"].tolist() == [12, 3] and fr["velocity"].tolist() == [3.2, 0]
    semi = tmp_path / "semi.csv"                            # ';' and units in the header
    semi.write_text("RSRP [dBm];SINR [dB];Throughput [kbit/s]\n-80;20;5000\n")
    assert C.read(semi)["throughput_bps"].tolist() == [5e6]
    import airlink.inference as inf
    with pytest.raises(AirlinkError, match="cannot tell: no time axis: one row per transfer"):
        inf.prepare(fr)
    with pytest.raises(AirlinkError, match="a trace needs times: no time axis"):
        T.from_log(fr, column="throughput_bps")
    status, _, err = run_airlink("trace", "from-log", f, "-o", tmp_path / "x.parquet")
    assert status == 2 and "read as transfers; a trace needs times: no time axis" in err


def test_xcal_mac_layout_sniffed_and_turned_into_a_trace(run_airlink, tmp_path):
    from pathlib import Path
    xcal = Path(__file__).parents[1] / "traces" / "data" / "xcal_style_mac_20ms_SYNTHETIC.csv"
    raw = pd.read_csv(xcal)
    fr = C.read(xcal)
    validate(fr, "mac")
    assert fr.attrs["reader"] == "xcal" and fr.attrs["layout"] == "mac"
    assert np.allclose(fr["tbs_bytes"], (raw["5G_TBS"].fillna(0) + raw["4G_TBS"]) / 8)
    assert np.allclose(fr["prbs"], raw["5G_RB"] + raw["4G_RB"])
    out = tmp_path / "endc.parquet"
    status, text, err = run_airlink("trace", "from-log", xcal, "-o", out, "--json")
    assert status == 0, err
    assert json.loads(text)["tti_ms"] == 20 and json.loads(text)["column"] == "tbs_bytes"
    assert T.read_trace(out).values[:, 0].tolist() == ((raw["5G_TBS"].fillna(0) + raw["4G_TBS"]) / 8).tolist()


def test_xcal_kpi_layout(tmp_path):
    f = tmp_path / "kpi.csv"
    f.write_text("TIME_STAMP,Event Technology,5G KPI PCell RF Serving SS-RSRP [dBm],5G KPI PCell RF Serving SS-SINR [dB],"
                 "5G KPI PCell Layer1 DL MCS,5G KPI Total Info DL Throughput [Mbps],LTE KPI PCell Serving RSRP [dBm]\n"
                 "2021-04-13 14:22:05.000,5G-NR NSA,-85.5,12.25,27,310.5,-92\n"
                 "2021-04-13 14:22:05.020,5G-NR NSA,-86,11,26,,-93\n")
    fr = C.read(f)
    validate(fr, "rf")
    assert fr.attrs["reader"] == "xcal" and fr.attrs["layout"] == "kpi"
    assert fr["rsrp_dbm"].tolist() == [-85.5, -86] and fr["sinr_db"].tolist() == [12.25, 11]
    assert fr["lte_rsrp_dbm"].tolist() == [-92, -93] and fr["network_mode"].iloc[0] == "5G-NR NSA"
    assert fr["5g_kpi_pcell_layer1_dl_mcs"].tolist() == [27, 26]
    assert fr["5g_kpi_total_info_dl_throughput_bps"].iloc[0] == 310.5e6
    assert fr["time"].iloc[1] - fr["time"].iloc[0] == pd.Timedelta("20ms")


# 5G Tracker's columns, left to right, as the Lumos5G 1.0 dataset's README documents them
# (Narayanan et al., "Lumos5G: Mapping and Predicting Commercial mmWave 5G Throughput", IMC 2020)
TRACKER_HEADER = ("run_num,seq_num,abstractSignalStr,latitude,longitude,movingSpeed,compassDirection,nrStatus,"
                  "lte_rssi,lte_rsrp,lte_rsrq,lte_rssnr,nr_ssRsrp,nr_ssRsrq,nr_ssSinr,Throughput,mobility_mode,"
                  "trajectory_direction,tower_id")
TRACKER_ROWS = ["1,1,2,44.9745,-93.2577,1.25,90.5,CONNECTED,-61,-94,-11,12,-88,-11,15,812.5,walking,CW,16",
                "1,2,2,44.9746,-93.2578,1.5,91,NOT_RESTRICTED,2147483647,-96,-12,9,,,,3.25,walking,CW,16",
                "2,1,3,44.9745,-93.2577,10,180,CONNECTED,-59,-90,-10,20,-80,-10,25,1500,driving,CW,17"]


def test_5gtracker_lumos5g_layout(tmp_path, run_airlink):
    f = tmp_path / "Lumos5G-v1.0.csv"
    f.write_text(TRACKER_HEADER + "\n" + "\n".join(TRACKER_ROWS) + "\n")
    fr = C.read(f)                                         # sniffed
    validate(fr, "rf")
    assert fr.attrs["reader"] == "5gtracker" and fr.attrs["runs"] == 2
    assert fr["time"].is_monotonic_increasing                # in time order, the runs interleaved
    fr = fr.sort_values(["run", "time"]).reset_index(drop=True)
    assert fr["run"].tolist() == [1, 1, 2]
    # seq_num seconds at the epoch: both runs start at 1 s
    assert fr["time"].tolist() == [pd.Timestamp(s, unit="s", tz="UTC") for s in (1, 2, 1)]
    assert fr["dl_bitrate_bps"].tolist() == [812.5e6, 3.25e6, 1500e6]      # Mbit/s
    assert fr["speed_kmh"].tolist() == [1.25 * 3.6, 1.5 * 3.6, 36.0]          # m/s
    assert fr["rsrp_dbm"].tolist() == [-94, -96, -90] and fr["snr_db"].tolist() == [12, 9, 20]
    assert fr["rssi_dbm"].iloc[0] == -61 and np.isnan(fr["rssi_dbm"].iloc[1])   # Android's UNAVAILABLE
    assert fr["nr_rsrp_dbm"].iloc[2] == -80 and np.isnan(fr["nr_sinr_db"].iloc[1])
    assert fr["nr_status"].tolist() == ["CONNECTED", "NOT_RESTRICTED", "CONNECTED"]
    assert fr["cell_id"].astype(str).tolist() == ["16", "16", "17"]
    assert fr["mobility_mode"].tolist() == ["walking", "walking", "driving"]
    status, _, err = run_airlink("collect", f, "-o", tmp_path / "out")
    assert status == 0, err


# G-NetTrack Lite's export as a public parser of it (gnt2influx) names its columns, ISO-style times
LITE_HEADER = ("Timestamp\tLongitude\tLatitude\tSpeed\tOperator\tMCC-MNC\tCGI\tCellName\tNode\tCellID\tLAC\t"
               "NetworkTech\tNetworkMode\tLevel\tQual\tSNR\tCQI\tARFCN\tDL_bitrate\tUL_bitrate")
LITE_ROWS = ["2024-10-01 10:00:00\t139.7671\t35.681\t30.5\tOpA\t440-10\t440-10-1-678\tC1\tN1\t678\t12345\t4G\tLTE\t"
             "-85.2\t-12.3\t15.8\t12\t2140\t50.5\t10.2",
             "2024-10-01 10:00:05\t139.7672\t35.6811\t31\tOpA\t440-10\t440-10-1-679\tC2\tN1\t679\t12345\t5G\tNR\t"
             "-87.1\t-11.9\t16.2\t13\t2140\t48.3\t9.8"]


def test_gnettrack_lite_export_and_unreadable_times(tmp_path, run_airlink):
    f = tmp_path / "lite.txt"
    f.write_text(LITE_HEADER + "\n" + "\n".join(LITE_ROWS) + "\n")
    fr = C.read(f)
    assert fr.attrs["reader"] == "gnettrack"
    assert fr["time"].tolist() == [pd.Timestamp("2024-10-01 10:00:00", tz="UTC"),
                                   pd.Timestamp("2024-10-01 10:00:05", tz="UTC")]
    assert fr["network_mode"].tolist() == ["LTE", "NR"] and fr["operator"].tolist() == ["OpA", "OpA"]
    assert fr["rsrp_dbm"].tolist() == [-85.2, -87.1] and fr["dl_bitrate_bps"].tolist() == [50.5e3, 48.3e3]
    # a time column without one readable time is an error naming it, never an empty frame
    bad = tmp_path / "bad.txt"
    bad.write_text(GNT_HEADER + "\n" + "\n".join(r.replace("2019.12.03_", "03/12/2019 ") for r in GNT_ROWS) + "\n")
    status, _, err = run_airlink("collect", bad, "-o", tmp_path / "o")
    assert status == 2 and err.count("\n") == 1
    assert "bad.txt: Timestamp: no value is a readable time (line 2: '03/12/2019 10.21.13')" in err
