"""The cell shell's radio process (airlink.replay.cell_radio.RadioFeed), without root.

The process must hand the shell exactly the inputs the simulator's own Radio makes (same
seed, same chunks: the identical-decisions guarantee rests on it), write the MAC rows the
shell gives it, surface its failures as errors and leave no process behind.
"""
from __future__ import annotations

import os
import time

import numpy as np
import pytest

from airlink.replay.cell_radio import RadioFeed
from airlink.sim.engine import check_config, make_scheduler, resolve_config
from airlink.sim.step import Radio, n_tti_of
from airlink.core.errors import AirlinkError


def _radio(duration="0.35s", **over):
    cfg = resolve_config("quick", {"scheduler": "pf", "chunk_elements": 3000, **over})
    cfg["duration"], cfg["seed"] = duration, 4
    n_u, n_c = check_config(cfg)
    return Radio(cfg, make_scheduler("pf", cfg), n_users=n_u, n_subchannels=n_c, n_tti=n_tti_of(cfg), live=True)


def _gone(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


class _Rows:
    """A MAC sink that records, in the process, what it was given (to a file)."""

    def __init__(self, path):
        self.path = path

    def write(self, out, live, sinr_db, sinr_rep_db, k0, wall_start_ns):
        with open(self.path, "a") as f:
            f.write(f"{k0} {len(out['served'])} {out['served'].sum():.6f} {live['lateness_us'].sum()} "
                    f"{float(sinr_db.sum()):.3f} {wall_start_ns}\n")

    def close(self, written):
        with open(self.path, "a") as f:
            f.write(f"closed {written}\n")


@pytest.mark.parametrize("with_mac, delay", [(True, 2), (False, 2), (True, 0)],
                         ids=["mac-log", "no-mac-log", "no-csi-delay"])
def test_chunks_are_the_radios_own_inputs_in_order(tmp_path, with_mac, delay):
    """Every chunk (the last one short) equals what an identical Radio makes in this process
    (its channel written straight into the shared slot, through the CSI delay line or
    without one); its outputs come zeroed although the slot (3 of them for 12 chunks) was
    written before."""
    ref = _radio(csi_delay_tti=delay)
    feed = RadioFeed(_radio(csi_delay_tti=delay), horizon=ref.n_tti, ahead=2,
                     mac=_Rows(tmp_path / "rows") if with_mac else None)
    assert feed.slots[0].line is not None       # the channel is made in the slot, not copied
    pid = feed.pid
    try:
        assert ref.chunk < ref.n_tti and ref.n_tti % ref.chunk != 0      # several chunks, a short last one
        expected_rows = []
        for k0 in range(0, ref.n_tti, ref.chunk):
            n = min(ref.chunk, ref.n_tti - k0)
            want = ref.inputs(k0, n)
            slot, got, out, live = feed.next_chunk()
            assert (got.k0, got.n) == (k0, n)
            for name in ("real", "rep", "arrivals", "u_err", "perm", *(("sinr_db", "sinr_rep_db") if with_mac else ())):
                assert np.array_equal(getattr(got, name), getattr(want, name)), name
            # the outputs come zeroed; the shell fills some rows and hands the slot back
            assert all(not a.any() for a in (*out.values(), *live.values()))
            rows = n - 1
            out["served"][:rows] = 1.5
            live["lateness_us"][:rows] = 7
            feed.release(slot, rows, k0, 1000 + k0)
            expected_rows.append(f"{k0} {rows} {1.5 * rows * ref.n_users:.6f} {7 * rows * ref.n_users} "
                                 f"{float(want.sinr_db[:rows].sum()):.3f} {1000 + k0}")
        with pytest.raises(AirlinkError, match="past its radio's horizon"):
            feed.next_chunk()
        assert feed.close() > 0
        if with_mac:
            assert (tmp_path / "rows").read_text().splitlines() == [*expected_rows, "closed True"]
        else:
            assert not (tmp_path / "rows").exists()
    finally:
        feed.kill()
    assert _gone(pid)


class _Broken(_Rows):
    def write(self, *args):
        raise OSError(28, "No space left on device")


@pytest.mark.parametrize("via", ["next chunk", "next request"])
def test_a_failure_in_the_process_is_an_error_of_the_shell(tmp_path, via):
    feed = RadioFeed(_radio(), horizon=_radio().n_tti, ahead=1, mac=_Broken(tmp_path / "rows"))
    pid = feed.pid
    try:
        slot, inp, out, live = feed.next_chunk()
        feed.release(slot, 3, inp.k0, 0)
        # the process ends with the shell's next request unread, before the shell reads
        # on: the kernel then reports a reset first, and the messages queued behind it
        # must still be read
        while open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
            time.sleep(0.01)
        if via == "next chunk":
            # the chunk made before the failure still arrives; the one after it is the error
            with pytest.raises(AirlinkError, match="radio process failed: OSError.*No space left on device"):
                for _ in range(2):
                    feed.next_chunk()
        else:
            # the shell's next request finds the process gone: its error, not "gone", is raised
            slot, inp, out, live = feed.next_chunk()
            with pytest.raises(AirlinkError, match="radio process failed: OSError.*No space left on device"):
                feed.release(slot, 3, inp.k0, 0)
    finally:
        feed.kill()
    assert _gone(pid)


def test_kill_ends_the_process_at_once():
    feed = RadioFeed(_radio("5s"), horizon=5000, ahead=2)
    pid = feed.pid
    feed.kill()
    feed.kill()                     # twice is harmless
    assert _gone(pid)


def test_a_command_counts_as_started_once_it_has_called_exec(tmp_path):
    """The cell's clock waits for every UE's command: the namespace's first process -> its
    init -> the command, started once it has called exec (its command line is no longer its
    init's), or once the processes are gone. Modelled here with the same process tree."""
    import subprocess
    import sys
    import time

    from airlink.replay.cell import _command_started
    go = tmp_path / "go"
    tree = ("import os, sys, time\n"
            "if os.fork() == 0:\n"                    # 'init'
            "    if os.fork() == 0:\n"                # the command, before exec
            f"        while not os.path.exists({str(go)!r}):\n"
            "            time.sleep(0.01)\n"
            "        os.execvp('sleep', ['sleep', '30'])\n"
            "    os.wait()\n"
            "    os._exit(0)\n"
            "os.wait()\n")
    p = subprocess.Popen([sys.executable, "-c", tree], start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        # before exec: not started (also while init and the command are still being forked)
        for _ in range(20):
            assert not _command_started(p.pid)
            time.sleep(0.01)
        go.write_text("")
        while not _command_started(p.pid):
            assert time.monotonic() < deadline, "exec not seen"
            time.sleep(0.01)
    finally:
        os.killpg(p.pid, 9)                   # the whole tree
        p.wait()
    assert _command_started(p.pid)       # gone: nothing to wait for


def test_a_chunk_taken_without_waiting_is_none_until_made_then_the_same():
    """next_chunk(wait=False) (the cell takes the next chunk early, halfway through one):
    None while the process is still making it, then the chunk, in order, equal to the
    radio's own; ``more`` says whether any asked-for chunk is left."""
    import time
    ref = _radio()
    feed = RadioFeed(_radio(), horizon=ref.n_tti, ahead=1)
    try:
        nones = 0
        for k0 in range(0, ref.n_tti, ref.chunk):
            assert feed.more
            deadline = time.monotonic() + 30
            while (got := feed.next_chunk(wait=False)) is None:
                nones += 1
                assert time.monotonic() < deadline
                time.sleep(0.0005)
            slot, inp, out, live = got
            want = ref.inputs(k0, min(ref.chunk, ref.n_tti - k0))
            assert (inp.k0, inp.n) == (want.k0, want.n)
            assert np.array_equal(inp.rep, want.rep) and np.array_equal(inp.u_err, want.u_err)
            feed.release(slot, 0, k0, 0)
        assert not feed.more and nones > 0     # one at least was asked for before it was made
        feed.close()
    finally:
        feed.kill()


def test_the_process_computes_on_one_thread_and_the_shell_keeps_its_blas():
    """The radio process makes its chunks on its one thread: it inherits one BLAS thread from
    the fork instead of setting it (which would start OpenBLAS's pool anew, threads that spin
    before they sleep); the shell's own BLAS thread count is as it was."""
    from threadpoolctl import threadpool_info
    before = [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]
    ref = _radio()
    feed = RadioFeed(_radio(), horizon=ref.n_tti, ahead=2)
    try:
        k = 0
        while feed.more:
            slot, inp, _, _ = feed.next_chunk()
            assert np.array_equal(inp.real, ref.inputs(k, inp.n).real)
            k += inp.n
            feed.release(slot, 0, inp.k0, 0)
            assert sorted(os.listdir(f"/proc/{feed.pid}/task")) == [str(feed.pid)]
        assert k == ref.n_tti
    finally:
        feed.close()
    assert [(i["filepath"], i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"] == before
