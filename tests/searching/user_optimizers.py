"""Optimiser classes the tests of your own optimiser load by 'module:Class' (an importable module)."""

from __future__ import annotations

import numpy as np

from fedevo.examples.optimizers import SMSEMOA
from fedevo.searching.optimizers import Optimizer, OptunaOptimizer, PymooOptimizer


class Halton(Optimizer):
    """A deterministic low-discrepancy sequence over the encoded space: a user's own optimiser, whole."""

    name = "halton"

    def __init__(self, space, problem, **kw):
        super().__init__(space, problem, **kw)
        self.asked = 0

    def ask(self, n):
        from scipy.stats import qmc

        seq = qmc.Halton(d=self.space.n_var, scramble=True, seed=self.seed)
        seq.fast_forward(self.asked)
        X = qmc.scale(seq.random(n), self.space.xl, self.space.xu)
        self.asked += n
        return self.space.decode_batch(self.space.repair(X))

    def tell(self, params, F, G=None):
        self.batch += 1

    def state(self):
        return {"asked": self.asked, "batch": self.batch}

    def restore(self, state):
        self.asked, self.batch = int(state["asked"]), int(state["batch"])


class Qmc(OptunaOptimizer):
    """Any Optuna sampler: here Optuna's random sampler (QMC's would scramble anew every batch)."""

    name = "optuna-random"

    def sampler(self, seed):
        import optuna

        return optuna.samplers.RandomSampler(seed=seed)


SmsEmoa = SMSEMOA  # any pymoo algorithm: the example's SMS-EMOA (fedevo/examples/optimizers.py), as a user has it


class NoAlgorithm(PymooOptimizer):
    name = "no_algorithm"


class Broken(Halton):
    """Misbehaves as `mode` says (set by the test)."""

    mode = ""

    def ask(self, n):
        got = super().ask(n)
        if self.mode == "raise":
            raise ValueError("no idea what to ask")
        if self.mode == "exit":
            import sys

            sys.exit(3)
        if self.mode == "many":
            return got + got
        if self.mode == "unknown":
            return [{**p, "colour": "red"} for p in got]
        if self.mode == "lacks":
            return [{k: v for k, v in p.items() if k != "lr"} for p in got]
        if self.mode == "range":
            return [{**p, "lr": 7.0} for p in got]
        if self.mode == "int":
            return [{**p, "layers": 1.5} for p in got]
        if self.mode == "choice":
            return [{**p, "similarity": "cubic"} for p in got]
        if self.mode == "nan":
            return [{**p, "lr": float("nan")} for p in got]
        if self.mode == "type":
            return np.zeros((n, 3))
        return got

    def state(self):
        if self.mode == "state":
            import threading

            return {"lock": threading.Lock()}
        return super().state()


class NoTell(Optimizer):
    name = "no_tell"

    def ask(self, n):
        return []


from fedevo.searching.optimizers.nsga3 import NSGA3Optimizer  # noqa: E402


class MyNsga3(NSGA3Optimizer):
    """NSGA-III subclassed (a user's tweak): its reference directions as NSGA-III's."""

    name = "my-nsga3"


class Forgetful(Halton):
    """Keeps a count its ask depends on outside state(): a resumed search asks other candidates."""

    calls = 0

    def ask(self, n):
        self.calls += 1
        self.asked += self.calls  # skips ahead by how often it was asked in this process
        return super().ask(n)


class AskFailsRestored(Halton):
    """Restores without complaint, but the second object restored in a process (the search's restored copy, the
    search's own being the first) raises in ask (a connection it needs is gone)."""

    restores = 0
    nth = 0

    def restore(self, state):
        super().restore(state)
        AskFailsRestored.restores += 1
        self.nth = AskFailsRestored.restores

    def ask(self, n):
        if self.nth > 1:
            raise RuntimeError("no connection")
        return super().ask(n)


class RaisesInInit(Halton):
    def __init__(self, *args, **kwargs):
        raise RuntimeError("cannot start")


class BadPop(Halton):
    default_pop = "twelve"


class Loud(Halton):
    def describe(self):
        print("describing")
        return {"name": "loud"}


class GlobalDraws(Halton):
    """Draws from numpy's global generator, seeded at its start, which its state() leaves out: restored, it asks
    what it asked first."""

    name = "global-draws"

    def __init__(self, space, problem, **kw):
        super().__init__(space, problem, **kw)
        np.random.seed(self.seed)

    def ask(self, n):
        X = np.random.uniform(self.space.xl, self.space.xu, size=(n, self.space.n_var))
        return self.space.decode_batch(self.space.repair(X))
