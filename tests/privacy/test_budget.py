import math
import time

import numpy as np
import pytest

from fedevo.errors import FedevoError
from fedevo.privacy.accounting import eps_paper_update
from fedevo.privacy.budget import UserBudgetLedger, round_noise_std, theorem3_noise_std


def ledger(**kw):
    args = dict(total_eps=1.0, max_participations=4, rounds=8, num_clients=2, delta=1e-4)
    args.update(kw)
    return UserBudgetLedger(**args)


# ---------------------------------------------------------------- the paper's worked example (T=8, t=4, r=4)
@pytest.mark.parametrize("eps", [1.0, 8.0])
def test_worked_example_new_user_gets_a_quarter(eps):
    book = ledger(total_eps=eps)
    # Fig. 3(a): first participation at t=4, a=0; r=4 <= T-t+1=5 → ε/4
    assert book.budget_for(0, 4)[0] == eps / 4
    assert book.spend([0], 4)[0] == eps / 4


@pytest.mark.parametrize("eps", [1.0, 8.0])
def test_worked_example_recall_at_third_round_doubles_the_fourth(eps):
    book = ledger(total_eps=eps)
    assert book.spend([1], 1)[0] == eps / 4
    assert book.spend([1], 2)[0] == eps / 4
    book.recall([1], 3)  # j=3: saves ε/4
    assert book.remaining([1])[0] == 2 * eps / 4  # eq. 14: ε' = ε − ε(j−1)/r
    # Fig. 3(b): at t=4 (a=3) the user holds 2ε/4, spends it all, keeps 0
    assert book.budget_for([1], 4)[0] == 2 * eps / 4
    assert book.spend([1], 4)[0] == 2 * eps / 4
    assert book.remaining([1])[0] == 0.0
    assert book.spent[1] == eps
    assert not book.eligible([1], 5)[0]  # r rounds used


@pytest.mark.parametrize("j", range(1, 10))
def test_eqs_14_and_15_for_any_first_recall(j):
    eps, r = 3.0, 10
    book = UserBudgetLedger(total_eps=eps, max_participations=r, rounds=300, num_clients=1)
    t = 1
    for _ in range(j - 1):
        book.spend([0], t)
        t += 1
    book.recall([0], t)
    t += 1
    eps1 = eps - eps * (j - 1) / r  # eq. 14
    assert book.remaining([0])[0] == pytest.approx(eps1, rel=1e-12)
    book.spend([0], t)
    assert book.remaining([0])[0] == pytest.approx(eps1 - eps1 / (r - j), rel=1e-12, abs=1e-15)  # eq. 15


def test_recall_keeps_budget_and_counts_the_round():
    book = ledger()
    book.spend([0, 1], 1)
    before = book.remaining().copy()
    book.recall([0], 2)
    assert np.array_equal(book.remaining(), before)
    assert book.joined.tolist() == [2, 1] and book.recalled.tolist() == [1, 0]


def test_last_rounds_of_the_run_cap_the_split():
    # r=4 but only 2 rounds left (t = T-1): the user spreads its budget over 2, case ② of §2.2
    book = ledger(total_eps=1.0)
    assert book.budget_for([0], 7)[0] == 0.5
    book.spend([0], 7)
    assert book.budget_for([0], 8)[0] == 0.5
    book.spend([0], 8)
    assert book.remaining([0])[0] == 0.0


def test_total_spent_never_exceeds_budget_1000_clients_300_rounds():
    rng = np.random.default_rng(0)
    K, T, r, eps = 1000, 300, 50, 8.0
    book = UserBudgetLedger(total_eps=eps, max_participations=r, rounds=T, num_clients=K)
    charged = np.zeros(K)
    t0 = time.perf_counter()
    for t in range(1, T + 1):
        ids = rng.choice(K, size=100, replace=False)
        ids = ids[book.eligible(ids, t)]
        recalled = rng.random(ids.size) < 0.3
        charged[ids[~recalled]] += book.spend(ids[~recalled], t)
        book.recall(ids[recalled], t)
        assert (book.remaining() >= 0).all()
    assert time.perf_counter() - t0 < 3.0
    assert (book.spent <= eps).all() and (charged <= eps * (1 + 1e-12)).all()
    assert np.allclose(charged, book.spent, rtol=1e-12, atol=1e-12)
    s = book.summary()
    assert s["spent_total"] == pytest.approx(charged.sum()) and s["remaining_min"] >= 0 and s["joined_max"] <= r
    assert s["recalls"] == int(book.recalled.sum()) > 0


# ---------------------------------------------------------------- Theorem 3
def test_theorem3_hand_computed_and_inverse_of_eps_paper_update():
    q, c, r, d, eps = 0.1, 2.0, 50, 1e-5, 8.0
    sigma_k = theorem3_noise_std(eps=eps, rounds=r, delta=d, sample_rate=q, clip=c)
    assert sigma_k == pytest.approx(2 * q * c * math.sqrt(r * math.log(1 / d)) / eps, rel=1e-12)
    # the simulator's std is σ·C_k, so the multiplier σ_k / C_k maps back to ε
    assert eps_paper_update(sigma=sigma_k / c, sample_rate=q, max_participations=r, delta=d) == pytest.approx(eps)


def test_theorem3_vectorised_and_zero_budget_is_infinite_noise():
    out = theorem3_noise_std(eps=np.array([1.0, 2.0, 0.0]), rounds=np.array([4, 4, 4]), delta=1e-4,
                             sample_rate=0.5, clip=1.0)
    assert out[0] == pytest.approx(2 * out[1]) and math.isinf(out[2])


def test_round_noise_std_is_theorem3_for_r_times_the_grant():
    got = round_noise_std(round_eps=0.16, max_participations=50, delta=1e-5, sample_rate=0.1, clip=2.0)
    assert got == pytest.approx(2 * 0.1 * 2.0 * math.sqrt(50 * math.log(1e5)) / (50 * 0.16), rel=1e-12)
    with pytest.raises(FedevoError, match="max_participations"):
        round_noise_std(round_eps=0.16, max_participations=0, delta=1e-5, sample_rate=0.1, clip=2.0)


def test_ledger_noise_std_constant_without_recall_lower_after_recall():
    book = UserBudgetLedger(total_eps=8.0, max_participations=50, rounds=300, num_clients=3, delta=1e-5)
    first = book.noise_std([0], 1, clip=2.0, sample_rate=0.1)[0]
    assert first == pytest.approx(theorem3_noise_std(eps=8.0, rounds=50, delta=1e-5, sample_rate=0.1, clip=2.0))
    book.spend([0], 1)
    book.recall([1], 1)
    assert book.noise_std([0], 2, clip=2.0, sample_rate=0.1)[0] == pytest.approx(first, rel=1e-12)
    assert book.noise_std([1], 2, clip=2.0, sample_rate=0.1)[0] == pytest.approx(first * 49 / 50, rel=1e-12)
    assert book.noise_std([2], 2, clip=np.array([1.0]), sample_rate=0.1)[0] == pytest.approx(first / 2)
    for t in range(2, 51):
        book.spend([0], t)
    assert math.isinf(book.noise_std([0], 51, clip=2.0, sample_rate=0.1)[0])  # r used up


# ---------------------------------------------------------------- errors
@pytest.mark.parametrize("kw,name", [
    (dict(max_participations=9, rounds=8), "max_participations"),
    (dict(total_eps=0.0), "total_eps"),
    (dict(total_eps=math.inf), "total_eps"),
    (dict(rounds=0), "rounds"),
    (dict(num_clients=-1), "num_clients"),
    (dict(delta=1.0), "delta"),
])
def test_bad_ledger_config(kw, name):
    with pytest.raises(FedevoError, match=name):
        ledger(**kw)


def test_bad_ledger_use():
    book = ledger()
    with pytest.raises(FedevoError, match="round"):
        book.spend([0], 0)
    with pytest.raises(FedevoError, match="round"):
        book.budget_for([0], 9)
    with pytest.raises(FedevoError, match="client ids"):
        book.spend([2], 1)
    with pytest.raises(FedevoError, match="duplicate"):
        book.spend([0, 0], 1)
    book.spend([0], 1)
    with pytest.raises(FedevoError, match="cannot join round 1"):
        book.recall([0], 1)
    for t in (2, 3, 4):
        book.recall([0], t)
    with pytest.raises(FedevoError, match="cannot join"):
        book.spend([0], 5)
    with pytest.raises(FedevoError, match="delta"):
        theorem3_noise_std(eps=1.0, rounds=1, delta=0.0, sample_rate=0.1, clip=1.0)


def test_paper_eps_is_the_budget_for_an_early_joiner_and_more_for_a_late_one_or_after_recalls():
    """The paper's moments bound over the grants actually spent, √(r·Σ g²): ε for r uploads of ε/r; two uploads
    of ε/2 (a client joining at T − 1 with r = 4) give √2·ε; recalls whose savings are re-spent, more than ε."""
    early = UserBudgetLedger(total_eps=1.0, max_participations=4, rounds=8, num_clients=3)
    for t in (1, 2, 3, 4):
        early.spend([0], t)
    assert early.paper_eps() == pytest.approx(1.0)
    late = UserBudgetLedger(total_eps=1.0, max_participations=4, rounds=8, num_clients=3)
    for t in (7, 8):
        late.spend([1], t)
    assert late.paper_eps() == pytest.approx(math.sqrt(2.0))
    recalled = UserBudgetLedger(total_eps=1.0, max_participations=4, rounds=8, num_clients=3)
    recalled.spend([2], 1)
    recalled.recall([2], 2)
    recalled.recall([2], 3)
    recalled.spend([2], 4)
    assert recalled.paper_eps() == pytest.approx(math.sqrt(4 * (0.25 ** 2 + 0.75 ** 2)))
    assert UserBudgetLedger(total_eps=1.0, max_participations=2, rounds=4, num_clients=1).paper_eps() == 0.0
