"""Warnings at the top of the report page: the run did not keep its timing, or lost packets.

Two kinds of banner, each naming the fraction, the counts and the file it came from:

* **late TTIs** - a live cell's ``late_fraction`` (``cell.json`` / ``cell-stats.json``) above
  :data:`LATE_TTI_BANNER`: a cell that misses its TTI deadlines no longer shapes traffic the
  way its scheduler says.
* **dropped packets** - per source, ``drops / arrivals`` in packets above
  :data:`DROPPED_PACKETS_BANNER`:

  - the shells' queues, per direction (``link-stats.json``'s ``downlink``/``uplink``
    ``drops_packets`` over ``arrivals_packets``; in a cell run ``cell-stats.json``'s UEs summed
    per direction). These drops are the emulated queue's own behaviour, so the banner says the
    run describes a lossy path, not that it is wrong.
  - the kernel at the shells' TUN devices (``kernel``: ``rx_dropped + tx_dropped`` over the
    packets the devices passed plus those drops). These packets never reached the emulated
    link: the shell did not read them in time, so the run's results are suspect.
  - without either counter file, the Mahimahi-format link logs (``downlink.log``,
    ``uplink.log``, ``cell-logs/ue*.log``): the packets of their ``d`` lines over their ``+``
    (arrival) lines.
"""
from __future__ import annotations

import html

from airlink import rundir
from airlink.report.artifacts import Artifacts

#: share of late TTIs above which the page warns that the run's results are suspect: a cell
#: that misses its TTI deadlines no longer shapes traffic the way its scheduler says
LATE_TTI_BANNER = 0.01

#: share of a source's packets dropped (queue drops per direction, or kernel drops at the
#: shells' devices) above which the page shows a banner with the fraction and its source
DROPPED_PACKETS_BANNER = 0.01

_DIRECTIONS = ("downlink", "uplink")


def _int(v) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else 0


def _kernel_counts(kernel) -> tuple:
    """``(dropped, passed)`` packets over the devices of a ``kernel`` counter dict
    (``{"outer": {...}, "inner": {...}}``; a device read as None counts nothing)."""
    dropped = passed = 0
    for dev in (kernel or {}).values() if isinstance(kernel, dict) else ():
        if isinstance(dev, dict):
            dropped += _int(dev.get("rx_dropped")) + _int(dev.get("tx_dropped"))
            passed += _int(dev.get("rx_packets")) + _int(dev.get("tx_packets"))
    return dropped, passed


def drop_counts(art: Artifacts) -> list:
    """Dropped and offered packets of the run, one dict per source: ``what`` (``"queue"`` or
    ``"kernel"``), ``direction`` (or None), ``dropped``, ``total`` (packets offered: arrivals at a
    queue; passed plus dropped at the devices), ``fraction`` (``dropped / total``, None when
    ``total`` is 0) and ``source`` (the file and its counters, for the banner)."""
    out = []

    def add(what, direction, dropped, total, source):
        out.append({"what": what, "direction": direction, "dropped": dropped, "total": total,
                    "fraction": dropped / total if total else None, "source": source})

    link = _json_of(art, "link-stats")
    cell = art.cell_stats if isinstance(art.cell_stats, dict) else None
    if isinstance(link, dict):
        for d in _DIRECTIONS:
            st = link.get(d)
            if isinstance(st, dict) and "drops_packets" in st:
                add("queue", d, _int(st.get("drops_packets")), _int(st.get("arrivals_packets")),
                    f"link-stats.json: {d} drops_packets / arrivals_packets")
        if "kernel" in link:
            dropped, passed = _kernel_counts(link["kernel"])
            add("kernel", None, dropped, passed + dropped,
                "link-stats.json: kernel rx_dropped + tx_dropped at the shell's TUN devices")
    if cell is not None and isinstance(cell.get("ues"), list):
        ues = [u for u in cell["ues"] if isinstance(u, dict)]
        for d in _DIRECTIONS:
            rows = [u[d] for u in ues if isinstance(u.get(d), dict) and "drops_packets" in u[d]]
            if rows:
                add("queue", d, sum(_int(r.get("drops_packets")) for r in rows),
                    sum(_int(r.get("arrivals_packets")) for r in rows),
                    f"cell-stats.json: {d} drops_packets / arrivals_packets summed over {len(rows)} UE(s)")
        kern = [_kernel_counts(u.get("kernel")) for u in ues if "kernel" in u]
        if kern:
            dropped, passed = sum(k[0] for k in kern), sum(k[1] for k in kern)
            add("kernel", None, dropped, passed + dropped,
                f"cell-stats.json: kernel rx_dropped + tx_dropped at {len(kern)} UE(s)' TUN devices")
    if out:
        return out
    for kind in ("link-log", "cell-log"):
        for p in rundir.find(art.outdir, kind):
            dropped, arrived = _log_counts(art, p)
            if arrived is not None:
                direction = p.stem if p.stem in _DIRECTIONS else None
                add("queue", direction, dropped, arrived,
                    f"{p.relative_to(art.outdir).as_posix()}: packets of its 'd' lines / its '+' lines")
    return out


def _json_of(art: Artifacts, kind: str):
    files = rundir.find(art.outdir, kind)
    return art._json(files[0].relative_to(art.outdir).as_posix()) if files else None


def _log_counts(art: Artifacts, path) -> tuple:
    """``(dropped, arrived)`` packets of a Mahimahi-format link log; ``(0, None)`` with a note
    when it cannot be read."""
    from airlink.traces import read_log
    from airlink.traces.mmlinklog import is_log_file
    if not is_log_file(path):
        return 0, None
    try:
        log = read_log(path)
    except Exception as exc:
        art.notes.append(f"{path.name}: not readable as a link log ({exc})")
        return 0, None
    ev = log["event"]
    return int(log["packets"][ev == "drop"].sum()), int((ev == "arrival").sum())


def late_tti_banner(art: Artifacts) -> str:
    """The late-TTI warning (above :data:`LATE_TTI_BANNER`), or empty."""
    st = (art.cell if isinstance(art.cell, dict) else None) or art.cell_stats or {}
    frac = st.get("late_fraction") if isinstance(st, dict) else None
    if frac is None or not frac > LATE_TTI_BANNER:
        return ""
    return (f'<p class="missing" id="suspect"><b>Results suspect:</b> {100 * frac:.1f} % of the cell\'s TTIs '
            f"({st.get('late_ttis')} of {st.get('ttis')}) were handled late (threshold "
            f"{100 * LATE_TTI_BANNER:g} %): the cell did not keep its timing, so its throughput, delays and "
            f"every inference below describe the machine's load as much as the scheduler.</p>")


def dropped_packets_banners(art: Artifacts) -> str:
    """One warning per drop source above :data:`DROPPED_PACKETS_BANNER`, or empty."""
    parts = []
    for n, c in enumerate(drop_counts(art)):
        frac = c["fraction"]
        if frac is None or not frac > DROPPED_PACKETS_BANNER:
            continue
        share = (f"{100 * frac:.1f} % of the packets ({c['dropped']} of {c['total']}) "
                 f"[{html.escape(c['source'])}; threshold {100 * DROPPED_PACKETS_BANNER:g} %]")
        if c["what"] == "kernel":
            parts.append(
                f'<p class="missing" id="drops-{n}"><b>Results suspect:</b> {share} were dropped by the '
                "kernel at the shell's network devices before the emulated link saw them: the shell did "
                "not read them in time, so losses, throughput and delays below include the machine's.</p>")
        else:
            where = f"{c['direction']} " if c["direction"] else ""
            parts.append(
                f'<p class="missing" id="drops-{n}"><b>Packets dropped:</b> {share} '
                f"were dropped by the {where}queue: TCP's throughput and delays below are shaped by "
                "loss recovery as well as by the scheduler.</p>")
    return "".join(parts)


def banners(art: Artifacts) -> str:
    """Every warning for the top of the page (late TTIs first), or empty."""
    return late_tti_banner(art) + dropped_packets_banners(art)
