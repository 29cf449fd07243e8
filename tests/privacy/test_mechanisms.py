"""Property tests of the upload transform (ULDP-FED) and the step hook, on the mechanism as implemented."""

import numpy as np
import pytest
import torch

from fedevo.privacy.budget import UserBudgetLedger
from fedevo.privacy.mechanisms import StepLDP, UpdateLDP
from fedevo.privacy.noise import NoiseSource
from fedevo.privacy.recall import RecallStore


class ZeroNoise:
    def fill_(self, buf, std=1.0):
        return buf.zero_()

    def add_rows_(self, buf, row_std, mask=None):
        return buf


def make(noise, **kw):
    P = kw.pop("P", 400)
    args = dict(sigma=0.7, clip=2.0, beta=0.1, clients=8, active=torch.ones(P), noise=noise)
    args.update(kw)
    return UpdateLDP(**args)


def test_every_upload_is_clipped_to_its_decayed_threshold():
    up = make(ZeroNoise())
    g = torch.Generator().manual_seed(0)
    for t in range(1, 6):
        up.begin_round(t)
        clients = np.array([0, 1, 2, 5]) if t % 2 else np.array([0, 3])
        ck = up.thresholds(clients)
        assert np.allclose(ck, 2.0 * np.exp(-0.1 * up.joined[clients]))
        deltas = torch.randn(len(clients), 400, generator=g) * 10
        out, cost = up(deltas, clients, omega=400)
        norms = torch.linalg.vector_norm(out, dim=1).numpy()
        assert np.all(norms <= ck * (1 + 1e-6))
        assert np.allclose(norms, ck, rtol=1e-5)  # all were larger than the bound
        assert np.all(cost == 400)
    assert up.joined[0] == 5 and up.joined[4] == 0


def test_noise_std_is_sigma_times_clip_on_active_coordinates_only():
    active = torch.ones(20000)
    active[:5000] = 0
    up = make(NoiseSource(3), P=20000, active=active, beta=0.0, sigma=0.7, clip=2.0)
    out, _ = up(torch.zeros(4, 20000), np.arange(4), omega=15000)
    on = out[:, 5000:]
    assert float(out[:, :5000].abs().max()) == 0.0
    # expected std 1.4; 60000 samples give a relative sd of ~0.3%, a factor-2 error is far outside
    assert abs(float(on.std()) / 1.4 - 1) < 0.02


def test_recalled_round_costs_one_and_spends_no_budget():
    ledger = UserBudgetLedger(total_eps=10.0, max_participations=4, rounds=6, num_clients=8)
    store = RecallStore(num_params=50)
    up = make(ZeroNoise(), P=50, recall=store, tau=1.0, similarity="sign", ledger=ledger, sample_rate=0.5,
              beta=0.0)
    g = torch.Generator().manual_seed(1)
    up.begin_round(1)
    _, cost1 = up(torch.randn(2, 50, generator=g), np.array([0, 1]), omega=50)  # no global update yet
    assert np.all(cost1 == 50)
    spent_before = ledger.spent.copy()
    up.end_round(torch.randn(50, generator=g))
    up.begin_round(2)
    # tau = 1.0 with sign similarity: any update that is not a perfect sign match is recalled
    out, cost = up(torch.randn(3, 50, generator=g), np.array([0, 1, 2]), omega=50)
    assert cost.tolist() == [1.0, 1.0, 50.0]  # client 2 has no history: must upload
    assert ledger.spent[0] == spent_before[0] and ledger.spent[1] == spent_before[1]
    assert ledger.spent[2] > 0
    assert torch.allclose(out[0], store.history(0)[0], atol=1e-2)  # the server uses the stored copy
    assert up.recalls.tolist()[:3] == [1, 1, 0]


@pytest.mark.parametrize("density", [None, 0.1, 0.8])  # dense (in-place add), sparse index path, dense mask path
def test_step_noise_has_std_sigma_on_active_weights_of_stepping_clients_only(density):
    g = torch.Generator().manual_seed(0)
    c, shape, sigma = 3, (300, 200), 0.02
    params = [torch.zeros(c, *shape), torch.zeros(c, 1, 200)]
    mask = None if density is None else (torch.rand(shape, generator=g) < density).float()
    hook = StepLDP(sigma=sigma, clip=1.0, seed=1).for_chunk(5)
    for active in (torch.tensor([True, True, True]), torch.tensor([True, False, True])):
        before = [p.clone() for p in params]
        hook.after_step(params, [mask, None], active)
        d = params[0] - before[0]
        on = torch.ones(shape, dtype=torch.bool) if mask is None else mask.bool()
        for k in range(c):
            if not active[k]:
                assert torch.equal(d[k], torch.zeros(shape)) and torch.equal(params[1][k], before[1][k])
                continue
            assert float(d[k][on].std()) == pytest.approx(sigma, rel=0.05)
            assert torch.equal(d[k][~on], torch.zeros(int((~on).sum())))


def test_a_zero_clip_counts_nothing_and_a_zero_noise_makes_epsilon_infinite_never_zero():
    """Σ (C_k/std_k)² per client: a clip decayed to 0 (β = 800) added 0/0 = NaN, and a NaN or ∞ sum made the
    effective multiplier None or 0, which the account read as ε = 0 (fail open): the first upload at clip 2, σ = 1
    alone costs 8.88. Now a zero clip adds 0, a zero noise ∞, and ε is ∞ there."""
    up = make(ZeroNoise(), beta=800.0, sigma=1.0)
    for t in (1, 2, 3):
        up.begin_round(t)
        up(torch.randn(2, 400), np.array([0, 1]), omega=400)
    assert np.isfinite(up.inv_sq).all() and up.effective_sigma() == pytest.approx(1.0)  # the first upload only
    up = make(ZeroNoise(), sigma=1e-200)
    up(torch.randn(1, 400), np.array([0]), omega=400)
    assert up.effective_sigma() == 0.0  # (C/std)² overflowed: ε = ∞ (UpdateMechanism.account)


LOCAL = """
name = "local_edges"
dataset = "digits"
model = "mlp"
eps_objective = "eps"
[data]
partition = "iid"
clients = 6
[train]
rounds = 3
epochs = 1
batch_size = 16
upload_loss = 0.0
precision = "fp32"
[privacy]
mechanism = "update"
clip = 2.0
beta = {beta}
sigma = {sigma}
recall = false
delta = 1e-4
[genes]
lr = {{ type = "real", low = 0.01, high = 0.3, default = 0.1 }}
participation = {{ type = "real", low = 0.1, high = 1.0, default = 1.0 }}
"""


@pytest.mark.parametrize("beta, sigma, expected", [
    (800.0, 1.0, "one upload"),  # the clip decays to 0 after the first upload: that one upload's ε, not 0
    (0.0, 1e-200, "inf"),  # (C/std)² past the floats: ∞, not 0
])
def test_a_local_evaluation_never_reports_less_epsilon_than_its_uploads_cost(tmp_path, beta, sigma, expected):
    import fedevo
    from fedevo.privacy.accounting import eps_update

    path = tmp_path / "p.toml"
    path.write_text(LOCAL.format(beta=beta, sigma=sigma))
    r = fedevo.evaluate(str(path), {}, seed=0)
    assert r.status == "ok"
    if expected == "inf":
        assert r.eps == float("inf")
    else:
        assert r.eps == pytest.approx(eps_update(sigma=sigma, participations=1, delta=1e-4))
