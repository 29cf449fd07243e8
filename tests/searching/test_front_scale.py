"""The front and the hypervolume table at scale (fedevo.searching.front_math): the same sets as comparing every
pair, with memory linear in the evaluations and each generation's front computed once per search."""

from __future__ import annotations

import tracemalloc
from collections.abc import Mapping

import numpy as np
import pytest

from fedevo.searching import front_math
from fedevo.searching.front_math import HvMemo, common_hypervolume, hypervolume_table, non_dominated


def _pairwise(F: np.ndarray) -> np.ndarray:
    """The definition: a row is kept unless another row is <= in every objective and < in one."""
    if len(F) == 0:
        return np.array([], dtype=int)
    le = np.all(F[:, None, :] <= F[None, :, :], axis=2)
    lt = np.any(F[:, None, :] < F[None, :, :], axis=2)
    return np.flatnonzero(~np.any(le & lt, axis=0))


@pytest.mark.parametrize("cells", [40, 1 << 22])  # tiny blocks (many sweeps over the front) and the default
def test_non_dominated_is_the_pairwise_definition(monkeypatch, cells):
    monkeypatch.setattr(front_math, "_ND_CELLS", cells)
    rng = np.random.default_rng(0)
    for t in range(400):
        n, m = int(rng.integers(0, 90)), int(rng.integers(1, 6))
        F = rng.integers(0, 4, (n, m)).astype(float) if t % 2 else rng.random((n, m))  # ties and duplicates
        if t % 3 == 0 and n:
            F[rng.random(F.shape) < 0.05] = np.nan  # a NaN row neither dominates nor is dominated
        got = non_dominated(F)
        assert got.tolist() == _pairwise(F).tolist(), (t, F)


def test_non_dominated_memory_is_linear_in_the_rows():
    """5,000 evaluations of 3 objectives: comparing every pair at once held 5000² × 3 booleans (75 MB) twice."""
    rng = np.random.default_rng(1)
    F = rng.random((5000, 3))
    tracemalloc.start()
    try:
        idx = non_dominated(F)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert 0 < len(idx) < len(F)
    assert peak < 20e6, peak


def _rows(n_gen: int, per_gen: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for g in range(1, n_gen + 1):
        for _ in range(per_gen):
            a, b = rng.random(2)
            rows.append({"id": len(rows), "generation": g, "status": "ok" if rng.random() > 0.05 else "failed",
                         "error": float(0.05 + 0.9 * a), "comm": float(1000 * (1.1 - a) * (1 + b)),
                         "eps": float(10 ** (4 * b - 2))})
    return rows


def test_the_hypervolume_table_computes_each_generations_front_once(monkeypatch):
    """A running search rewrites hypervolume.csv after every generation: with its memo, the rows sorted for the
    fronts are each generation's new rows and the front before them, not every row of every generation so far
    again (which made a search of many generations quadratic in them); the table is the same."""
    n_gen, per_gen = 12, 40
    rows = _rows(n_gen, per_gen)
    sorted_rows = []
    real = front_math.non_dominated
    monkeypatch.setattr(front_math, "non_dominated", lambda F: sorted_rows.append(len(F)) or real(F))
    memo = HvMemo()
    for g in range(1, n_gen + 1):
        so_far = [r for r in rows if r["generation"] <= g]
        assert hypervolume_table(so_far, g, "eps", {}, memo) == hypervolume_table(so_far, g, "eps", {})
    fresh = []
    sorted_rows.clear()
    for g in range(1, n_gen + 1):
        hypervolume_table([r for r in rows if r["generation"] <= g], g, "eps", {}, memo)
        fresh.append(sum(sorted_rows))
        sorted_rows.clear()
    assert fresh == [0] * n_gen  # the memo holds every generation: nothing computed again
    memo = HvMemo()
    total = 0
    for g in range(1, n_gen + 1):
        hypervolume_table([r for r in rows if r["generation"] <= g], g, "eps", {}, memo)
        total += sum(sorted_rows)
        sorted_rows.clear()
    front = max(t["front_size"] for t in hypervolume_table(rows, n_gen, "eps", {}))
    assert total <= n_gen * (per_gen + front)  # each generation once: its rows and the front before them


def test_a_memo_of_fewer_rows_is_not_taken_for_the_rows_now():
    """Half a generation logged, then the whole of it: the memo's entry for it is recomputed, not reused."""
    rows = _rows(4, 30, seed=2)
    memo = HvMemo()
    part = [r for r in rows if r["generation"] < 3] + [r for r in rows if r["generation"] == 3][:11]
    hypervolume_table(part, 3, "eps", {}, memo)
    assert hypervolume_table(rows, 4, "eps", {}, memo) == hypervolume_table(rows, 4, "eps", {})
    assert hypervolume_table(part, 3, "eps", {}, memo) == hypervolume_table(part, 3, "eps", {})


def test_common_hypervolume_at_counts_in_any_order():
    rows = _rows(5, 20, seed=3)
    (recs,), _, _ = common_hypervolume([(rows, {})], "eps", at=[60, 5, 0, 10**6, 60])
    (each,), _, _ = common_hypervolume([(rows, {})], "eps", at=None)
    assert [r["evaluations"] for r in recs] == [60, 5, 0, 100, 60]
    assert recs[0] == recs[4] and recs[2]["front_size"] == 0 and recs[2]["hypervolume"] == 0.0
    assert recs[3]["hypervolume"] == each[-1]["hypervolume"] and recs[0]["hypervolume"] == each[2]["hypervolume"]
    for n, rec in zip([60, 5, 0, 100, 60], recs):
        alone = front_math.front_rows(rows[:n], "eps", {})
        assert rec["front_size"] == len(alone)


@pytest.mark.parametrize("cells", [40, 1 << 22])
def test_growing_fronts_are_each_prefixs_front(monkeypatch, cells):
    """Each prefix's front from the one before and the rows since is the front of the prefix computed afresh:
    with ties, duplicates, failures, constraints and rows that push members of the front out."""
    monkeypatch.setattr(front_math, "_ND_CELLS", cells)
    rng = np.random.default_rng(4)
    for t in range(30):
        rows = _rows(6, int(rng.integers(1, 25)), seed=t)
        if t % 2:
            for r in rows:  # coarse values: ties and duplicates across generations
                r["error"], r["comm"] = round(r["error"], 1), round(r["comm"], -2)
        cons = {"eps": 10.0} if t % 3 == 0 else {}
        cuts = sorted(int(c) for c in rng.integers(0, len(rows) + 1, 5))
        got = list(front_math.growing_fronts(rows, cuts, "eps", cons))
        assert [n for n, _ in got] == cuts
        for n, front in got:
            assert [r["id"] for r in front] == [r["id"] for r in front_math.front_rows(rows[:n], "eps", cons)]


class _Counted(Mapping):
    """A row that counts the lookups of all rows."""

    reads = 0

    def __init__(self, d):
        self.d = d

    def __getitem__(self, k):
        _Counted.reads += 1
        return self.d[k]

    def __iter__(self):
        return iter(self.d)

    def __len__(self):
        return len(self.d)


def _counted_rows(n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        a, b = rng.random(2)
        out.append(_Counted({"id": i, "generation": i + 1, "status": "ok", "error": float(0.05 + 0.9 * a),
                             "comm": float(1000 * (1.1 - a) * (1 + b)), "eps": float(10 ** (4 * b - 2))}))
    return out


def test_the_hypervolume_table_of_one_more_batch_reads_only_its_rows():
    rows = _counted_rows(300)
    memo = HvMemo()
    reads, fronts = [], []
    for n in range(1, len(rows) + 1):
        _Counted.reads = 0
        table = hypervolume_table(rows[:n], n, "eps", {}, memo)
        reads.append(_Counted.reads)
        fronts.append(table[-1]["front_size"])
        if n % 60 == 0 or n < 8:
            assert table == hypervolume_table(rows[:n], n, "eps", {})
            assert memo.unchanged <= n - 1
    # every row read again after each batch: reads grew with the rows (3,400 a batch at 100-200 rows, 13,000 at
    # 500-600); now the new row and the front's objective values (132 and 184: fronts of 25 and 41)
    assert all(r <= 12 * (f + 2) for r, f in zip(reads[20:], fronts[20:])), list(zip(reads, fronts))[-20:]
