"""What runs inside the emulated link (``python -m airlink.experiment inside PLAN.json``)."""
from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from airlink import rundir
from airlink.experiment.live import _start_tcpdump, _stop


def run_inside(plan_path) -> int:
    """What runs inside the emulated link: tcpdump on the namespace's interfaces, then the
    applications together (each at its start offset), then stop tcpdump. Writes one JSON
    result per application; returns 0 when every application succeeded. In a cell (the plan
    has ``ues``), each UE runs the list and capture of its ``$AIRLINK_UE``."""
    import threading
    from airlink import apps as A
    plan = json.loads(Path(plan_path).read_text())
    base = os.environ.get("AIRLINK_BASE", "127.0.0.1")
    apps, pcap = plan.get("apps", []), plan.get("pcap")
    if "ues" in plan:   # a cell: every UE runs this with its own $AIRLINK_UE and its own list
        ue = os.environ.get("AIRLINK_UE", "")
        apps, pcap = plan["ues"].get(ue, []), plan["pcaps"].get(ue)
    dump = _start_tcpdump(Path(pcap), plan["ports"], plan["snaplen"]) if plan.get("capture") and pcap and apps else None
    failures = []

    def one(entry):
        time.sleep(entry.get("start", 0))
        t0 = time.monotonic()
        try:
            if entry["kind"] == "bulk":
                res = A.fetch(base, entry["port"], cc=entry.get("cc"), seconds=entry["seconds"],
                              rwnd_bytes=entry.get("rwnd_bytes"))
            elif entry["kind"] == "onoff":
                res = A.onoff(base, entry["port"], rate_bps=entry["rate_bps"], on_s=entry["on_s"],
                              off_s=entry["off_s"], seconds=entry["seconds"], size=entry["size"])
            elif entry["kind"] == "iperf3":
                r = subprocess.run(["iperf3", "-c", base, "-p", str(entry["port"]), "-J", *entry["args"]],
                                   capture_output=True, text=True, timeout=entry["seconds"] + 60)
                doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
                end = doc.get("end", {})
                recv = end.get("sum_received", {}) or end.get("sum", {})
                res = {"app": "iperf3", "status": r.returncode, "goodput_bps": recv.get("bits_per_second", 0.0),
                       "bytes": recv.get("bytes", 0), "seconds": recv.get("seconds", 0.0),
                       "cc": end.get("sender_tcp_congestion"), "error": doc.get("error")}
                if not res["error"]:
                    res.pop("error")
            else:
                r = subprocess.run(entry["command"], shell=True, capture_output=True, text=True,
                                   env={**os.environ, "AIRLINK_BASE": base})
                res = {"app": "command", "command": entry["command"], "status": r.returncode,
                       "stdout": r.stdout[-4000:], "stderr": r.stderr[-2000:]}
                if r.returncode != 0:
                    res["error"] = f"exit status {r.returncode}"
        except Exception as exc:  # reported in the result, the other apps go on
            res = {"app": entry["kind"], "error": f"{type(exc).__name__}: {exc}"}
        res["elapsed_s"] = time.monotonic() - t0
        if "error" in res:
            failures.append(res)
        rundir.write_json(entry["out"], res)

    threads = [threading.Thread(target=one, args=(e,)) for e in apps]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=plan.get("timeout", 600))
    if dump is not None:
        time.sleep(0.3)
        _stop(dump)
    return 1 if failures else 0
