"""Your own federated training, searched by fedevo: a complete evaluator (examples/own_training.toml).

fedevo calls `evaluate(problem, params, *, seed, rounds, data_dir)` once per individual, on its Ray workers, and
needs three objectives back: error, communication and ε (all minimised). `params` holds the problem file's
fixed `[settings]` and the individual's genes, under the names the problem file gives them — fedevo does not
interpret them. Return a dict (as here), a 3-tuple (error, comm, eps) or a fedevo.EvaluationResult. Anything
else, or an exception, marks that evaluation failed with its message; the search goes on.

The training loop below is deliberately plain: DP-FedAvg (McMahan et al. 2018) of a softmax regression on
scikit-learn's digits, in NumPy, with client-level clipping and Gaussian noise added by the server, accounted
with dp-accounting's RDP accountant for Poisson sampling of `cohort` out of `population` users. Put your own
Flower / TFF / PyTorch simulation in its place.
"""

from __future__ import annotations

import numpy as np


def _data(clients: int, seed: int):
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    x = x / 16.0
    rng = np.random.default_rng(0)  # the split is fixed; the training seed varies
    order = rng.permutation(len(y))
    x, y = x[order], y[order]
    n_test = len(y) // 5
    x_test, y_test, x, y = x[:n_test], y[:n_test], x[n_test:], y[n_test:]
    owner = np.random.default_rng(seed).integers(0, clients, len(y))
    return [(x[owner == k], y[owner == k]) for k in range(clients)], (x_test, y_test)


def _local_update(w, x, y, *, lr: float, steps: int, rng) -> np.ndarray:
    w = w.copy()
    for _ in range(steps):
        b = rng.integers(0, len(y), min(16, len(y)))
        logits = x[b] @ w
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        p[np.arange(len(b)), y[b]] -= 1.0
        w -= lr * x[b].T @ p / len(b)
    return w


def _eps(*, noise: float, q: float, rounds: int, delta: float) -> float:
    import dp_accounting

    if noise <= 0:
        return float("inf")
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(noise)), rounds)
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(event)
    return float(acc.get_epsilon(delta))


def evaluate(problem, params, *, seed: int, rounds=None, data_dir=None):
    rounds = int(rounds or params["rounds"])
    clients, per_round = int(params["clients"]), int(params["clients_per_round"])
    rng = np.random.default_rng(seed)
    local, (x_test, y_test) = _data(clients, seed)
    w = np.zeros((64, 10))
    clip, noise = float(params["clip"]), float(params["noise_multiplier"])
    for _ in range(rounds):
        cohort = rng.choice(clients, size=per_round, replace=False)
        total = np.zeros_like(w)
        for k in cohort:
            x, y = local[k]
            if len(y) == 0:
                continue
            delta = _local_update(w, x, y, lr=float(params["lr"]), steps=int(params["local_steps"]), rng=rng) - w
            total += delta * min(1.0, clip / (np.linalg.norm(delta) + 1e-12))
        w += (total + rng.normal(0.0, noise * clip, w.shape)) / per_round
    error = float(np.mean((x_test @ w).argmax(1) != y_test))
    eps = _eps(noise=noise, q=params["cohort"] / params["population"], rounds=rounds, delta=params["delta"])
    return {"error": error, "comm": float(w.size * per_round / clients), "eps": eps}
