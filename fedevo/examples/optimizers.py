"""Your own optimiser for fedevo's search: any pymoo algorithm, or any Optuna sampler (BoTorch's included).

    fedevo search --optimizer python:examples/optimizers.py:SMSEMOA --pop 8 --gen 3
    fedevo search --optimizer python:examples/optimizers.py:BoTorch --pop 1 --budget 30   # 'fedevo[botorch]'

Each class is a ``fedevo.searching.optimizers.Optimizer`` (ask, tell, state, restore) through one of the two bases
that do the rest; docs/search.md "Your own optimiser" says what fedevo checks and records.
"""

from fedevo.searching.optimizers import OptunaOptimizer, PymooOptimizer


class SMSEMOA(PymooOptimizer):
    """pymoo's SMS-EMOA: survival by each solution's contribution to the front's hypervolume."""

    name = "sms-emoa"

    def algorithm(self):
        from pymoo.algorithms.moo.sms import SMSEMOA as Algorithm

        # self.sampling: uniform, or a warm start's genes first (--init-from); self.repair: int/choice genes
        return Algorithm(pop_size=self.pop, n_offsprings=self.pop, sampling=self.sampling, repair=self.repair,
                         eliminate_duplicates=True)


class BoTorch(OptunaOptimizer):
    """BoTorch's Bayesian optimisation (its sampler's default acquisition for several objectives) through Optuna's
    BoTorchSampler: a model fitted anew every batch, whose proposals cost more than `--optimizer gp`'s (batches.csv
    says how much)."""

    name = "botorch"

    def sampler(self, seed):
        try:
            from optuna_integration import BoTorchSampler
        except ImportError as e:
            raise ImportError("BoTorch needs `pip install 'fedevo[botorch]'` (botorch, optuna-integration)") from e
        return BoTorchSampler(seed=seed, n_startup_trials=10)
