"""Small traffic applications for experiments: a bulk TCP download with a chosen congestion
control per socket, and an on-off UDP source. Both directions of a download start from the
client (inside the emulated link) so the server (outside, on the host) needs no address:

- **bulk TCP**: the client connects and sends one JSON line ``{"cc": "bbr", "seconds": 10}``;
  the server sets ``TCP_CONGESTION`` on that accepted socket (Linux; ``reno``, ``cubic``,
  ``bbr`` or anything in ``/proc/sys/net/ipv4/tcp_available_congestion_control``), then sends
  for that many seconds (or ``bytes``) and closes. Each connection has its own algorithm.
  The client's receive window: by default the kernel's autotuning (``net.ipv4.tcp_rmem``);
  ``rwnd_bytes=R`` (``--rwnd 64KiB``) sets ``SO_RCVBUF = R`` on the client socket *before*
  it connects (the window scale is fixed by the SYN), which turns autotuning off. Linux
  doubles the value it is given (``socket(7)``: the other half is for its bookkeeping), so
  the socket's buffer is ``2 R`` and the advertised window about ``R`` (how much of the
  buffer is advertised follows ``net.ipv4.tcp_adv_win_scale``, since Linux 6.6 the measured
  payload-to-memory ratio). Mattar et al.'s receive windows of 8 and 64 KB are
  ``rwnd_bytes=8192`` and ``65536``. The result records the buffer the kernel reports
  (``rcvbuf_bytes``, i.e. ``2 R``).
- **on-off UDP**: the client sends one JSON datagram ``{"rate_bps": 76800, "on_s": 1,
  "off_s": 5, "seconds": 30, "size": 1000}``; the server answers with datagrams at the rate
  during on periods (Mattar et al.'s 1 s on / 5 s off sources at 38.4 and 76.8 kbit/s).

Command line (used by :mod:`airlink.experiment`, handy by hand too)::

    python -m airlink.apps serve --port 5201                # on the host
    python -m airlink.apps fetch 100.64.0.1 5201 --cc bbr --seconds 10 --json
    python -m airlink.apps fetch 100.64.0.1 5201 --cc reno --rwnd 8KiB --seconds 10
    python -m airlink.apps onoff 100.64.0.1 5201 --rate 76.8kbps --on 1 --off 5 --seconds 30
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time

TCP_CONGESTION = getattr(socket, "TCP_CONGESTION", 13)
CHUNK = 64 * 1024


def available_congestion_controls() -> list:
    """Congestion controls this kernel offers (empty when unknown)."""
    try:
        with open("/proc/sys/net/ipv4/tcp_available_congestion_control") as f:
            return f.read().split()
    except OSError:
        return []


def set_congestion_control(sock: socket.socket, name: str) -> str:
    """Set TCP_CONGESTION on one socket and return what the kernel reports back."""
    sock.setsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, name.encode())
    return sock.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()


# ----------------------------------------------------------------------------- server
def _serve_tcp(conn: socket.socket, addr, log: list, lock: threading.Lock):
    with conn:
        f = conn.makefile("rb")
        try:
            req = json.loads(f.readline() or b"{}")
        except ValueError:
            return
        rec = {"proto": "tcp", "client": f"{addr[0]}:{addr[1]}", "cc_requested": req.get("cc")}
        try:
            if req.get("cc"):
                rec["cc"] = set_congestion_control(conn, req["cc"])
            else:
                rec["cc"] = conn.getsockopt(socket.IPPROTO_TCP, TCP_CONGESTION, 16).split(b"\0", 1)[0].decode()
        except OSError as exc:
            rec["error"] = f"TCP_CONGESTION {req.get('cc')!r}: {exc.strerror}"
            with lock:
                log.append(rec)
            return
        seconds, limit = float(req.get("seconds") or 0), int(req.get("bytes") or 0)
        buf = b"\0" * CHUNK
        sent, t0 = 0, time.monotonic()
        try:
            while True:
                if limit and sent >= limit:
                    break
                if seconds and time.monotonic() - t0 >= seconds:
                    break
                n = conn.send(buf if not limit else buf[: min(CHUNK, limit - sent)])
                sent += n
        except OSError:
            pass
        try:
            conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        rec.update(bytes_sent=sent, seconds=time.monotonic() - t0)
        with lock:
            log.append(rec)


def _serve_udp(sock: socket.socket, log: list, lock: threading.Lock, stop: threading.Event):
    while not stop.is_set():
        try:
            data, addr = sock.recvfrom(2048)
        except socket.timeout:
            continue
        except OSError:
            return
        try:
            req = json.loads(data)
        except ValueError:
            continue
        threading.Thread(target=_udp_onoff_sender, args=(sock, addr, req, log, lock), daemon=True).start()


def _udp_onoff_sender(sock, addr, req, log, lock):
    rate = float(req.get("rate_bps", 76800))
    on_s, off_s = float(req.get("on_s", 1.0)), float(req.get("off_s", 5.0))
    seconds, size = float(req.get("seconds", 30)), int(req.get("size", 1000))
    gap = size * 8 / rate if rate > 0 else 1.0
    t0 = time.monotonic()
    sent = seq = 0
    nxt = t0
    payload = bytearray(size)
    while True:
        now = time.monotonic()
        el = now - t0
        if el >= seconds:
            break
        phase = el % (on_s + off_s) if (on_s + off_s) > 0 else 0
        if phase >= on_s:  # off period: sleep to the next on period
            time.sleep(min(on_s + off_s - phase, seconds - el))
            nxt = time.monotonic()
            continue
        if now < nxt:
            time.sleep(nxt - now)
        payload[:8] = seq.to_bytes(8, "big")
        try:
            sock.sendto(payload, addr)
        except OSError:
            break
        seq += 1
        sent += size
        nxt += gap
    try:
        sock.sendto(b"END", addr)
    except OSError:
        pass
    with lock:
        log.append({"proto": "udp", "client": f"{addr[0]}:{addr[1]}", "bytes_sent": sent,
                    "datagrams": seq, "rate_bps": rate, "on_s": on_s, "off_s": off_s})


class _Log(list):
    """Transfer records, rewritten atomically to ``path`` after each one (so the file is
    complete whenever the server is stopped or killed)."""

    def __init__(self, path):
        super().__init__()
        self.path = path
        self._flush()

    def append(self, rec):
        super().append(rec)
        self._flush()

    def _flush(self):
        if not self.path:
            return
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(list(self), f, indent=1)
        os.replace(tmp, self.path)


def serve(port: int, *, host: str = "0.0.0.0", log_path=None, ready_path=None,
          stop: threading.Event | None = None) -> None:
    """Serve bulk TCP downloads and on-off UDP streams on ``port`` (TCP and UDP) until
    ``stop`` is set or SIGTERM; write one JSON record per transfer to ``log_path``."""
    import signal
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    log = _Log(log_path)  # appended to under `lock` only
    lock = threading.Lock()
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    tcp.bind((host, port))
    tcp.listen(64)
    tcp.settimeout(0.2)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((host, port))
    udp.settimeout(0.2)
    threading.Thread(target=_serve_udp, args=(udp, log, lock, stop), daemon=True).start()
    if ready_path:
        with open(ready_path, "w") as f:
            f.write(str(os.getpid()))
    threads = []
    try:
        while not stop.is_set():
            try:
                conn, addr = tcp.accept()
            except socket.timeout:
                continue
            conn.settimeout(None)
            t = threading.Thread(target=_serve_tcp, args=(conn, addr, log, lock), daemon=True)
            t.start()
            threads.append(t)
    except KeyboardInterrupt:
        pass
    finally:
        tcp.close()
        for t in threads:
            t.join(timeout=2)
        udp.close()


# ----------------------------------------------------------------------------- clients
def set_receive_buffer(sock: socket.socket, rwnd_bytes: int) -> int:
    """Set ``SO_RCVBUF = rwnd_bytes`` on ``sock`` and return the buffer the kernel reports,
    ``2 * rwnd_bytes`` on Linux (it doubles the value for its bookkeeping, ``socket(7)``).

    Above ``net.core.rmem_max`` the kernel silently caps the value: then ``SO_RCVBUFFORCE``
    is tried (needs CAP_NET_ADMIN), and if the buffer is still short an
    :class:`~airlink.core.errors.AirlinkError` says so rather than running with a window
    other than the one asked for."""
    from airlink.core.errors import AirlinkError   # here: airlink.traces imports pandas
    rwnd_bytes = int(rwnd_bytes)
    if rwnd_bytes <= 0:
        raise AirlinkError(f"receive window must be a positive number of bytes, got {rwnd_bytes}")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rwnd_bytes)
    got = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    if got < 2 * rwnd_bytes:
        try:
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), rwnd_bytes)
            got = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        except OSError:
            pass
    if got < 2 * rwnd_bytes:
        raise AirlinkError(f"receive window of {rwnd_bytes} bytes: the kernel gave a buffer of {got} bytes "
                           f"(at most net.core.rmem_max; raise it or run as root)")
    return got


def fetch(host: str, port: int, *, cc: str | None = None, seconds: float = 10.0,
          nbytes: int = 0, rwnd_bytes: int | None = None, timeout: float = 30.0) -> dict:
    """Bulk TCP download of ``seconds`` (or ``nbytes``) from a :func:`serve` server with the
    server's socket using congestion control ``cc``. ``rwnd_bytes``: the client's receive
    window, ``SO_RCVBUF`` set before connecting (see :func:`set_receive_buffer`; None = the
    kernel's autotuning). Returns bytes, seconds, goodput (bytes x 8 / seconds, bit/s) and
    the receive buffer the kernel reported (``rcvbuf_bytes``)."""
    t0 = time.monotonic()
    addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    with socket.socket(addr[0], socket.SOCK_STREAM) as s:
        rcvbuf = None if rwnd_bytes is None else set_receive_buffer(s, rwnd_bytes)
        s.settimeout(timeout)
        s.connect(addr[4])
        if rcvbuf is None:
            rcvbuf = s.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        s.sendall((json.dumps({"cc": cc, "seconds": seconds, "bytes": nbytes}) + "\n").encode())
        got = 0
        while True:
            data = s.recv(CHUNK)
            if not data:
                break
            got += len(data)
        local = s.getsockname()
    el = time.monotonic() - t0
    return {"app": "bulk", "cc": cc, "bytes": got, "seconds": el, "goodput_bps": got * 8 / el if el else 0.0,
            "rwnd_bytes": rwnd_bytes, "rcvbuf_bytes": rcvbuf,
            "local": f"{local[0]}:{local[1]}", "server": f"{host}:{port}"}


def onoff(host: str, port: int, *, rate_bps: float = 76800, on_s: float = 1.0, off_s: float = 5.0,
          seconds: float = 30.0, size: int = 1000) -> dict:
    """Receive an on-off UDP stream (Mattar et al.'s sources) from a :func:`serve` server."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.settimeout(max(off_s, 1.0) + 2.0)
        req = {"rate_bps": rate_bps, "on_s": on_s, "off_s": off_s, "seconds": seconds, "size": size}
        s.sendto(json.dumps(req).encode(), (host, port))
        got = n = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < seconds + 5:
            try:
                data, _ = s.recvfrom(65536)
            except socket.timeout:
                break
            if data == b"END":
                break
            got += len(data)
            n += 1
    el = time.monotonic() - t0
    return {"app": "onoff", "bytes": got, "datagrams": n, "seconds": el, **req}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m airlink.apps", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--port", type=int, default=5201)
    s.add_argument("--host", default="0.0.0.0")
    s.add_argument("--log")
    s.add_argument("--ready")
    f = sub.add_parser("fetch")
    f.add_argument("host")
    f.add_argument("port", type=int)
    f.add_argument("--cc")
    f.add_argument("--seconds", type=float, default=10.0)
    f.add_argument("--bytes", type=int, default=0)
    f.add_argument("--rwnd", help="receive window, e.g. 8KiB or 65536: SO_RCVBUF on the client socket "
                                  "(the kernel doubles it); default: the kernel's autotuning")
    f.add_argument("--json", action="store_true")
    o = sub.add_parser("onoff")
    o.add_argument("host")
    o.add_argument("port", type=int)
    o.add_argument("--rate", default="76.8kbps")
    o.add_argument("--on", type=float, default=1.0)
    o.add_argument("--off", type=float, default=5.0)
    o.add_argument("--seconds", type=float, default=30.0)
    o.add_argument("--size", type=int, default=1000)
    o.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.cmd == "serve":
        serve(a.port, host=a.host, log_path=a.log, ready_path=a.ready)
        return 0
    if a.cmd == "fetch":
        if a.rwnd is None:
            res = fetch(a.host, a.port, cc=a.cc, seconds=a.seconds, nbytes=a.bytes)
        else:   # airlink.traces imports pandas: only when a size is to be read
            from airlink.traces import parse_size
            from airlink.core.errors import AirlinkError
            try:
                res = fetch(a.host, a.port, cc=a.cc, seconds=a.seconds, nbytes=a.bytes,
                            rwnd_bytes=parse_size(a.rwnd))
            except AirlinkError as exc:
                print(f"airlink: error: {exc}", file=sys.stderr)
                return 2
    else:
        from airlink.traces import parse_rate
        res = onoff(a.host, a.port, rate_bps=parse_rate(a.rate), on_s=a.on, off_s=a.off,
                    seconds=a.seconds, size=a.size)
    print(json.dumps(res) if a.json else
          f"{res['app']}: {res['bytes']} bytes in {res['seconds']:.2f} s "
          f"({res['bytes'] * 8 / max(res['seconds'], 1e-9) / 1e6:.3f} Mbit/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
