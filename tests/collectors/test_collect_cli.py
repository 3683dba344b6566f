"""`airlink collect`: Parquet frames with provenance, --json summary, mapping files."""
from __future__ import annotations

import json
import shutil
import subprocess

import pandas as pd
import pyarrow.parquet as pq
import pytest

from airlink.traces import validate


def test_capture_and_log(shared_data, tmp_path, run_airlink):
    cap = shared_data / "tcp-pcaps/zeek-head/206_example_a.pcap"
    ucc = next((shared_data / "ucc-5g").rglob("*.csv"))
    out = tmp_path / "frames"
    status, stdout, err = run_airlink("collect", cap, ucc, "-o", out, "--resolution", "100ms", "--json")
    assert status == 0, err
    summary = json.loads(stdout, parse_constant=lambda c: pytest.fail(f"{c} in --json: not strict JSON"))
    flows = summary["files"][0]["flows"]
    for f in flows:
        for k in ("src", "dst", "sport", "dport", "packets", "bytes", "retransmissions",
                  "spurious_retransmissions", "rtt_ms_median"):
            assert k in f
    big = max(flows, key=lambda f: f["bytes"])
    assert big["retransmissions"] > 0 and big["rtt_ms_median"] > 100      # a transatlantic download
    tcp = pd.read_parquet(out / "206_example_a.tcp.parquet")
    validate(tcp, "tcp")
    assert (tcp["time"].diff().dropna() >= pd.Timedelta(0)).all()
    meta = json.loads(pq.read_schema(out / "206_example_a.flows.parquet").metadata[b"airlink"])
    assert meta["source"] == str(cap) and "airlink_version" in meta
    rf = pd.read_parquet(out / f"{ucc.stem}.rf.parquet")
    validate(rf, "rf")
    assert summary["files"][1]["reader"] == "ucc"
    assert json.loads((out / "summary.json").read_text()) == summary


def test_mapping_cli(tmp_path, run_airlink):
    data = tmp_path / "log.csv"
    data.write_text("when,q\n2024-01-01 10:00:00,-100\n2024-01-01 10:00:01,-101\n")
    mp = tmp_path / "m.yaml"
    mp.write_text("kind: rf\ntime: {column: when, tz: Europe/Berlin}\ncolumns: {q: rsrp_dbm}\n")
    status, stdout, err = run_airlink("collect", data, "--mapping", mp, "-o", tmp_path / "o")
    assert status == 0, err
    rf = pd.read_parquet(tmp_path / "o" / "log.rf.parquet")
    assert rf["time"].iloc[0] == pd.Timestamp("2024-01-01 09:00:00", tz="UTC")
    status, _, err = run_airlink("collect", data, "-o", tmp_path / "o2")     # a new folder: o is not empty
    assert status == 2 and "--mapping" in err and "Traceback" not in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: rf\ntime: {column: nope}\ncolumns: {q: rsrp_dbm}\n")
    status, _, err = run_airlink("collect", data, "--mapping", bad, "-o", tmp_path / "o3")
    assert status == 2 and "nope" in err and len(err.strip().splitlines()) == 1


def test_packages_load_pandas_only_when_used():
    """`airlink collect` reaches the capture reader without importing pandas (~0.3 s): the
    packages' public names load on first use (PEP 562) and are all still there."""
    import subprocess
    import sys
    code = (
        "import sys\n"
        "import airlink.traces as T, airlink.collectors as C\n"
        "from airlink.cli import build_parser\n"
        "build_parser()\n"
        "from airlink.collectors import _tcpinput, _connections, _timeorder, collect, tcp\n"
        "assert 'pandas' not in sys.modules, 'pandas imported before the analysis needs it'\n"
        "from airlink.collectors.timegrid import to_grid\n"
        "for mod in (T, C):\n"
        "    missing = [n for n in mod.__all__ if not hasattr(mod, n)]\n"
        "    assert not missing, missing\n"
        "    assert set(mod.__all__) <= set(dir(mod))\n"
        "assert callable(C.align) and C.align is C.timegrid.align\n"
        "assert T.mahimahi.DEFAULT_OPPORTUNITY_BYTES == T.DEFAULT_OPPORTUNITY_BYTES == 1500\n"
        "assert C.read_pcap is C.pcap.read and C.TcpAnalysis is C.tcp.TcpAnalysis\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_console_script_ends_at_once_with_everything_written(shared_data, tmp_path):
    """The installed `airlink` script ends `collect` without the interpreter's teardown
    (airlink.cli.entry): its exit status, its JSON on a pipe and every output file are as
    after a normal exit; a failure still exits 2 with its one line."""
    import sys
    from pathlib import Path
    script = Path(sys.executable).with_name("airlink")
    cap = shared_data / "tcp-pcaps/zeek-head/ssh.pcap"
    out = tmp_path / "frames"
    r = subprocess.run([str(script), "collect", str(cap), "-o", str(out), "--json"], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert json.loads((out / "summary.json").read_text()) == summary
    frames = {name: pd.read_parquet(out / f"ssh.{name}.parquet") for name in ("packets", "flows", "tcp", "events")}
    assert len(frames["packets"]) == summary["files"][0]["packets"]
    if shutil.which("tshark"):
        # every file is complete: its counts are tshark's on the same capture
        def count(*display_filter):
            return len(subprocess.run(["tshark", "-r", str(cap), *display_filter, "-T", "fields",
                                       "-e", "frame.number"], capture_output=True, text=True,
                                      check=True).stdout.split())
        streams = subprocess.run(["tshark", "-r", str(cap), "-Y", "tcp", "-T", "fields", "-e", "tcp.stream"],
                                 capture_output=True, text=True, check=True).stdout.split()
        ev = frames["events"]["event"]
        assert len(frames["packets"]) == count()
        assert (frames["flows"]["proto"] == 6).sum() == len(set(streams))
        assert frames["tcp"]["packets"].sum() == len(streams)           # per-bin packets add up to the TCP frames
        assert (ev == "dupack").sum() == count("-Y", "tcp.analysis.duplicate_ack")
        assert (ev == "retransmission").sum() == count("-Y", "tcp.analysis.retransmission or "
                                                       "tcp.analysis.fast_retransmission or "
                                                       "tcp.analysis.spurious_retransmission")
    assert sorted(p.name for p in out.iterdir() if p.name.endswith(".partial")) == []
    bad = subprocess.run([str(script), "collect", str(tmp_path / "none.pcap"), "-o", str(out)],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stderr.strip().startswith("airlink: error:")


def test_collect_runs_without_cyclic_gc_and_blas_threads(shared_data, tmp_path):
    """`airlink collect` runs with the cyclic garbage collector off (main() turns it back on
    for an in-process caller) and numpy's OpenBLAS at one thread (its server threads spin
    ~0.1 s of CPU at import) unless the user set OPENBLAS_NUM_THREADS; the outputs do not
    depend on the BLAS threads."""
    import os
    import subprocess
    import sys
    cap = shared_data / "tcp-pcaps/zeek-head/ssh.pcap"
    code = (
        "import gc, json, os, sys\n"
        "import airlink.cli.collect as c\n"
        "from airlink.cli import main\n"
        "seen = {}\n"
        "real = c.cmd_collect\n"
        "def spy(args):\n"
        "    seen['gc'] = gc.isenabled()\n"
        "    return real(args)\n"
        "c.cmd_collect = spy\n"
        "status = main(['collect', sys.argv[1], '-o', sys.argv[2]])\n"
        "from threadpoolctl import threadpool_info\n"
        "blas = [i['num_threads'] for i in threadpool_info() if i['internal_api'] == 'openblas']\n"
        "print(json.dumps({'status': status, 'gc_during': seen['gc'], 'gc_after': gc.isenabled(),\n"
        "                  'blas': blas, 'env': os.environ.get('OPENBLAS_NUM_THREADS')}))\n")
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    runs = {}
    for name, extra in (("default", {}), ("user", {"OPENBLAS_NUM_THREADS": "2"})):
        r = subprocess.run([sys.executable, "-c", code, str(cap), str(tmp_path / name)], capture_output=True,
                           text=True, env={**env, **extra})
        assert r.returncode == 0, r.stderr
        runs[name] = json.loads(r.stdout.splitlines()[-1])
    assert runs["default"] == {"status": 0, "gc_during": False, "gc_after": True, "blas": [1], "env": "1"}
    assert runs["user"]["env"] == "2" and runs["user"]["blas"] == [min(2, os.cpu_count() or 1)]
    for name in ("packets", "flows", "tcp", "events"):
        a, b = (pq.read_table(tmp_path / run / f"ssh.{name}.parquet") for run in ("default", "user"))
        assert a.equals(b), name


def test_collect_capture_equals_reading_then_analysing(shared_data, tmp_path):
    """The collect pipeline (``collectors.collect_capture``: streamed analysis, packets pass
    in a thread, small --max-packets so flows go in groups) writes the frames that reading
    the whole capture (``read_pcap``) and analysing that frame give; the provenance it is
    given is in every file, and a folder path or a run folder both take the files."""
    import airlink.collectors as C
    from airlink.rundir import RunFolder
    cap = shared_data / "tcp-pcaps/zeek-head/206_example_b.pcap"
    packets = C.read_pcap(cap)
    assert packets["flow"].value_counts().max() > 500      # a flow streamed in time chunks at 500
    ref = C.analyze_tcp(packets, resolution="100ms")
    (tmp_path / "plain").mkdir()
    rec = C.collect_capture(cap, tmp_path / "plain", prefix="x.", resolution="100ms", max_packets=500,
                            provenance={"run": "test"})
    assert list(rec["outputs"]) == ["packets", "flows", "tcp", "tcp-events"]
    assert rec["packets"] == packets.attrs["records"] and len(rec["flows"]) == len(ref.flows)
    assert rec["flows"] == ref.summary()
    expected = {"packets": packets, "flows": ref.flows, "tcp": ref.series, "tcp-events": ref.events}
    for kind, path in rec["outputs"].items():
        assert path.name == f"x.{ {'tcp-events': 'events'}.get(kind, kind)}.parquet"
        # categories in the order the file names them (sorted when streamed): values compared
        pd.testing.assert_frame_equal(pd.read_parquet(path), expected[kind], check_exact=True,
                                      check_categorical=False, obj=kind)
        prov = json.loads(pq.read_schema(path).metadata[b"airlink.provenance"])
        assert prov["run"] == "test", kind
    folder = RunFolder.create(tmp_path / "run", manifest=False)
    rec = C.collect_capture(cap, folder, packets=False)
    assert list(rec["outputs"]) == ["flows", "tcp", "tcp-events"]
    assert all(p.parent == folder.path for p in rec["outputs"].values())


def short_connections(path, n=40):
    """``n`` three-packet connections from distinct clients to 10.0.0.1:80, one after
    another; returns each connection's IP bytes (both directions) by (client, port)."""
    from tests.collectors.pcapcraft import link_wrap, pcap_bytes, tcp_packet
    recs, size_of = [], {}
    t = 1_700_000_000_000_000_000
    for k in range(n):
        cli, port, pay = f"10.1.{k // 200}.{k % 200 + 1}", 30000 + k, (k * 37) % 400
        pk = [tcp_packet(cli, "10.0.0.1", port, 80, seq=1, flags="S"),
              tcp_packet("10.0.0.1", cli, 80, port, seq=7, ack=2, flags="SA"),
              tcp_packet(cli, "10.0.0.1", port, 80, seq=2, ack=8, flags="PA", payload=b"q" * pay)]
        size_of[(cli, port)] = sum(len(p) for p in pk)       # IP bytes, both directions
        for i, p in enumerate(pk):
            recs.append((t + k * 1_000_000 + i * 100_000, link_wrap(p, 1)))
    path.write_bytes(pcap_bytes(recs))
    return size_of


def test_packet_row_groups_hold_their_own_addresses(tmp_path):
    """Each row group of the packets frame carries the addresses of its own rows as its
    dictionary (sorted), not the capture's whole list; read back, the values are those of
    the frame read in one piece."""
    from airlink import collectors as C
    from airlink.collectors.pcap import iter_packet_tables
    cap = tmp_path / "short.pcap"
    short_connections(cap, 60)
    a = C.analyze_tcp(cap)
    tables = list(iter_packet_tables(cap, flows=a.flows, max_lateness_ns=a.max_lateness_ns, batch_bytes=2048))
    assert len(tables) > 10
    for t in tables:
        for name in ("src", "dst"):
            col = t.column(name).combine_chunks()
            shown = col.dictionary.to_pylist()
            assert shown == sorted(set(col.to_pylist())) and len(shown) < 20
    whole = C.read_pcap(cap)
    import pyarrow as pa
    got = pa.concat_tables(tables).to_pandas()
    for name in ("src", "dst"):
        assert got[name].astype(str).tolist() == whole[name].astype(str).tolist()


def test_summary_lists_the_largest_flows(tmp_path, run_airlink):
    """``--summary-flows N``: summary.json and --json list the N flows with the most bytes
    (the sizes known from the capture's construction), in flow order, say how many flows
    there are and that the rest are in the flows frame; 0 lists every flow."""
    cap = tmp_path / "short.pcap"
    size_of = short_connections(cap)
    status, out, err = run_airlink("collect", cap, "-o", tmp_path / "a", "--summary-flows", "5", "--json")
    assert status == 0, err
    rec = json.loads(out)["files"][0]
    assert json.loads((tmp_path / "a" / "summary.json").read_text())["files"][0] == rec
    biggest = sorted(size_of, key=lambda c: -size_of[c])[:5]
    assert {(f["src"], f["sport"]) for f in rec["flows"]} == set(biggest)
    assert [f["flow"] for f in rec["flows"]] == sorted(f["flow"] for f in rec["flows"])
    assert all(f["bytes"] == size_of[(f["src"], f["sport"])] for f in rec["flows"])
    assert rec["flows_total"] == 40 and "short.flows.parquet" in rec["flows_listed"]
    assert len(pd.read_parquet(tmp_path / "a" / "short.flows.parquet")) == 40
    status, out, err = run_airlink("collect", cap, "-o", tmp_path / "b", "--summary-flows", "0", "--json")
    rec = json.loads(out)["files"][0]
    assert status == 0 and len(rec["flows"]) == 40 and "flows_listed" not in rec
    status, out, err = run_airlink("collect", cap, "-o", tmp_path / "c")
    assert status == 0 and "40 flows" in out.splitlines()[0]


def test_address_texts_against_ipaddress():
    """IPv4 through inet_ntoa and IPv6 through ipaddress give ipaddress's texts."""
    import ipaddress

    import numpy as np

    from airlink.collectors._connections import V6_BASE, address_names
    rng = np.random.default_rng(3)
    v4 = rng.integers(0, 2**32, 500).tolist() + [0, 2**32 - 1, 0x0A000001]
    v6 = [(int(h), int(lo)) for h, lo in zip(rng.integers(0, 2**63, 40).tolist(), rng.integers(0, 2**63, 40).tolist())]
    v6 += [(0, 1), (0x20010DB8 << 32, 0), (0, 0xFFFF0A000001), (2**64 - 1, 2**64 - 1)]
    ids = np.array(v4 + [V6_BASE + i for i in range(len(v6))] + v4[:7], np.int64)
    want = [str(ipaddress.IPv4Address(a)) for a in v4] + \
        [str(ipaddress.IPv6Address((h << 64) | lo)) for h, lo in v6] + [str(ipaddress.IPv4Address(a)) for a in v4[:7]]
    assert address_names(ids, v6).tolist() == want
    assert address_names(np.zeros(0, np.int64), []).tolist() == []


def test_reader_options_from_the_command_line(shared_data, tmp_path, run_airlink):
    """A headerless throughput trace in bit/s is refused as Mbit/s with the flag that reads it;
    with ``--reader-option unit=bit/s`` its rates are the file's numbers. An option of another
    reader than the one that read the file, an unknown name, a malformed item or an option
    given to a capture is a one-line error, and nothing is left behind."""
    trace = tmp_path / "down.txt"
    trace.write_text("0 12000000\n1 15000000\n2 9000000\n3 11500000\n")
    status, _, err = run_airlink("collect", trace, "-o", tmp_path / "a")
    assert status == 2 and "(pass unit='bit/s' or 'kbit/s') (on the command line: --reader-option unit=bit/s)" in err, err
    status, _, err = run_airlink("collect", trace, "-o", tmp_path / "a", "--reader-option", "unit=bit/s")
    assert status == 0, err
    frame = pd.read_parquet(tmp_path / "a" / "down.throughput.parquet")
    assert frame["throughput_bps"].tolist() == [12e6, 15e6, 9e6, 11.5e6]
    ucc = next((shared_data / "ucc-5g").rglob("*.csv"))
    cap = shared_data / "tcp-pcaps/zeek-head/206_example_a.pcap"
    for args, message in [
        ([ucc, "--reader-option", "unit=bit/s"], f"{ucc}: read as ucc, which takes no option 'unit'"),
        ([ucc, "--format", "ucc", "--reader-option", "unit=bit/s"], "not an option of the ucc reader"),
        ([trace, "--reader-option", "speed=3"], "--reader-option speed: not an option of any log reader "
                                               "(options: bin_ms, payload_unit,"),
        ([trace, "--reader-option", "unit"], "need NAME=VALUE"),
        ([trace, "--reader-option", "unit=bit/s", "--reader-option", "unit=kbit/s"], "given twice"),
        ([cap, "--reader-option", "unit=bit/s"], "a capture takes no --reader-option"),
    ]:
        status, _, err = run_airlink("collect", *args, "-o", tmp_path / "b")
        assert status == 2 and message in err and err.count("\n") == 1, (args, err)
        assert not (tmp_path / "b").exists()
