"""The compiled step's building blocks and its direct path (no retransmission pending,
every user with more data than a TTI carries) against a plain float64 reference."""
import numpy as np
import pytest

from airlink.sim import kernel as K


@pytest.mark.parametrize("n_m", [1, 3, 7, 8, 9, 15, 16, 17])
def test_mcs_rows_and_key_rows_equal_a_table_lookup(n_m):
    rng = np.random.default_rng(n_m)
    thr = np.sort(rng.uniform(0.1, 50, n_m)).astype(np.float32)
    if n_m > 2:
        thr[1] = thr[2]                      # equal neighbours (float32 rounding can do that)
    row = rng.uniform(0, 60, 203).astype(np.float32)
    row[:n_m] = thr                          # exactly on a threshold counts as reaching it
    want = np.searchsorted(thr, row, side="right") - 1
    out, tmp = np.zeros(203, np.int32), np.zeros(203, np.int32)
    K._count_row(row, thr, out, tmp)
    assert np.array_equal(out, want)
    keys = rng.uniform(1, 2, n_m + 1).astype(np.float32)
    kout, ktmp = np.zeros(203, np.float32), np.zeros(203, np.float32)
    K._key_row(row, thr, keys, n_m, kout, ktmp)
    assert np.array_equal(kout, keys[want + 1])
    # the last threshold left to the best-user update
    K._key_row(row, thr, keys, n_m - 1, kout, ktmp)
    best_key, code = np.zeros((2, 203), np.float32), np.full((2, 203), -2, np.int32)
    K._best_update(row, thr[-1], keys[-1], kout, best_key[0], code[0], best_key[1], code[1], np.int32(6))
    assert np.array_equal(best_key[1], keys[want + 1]) and np.all(code[1] == 6)
    if n_m <= 9:   # both in one pass, thresholds padded with NaN
        thr9 = np.full(9, np.nan, np.float32)
        thr9[:n_m] = thr
        keys10 = np.zeros(10, np.float32)
        keys10[:n_m + 1] = keys
        best_key, code = np.zeros((2, 203), np.float32), np.full((2, 203), -2, np.int32)
        K._key_update9(row, thr9, keys10, best_key[0], code[0], best_key[1], code[1], np.int32(4))
        assert np.array_equal(best_key[1], keys[want + 1]) and np.all(code[1] == 4)


def test_metric_rows_pick_the_first_strictly_best_user():
    """The per-subchannel metric search of the non-key path (users in the TTI's order, a
    strictly larger ``rate[m + 1] * weight`` wins, no MCS never wins) against a plain loop."""
    rng = np.random.default_rng(11)
    n_u, n_c, n_m = 7, 203, 15
    m_uc = rng.integers(-1, n_m, (n_u, n_c)).astype(np.int32)
    rate_ext = np.concatenate([[0.0], np.sort(rng.choice(np.arange(1.0, 40), n_m, replace=False))])
    weight = rng.choice([0.5, 1.0, 2.0], n_u)          # equal metrics across users: ties
    order = rng.permutation(n_u)
    metric, who = np.zeros((2, n_c)), np.full((2, n_c), -1, np.int64)
    row = np.zeros(n_c)
    cur = 0
    for u in order:
        K._metric_gather(m_uc[u], rate_ext * weight[u], row)
        K._metric_update(row, metric[cur], who[cur], metric[1 - cur], who[1 - cur], int(u))
        cur = 1 - cur
    want = np.full(n_c, -1)
    for c in range(n_c):
        best = 0.0
        for u in order:
            x = rate_ext[m_uc[u, c] + 1] * weight[u]
            if x > best:
                best, want[c] = x, u
    assert np.array_equal(who[cur], want) and (want == -1).sum() < n_c // 4


def test_level_keys_keep_the_order_and_flag_shared_keys():
    rate_ext = np.array([0.0, 10.0, 20.0, 40.0])
    keys = np.zeros(4, np.float32)
    K._level_keys(rate_ext, 1e-320, keys)        # underflows float32 but is > 0: smallest key
    assert keys[0] == -1 and np.all(keys[1:] > 0)
    K._level_keys(rate_ext, 0.5, keys)
    assert keys.tolist() == [-1, 5, 10, 20]
    everyone = np.full(3, 1e300)
    # equal weights (MaxCIR): equal keys are equal metrics
    assert K._keys_injective(rate_ext, np.ones(3), everyone)
    # 10 * w1 and 20 * w2 differ by less than float32 resolves: the keys must not decide
    w = np.array([1.0, 0.5 * (1 + 1e-12), 0.25])
    assert not K._keys_injective(rate_ext, w, everyone)
    assert K._keys_injective(rate_ext, w, np.array([1e300, 0.0, 1e300]))   # user 2 has no data


def _direct_run(sinr, perm, thr, bytes_per_mcs, sched, lam=1.0, window=50):
    n, u, c = sinr.shape
    ip = np.zeros(K.N_IP, np.int64)
    ip[[K.IP_SCHED, K.IP_MAX_TX, K.IP_LA_INTERVAL, K.IP_BL_INTERVAL, K.IP_PF_WINDOW,
        K.IP_SECTOR_CHANNELS]] = [sched, 1, 10, 1, window, 32]
    fp = np.zeros(K.N_FP)
    fp[[K.FP_PF_A, K.FP_LAMBDA, K.FP_DRAIN_TTI, K.FP_LA_BLER_UP, K.FP_LA_BLER_DOWN, K.FP_LA_HYBRID_DB,
        K.FP_OLLA_STEP_DB, K.FP_OLLA_MAX_DB, K.FP_BLER_TARGET]] = [0.01, lam, 1, 0.3, 0.1, 15, 0.5, 10.0, 0.1]
    z = lambda *s, d=np.float64: np.zeros(s, d)  # noqa: E731
    outs = [z(n, u), z(n, u), z(n, u, d=np.int64), z(n, u), z(n, u, d=np.int64), z(n, u),
            z(n, u, d=np.int64), z(n, u, d=np.int64), z(n, u, d=np.int64), z(n, u, d=np.int64)]
    st = [z(u), z(u), z(u), z(u, 8), z(u, 8, d=np.int64), z(u, 8), z(u, 8, d=np.int64),
          z(u, d=np.int64), z(u, d=np.int64), z(4, d=np.int64), z(u, d=np.int64), z(u),
          z(u, d=np.int64), z(u, d=np.int64), z(u, d=np.int64), z(u, d=np.int64),
          np.ones(u, np.int64), np.full(u, 1500.0), z(u), z(u, 8, d=np.int64), z(u, 8, d=np.int64),
          z(u, 2, 1, d=np.int64)]
    K.run_chunk(sinr, sinr, z(n, u), np.zeros((n, c)), perm, np.zeros((1, 1), np.int64), thr,
                bytes_per_mcs, np.ones(len(thr)), np.zeros(1, np.int64), -40.0, 0.1, ip, fp, *st,
                np.zeros(1), np.ones(1, np.int64), *outs)
    return outs[2], outs[1]


def _reference(sinr, perm, thr, bytes_per_mcs, sched, lam=1.0, window=50):
    """Plain float64 MaxCIR / PF / R/T**lambda per TTI, ties to the earliest user in order."""
    n, n_u, n_c = sinr.shape
    rate_ext = np.concatenate([[0.0], bytes_per_mcs])
    avg = np.zeros(n_u)
    nsub = np.zeros((n, n_u), np.int64)
    for k in range(n):
        rate = rate_ext[np.searchsorted(thr, sinr[k], side="right")]
        with np.errstate(divide="ignore"):
            w = np.ones(n_u) if sched == 1 else np.where(avg > 0, 1.0 / avg ** lam, 1e150)
        sent = np.zeros(n_u)
        for c in range(n_c):
            best, best_m = -1, 0.0
            for u in perm[k]:
                if rate[u, c] * w[u] > best_m:
                    best, best_m = u, rate[u, c] * w[u]
            if best >= 0:
                nsub[k, best] += 1
                sent[best] += rate[best, c]
        a = 1.0 / min(k + 1, window)
        avg = (1 - a) * avg + a * sent * 8
    return nsub


@pytest.mark.parametrize("sched,lam", [(1, 1.0), (2, 1.0), (3, 2.0), (3, 0.5)])
def test_direct_path_makes_the_float64_decisions(sched, lam):
    rng = np.random.default_rng(sched)
    n, n_u, n_c = 120, 6, 37
    # Rayleigh-like SINR around 0-20 dB; coarse values so that equal rates (ties) are common
    sinr = (rng.exponential(1.0, (n, n_u, n_c)) * 10 ** rng.uniform(0, 2, (1, n_u, 1)))
    sinr = np.round(sinr, 1).astype(np.float32)
    thr = (10 ** (np.array([-5.0, 0, 3, 6, 9, 12, 15, 18, 21]) / 10)).astype(np.float32)
    bytes_per_mcs = np.array([10.0, 20, 30, 45, 60, 80, 100, 125, 150]) / 7
    perm = rng.permuted(np.tile(np.arange(n_u), (n, 1)), axis=1)
    nsub, tx = _direct_run(sinr, perm, thr, bytes_per_mcs, sched, lam)
    assert np.array_equal(nsub, _reference(sinr, perm, thr, bytes_per_mcs, sched, lam))
    assert nsub.sum() > 0.9 * n * n_c and np.all(tx.sum(axis=0) > 0)


@pytest.mark.parametrize("scheduler,sched,lam", [("maxcir", 1, 1.0), ("pf", 2, 1.0), ("lambda", 3, 2.0)])
def test_schedule_rates_decides_like_the_simulator_step(scheduler, sched, lam):
    from airlink.sim import schedule_rates
    rng = np.random.default_rng(4)
    n, n_u, n_c = 80, 5, 23
    sinr = np.round(rng.exponential(1.0, (n, n_u, n_c)) * 10 ** rng.uniform(0, 2, (1, n_u, 1)), 1)
    sinr = sinr.astype(np.float32)
    thr = (10 ** (np.array([-5.0, 0, 3, 6, 9, 12, 15]) / 10)).astype(np.float32)
    bytes_per_mcs = np.array([10.0, 20, 30, 45, 60, 80, 100]) / 3
    perm = rng.permuted(np.tile(np.arange(n_u), (n, 1)), axis=1)
    rates = np.concatenate([[0.0], bytes_per_mcs])[np.searchsorted(thr, sinr, side="right")]
    best, avg = schedule_rates(rates, scheduler=scheduler, lam=lam, window=50, order=perm)
    assert best.shape == (n, n_c) and avg.shape == (n_u,) and np.all(avg >= 0) and avg.sum() > 0
    per_user = np.stack([np.bincount(b[b >= 0], minlength=n_u) for b in best])
    assert np.array_equal(per_user, _reference(sinr, perm, thr, bytes_per_mcs, sched, lam))
    nsub, _ = _direct_run(sinr, perm, thr, bytes_per_mcs, sched, lam)
    assert np.array_equal(per_user, nsub)
    # nobody can use a subchannel with rate 0 everywhere
    rates[:, :, 0] = 0
    assert np.all(schedule_rates(rates, scheduler=scheduler, order=perm)[0][:, 0] == -1)


def test_schedule_rates_rejects_bad_input():
    from airlink.sim import schedule_rates
    from airlink.traces import AirlinkError
    with pytest.raises(AirlinkError, match="shape"):
        schedule_rates(np.ones((3, 4)))
    with pytest.raises(AirlinkError, match="unknown scheduler"):
        schedule_rates(np.ones((3, 2, 4)), scheduler="fastest")
    with pytest.raises(AirlinkError, match="permutation"):
        schedule_rates(np.ones((3, 2, 4)), order=np.zeros((3, 2)))


@pytest.mark.parametrize("kw", [dict(csi_delay_tti=2), dict(scheduler="maxcir", harq_priority=False),
                                dict(scheduler="lambda", lam=2.0, traffic="onoff", on_s=0.02, off_s=0.02),
                                dict(harq_processes=3, harq_feedback_tti=4)])
def test_float32_key_search_gives_the_same_run_as_the_plain_search(monkeypatch, kw):
    import airlink.sim as S
    a = S.simulate("quick", seed=2, duration="250ms", **kw)      # compiled, key search on
    monkeypatch.setattr(K, "run_chunk", K._run_chunk)            # Python kernel, key search off
    monkeypatch.setattr(K, "FAST_PATH", False)
    b = S.simulate("quick", seed=2, duration="250ms", **kw)
    assert np.array_equal(a.capacity.values, b.capacity.values)
    assert a.mac.equals(b.mac)
    assert a.mac["harq_retransmissions"].sum() > 0
