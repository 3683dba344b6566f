"""tshark as the reference of the TCP analysis: its tcp.analysis.* flags per frame, and which
of a capture's frames carry only bytes the capture had seen before (from tshark's own
sequence numbers)."""
from __future__ import annotations

import subprocess

FLAGS = ["retransmission", "fast_retransmission", "spurious_retransmission", "out_of_order",
         "duplicate_ack", "zero_window"]


def tshark_flags(path) -> dict:
    """``{flag: set of 0-based frame numbers}`` for each tcp.analysis flag of :data:`FLAGS`."""
    out = subprocess.run(["tshark", "-r", str(path), "-T", "fields", "-e", "frame.number",
                          *sum((["-e", f"tcp.analysis.{f}"] for f in FLAGS), [])],
                         capture_output=True, text=True, check=True).stdout
    sets = {f: set() for f in FLAGS}
    for line in out.splitlines():
        parts = line.split("\t")
        for f, v in zip(FLAGS, parts[1:]):
            if v.strip():
                sets[f].add(int(parts[0]) - 1)
    return sets


def sent_before(path, frames) -> set:
    """Of ``frames`` (0-based), those whose payload bytes had all been captured before in
    the same stream and direction: the union of the earlier segments' [seq, seq + len)
    (tshark's relative sequence numbers) covers theirs. Such a segment passed the capture
    point once already: sent again, not reordered."""
    out = subprocess.run(["tshark", "-r", str(path), "-Y", "tcp", "-T", "fields", "-e", "frame.number", "-e",
                          "tcp.stream", "-e", "tcp.srcport", "-e", "tcp.seq", "-e", "tcp.len"],
                         capture_output=True, text=True, check=True).stdout
    covered, found = {}, set()
    for line in out.splitlines():
        num, stream, sport, seq, ln = line.split("\t")
        i, lo, hi = int(num) - 1, int(seq), int(seq) + int(ln)
        if hi == lo:
            continue
        spans = covered.setdefault((stream, sport), [])
        if i in frames:
            left = lo
            for a, b in sorted(spans):
                if a <= left < b:
                    left = b
            if left >= hi:
                found.add(i)
        spans.append((lo, hi))
    return found
