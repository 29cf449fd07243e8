"""Local differential privacy for fedevo: mechanisms, accounting (valid ε and the papers' ε), the ULDP-FED
budget ledger and the recall store. See docs/privacy.md.

Re-exports resolve lazily, so importing a submodule (e.g. ``fedevo.privacy.noise``) does not load Opacus."""

from importlib import import_module

_EXPORTS = {
    **dict.fromkeys(["eps_gaussian", "eps_step", "eps_update", "eps_update_varying", "eps_update_sampled",
                     "eps_paper_step", "eps_paper_update", "calibrate_noise_multiplier", "calibrate_sigma_step",
                     "calibrate_sigma_update"], "accounting"),
    **dict.fromkeys(["UserBudgetLedger", "round_noise_std", "theorem3_noise_std"], "budget"),
    **dict.fromkeys(["RecallStore", "cosine", "sign_agreement"], "recall"),
}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
