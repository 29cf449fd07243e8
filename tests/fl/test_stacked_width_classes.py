"""FEDEVO_WIDTH_CLASSES (fl/stacked_settings.py, fl/stacked.py's `bucket_key`): a generation's MLPs of one depth in
one bucket ('depth') instead of one bucket per power-of-two width class (the default, 'pow2'): fewer buckets, the
same numbers up to the rounding of padding."""

from __future__ import annotations

import numpy as np
import pytest

from fedevo.errors import FedevoError
from fedevo.fl import stacked, stacked_settings

VARIABLE = "FEDEVO_WIDTH_CLASSES"


def _member(*dims):
    return stacked.Member(dims=dims, params=[], masks={}, lr=0.1, chunks=[[np.arange(8)]], seeds=[0], epochs=1,
                          batch_size=16, schedule="engine", tf32=False, torch_compile=False)


def test_depth_puts_every_width_of_one_depth_in_one_bucket(monkeypatch):
    narrow, wide, deeper = _member(64, 20, 10), _member(64, 300, 10), _member(64, 20, 20, 10)
    monkeypatch.delenv(VARIABLE, raising=False)
    assert stacked_settings.width_classes() == "pow2"
    assert stacked.bucket_key(narrow) != stacked.bucket_key(wide)
    monkeypatch.setenv(VARIABLE, "depth")
    assert stacked.bucket_key(narrow) == stacked.bucket_key(wide) != stacked.bucket_key(deeper)
    assert stacked.bucket_key(narrow, exact=True) != stacked.bucket_key(wide, exact=True)  # exact: equal widths


def test_a_bad_value_is_one_line(monkeypatch):
    monkeypatch.setenv(VARIABLE, "fine")
    with pytest.raises(FedevoError) as e:
        stacked_settings.width_classes()
    assert "FEDEVO_WIDTH_CLASSES" in str(e.value) and "'pow2' or 'depth'" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_batched_generation_in_fewer_buckets_and_its_results_say_so(monkeypatch, tmp_path):
    """A generation as one batch on the CPU with 'depth': fewer buckets than by default, the same ε, comm and Ω, the
    error within docs/engine.md's tolerance, and each result's `engine` names the setting; not where unset."""
    from fedevo.evaluation import evaluate_population
    from fedevo.problem import load_problem
    from tests.searching.test_batched_search import TINY

    path = tmp_path / "tiny.toml"
    path.write_text(TINY)
    problem = load_problem(str(path))
    generation = [dict(layers=2, units=16), dict(layers=2, units=64, lr=0.2), dict(layers=2, units=40, sigma=3.0),
                  dict(layers=1, units=30)]
    seeds = [1, 2, 3, 4]
    built = []
    real = stacked._Bucket.__init__
    monkeypatch.setattr(stacked._Bucket, "__init__",
                        lambda self, members, *a, **k: (built.append(len(members)), real(self, members, *a, **k))[1])
    monkeypatch.delenv(VARIABLE, raising=False)
    plain = evaluate_population(problem, generation, seeds, device="cpu")
    by_class = list(built)
    assert all("width_classes" not in r.engine for r in plain)
    built.clear()
    monkeypatch.setenv(VARIABLE, "depth")
    got = evaluate_population(problem, generation, seeds, device="cpu")
    assert len(built) < len(by_class) and max(built) == 3  # the three 2-layer members in one bucket a round
    assert [r.engine.get("width_classes") for r in got] == ["depth"] * 4
    for a, b in zip(plain, got):
        assert (a.status, a.comm, a.eps, a.omega) == (b.status, b.comm, b.eps, b.omega)
        assert b.error == pytest.approx(a.error, abs=0.02)  # docs/engine.md's tolerance
