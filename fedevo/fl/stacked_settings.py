"""The stacked trainer's settings (fl/stacked.py): its batch schedule and speed opt-ins, each a config's key
overridden by an environment variable where it is set, and its switches.

Three opt-ins for speed on a GPU, all off by default (docs/engine.md): a problem's `[train]` keys (SimConfig's
`batch_schedule`, `tf32`, `torch_compile`), each overridden by an environment variable where it is set (benchmarks):
- `batch_schedule = "device"` (`FEDEVO_SCHEDULE=device`): the batch schedule drawn on the device
  (fl/stacked_schedule.py's `device_draws`): every client still makes E shuffled passes over its own samples in
  batches of B, with the same per-sample weights, but the batches differ from the CPU engine's, so results agree
  with it statistically (tests/fl/test_stacked_schedule.py), not within rounding; the same seed gives the same
  numbers on the same device.
- `tf32 = true` (`FEDEVO_CUDA_TF32=1`): the bucket's matmuls with TF32 on CUDA (~1e-3 relative error per product;
  fp32 storage, softmax and updates; fl/tf32.py).
- `torch_compile = true` (`FEDEVO_CUDA_COMPILE=1`): on CUDA the step loop's pointwise work in functions
  torch.compile fuses (fl/stacked_fused.py; the GEMMs stay cuBLAS's, the loop is still one captured graph): the
  same numbers up to rounding, compiled once per process and shape (seconds); where compiling fails, one warning
  and the plain loop.

One more, by environment variable alone (it applies to dense first layers only, which a SET search's members never
have): `FEDEVO_FIRST_LAYER_WINDOW=k`, the first layer's weight updates once a window of k steps
(fl/stacked_window.py; a result's `engine` names it where it applied: `first_layer_window`). Likewise
`FEDEVO_BIAS_IN_WEIGHTS=1`: the biases inside the weights (fl/stacked_bias.py; `bias_in_weights`).

How a generation's MLPs share buckets, also by environment variable alone: `FEDEVO_WIDTH_CLASSES=depth`, every
member of one depth in one bucket (fewer buckets and launches, more padding; default `pow2`: one power-of-two width
class a bucket).

Switches, on by default: `FEDEVO_STACKED=0` (MLPs on fl/device.py's path, what the stacked trainer replaced) and
`FEDEVO_CUDA_GRAPHS=0` (no captured CUDA graphs: fl/stacked_graphs.py).
"""

from __future__ import annotations

import math

import torch

from ..envvars import env_choice, env_flag
from . import stacked_bias, stacked_fused, stacked_update, stacked_window


SCHEDULES = ("engine", "device")


def schedule_setting(setting: str = "engine") -> str:
    """The batch schedule: FEDEVO_SCHEDULE where set (an override), else `setting` (a config's batch_schedule):
    'engine' (the CPU engine's draws) or 'device' (drawn on the device)."""
    v = env_choice("FEDEVO_SCHEDULE", SCHEDULES, setting, expected="'engine' or 'device'")
    if v not in SCHEDULES:  # `setting` itself (a SimConfig checks its batch_schedule: only a direct call gets here)
        from ..errors import FedevoError
        raise FedevoError(f"batch_schedule must be 'engine' or 'device', got {v!r}")
    return v


WIDTH_CLASSES = ("pow2", "depth")


def width_classes() -> str:
    """How a generation's MLPs of one depth share buckets: FEDEVO_WIDTH_CLASSES where set, else 'pow2' (the
    default: members whose widest hidden layers fall in one power-of-two class, each padded to at most twice its
    width); 'depth': every member of one depth in one bucket (fewer buckets, hence fewer kernel launches a step
    for an eager generation whose host is the limit, against more padding arithmetic: on a drawn fashion_mlp_dp
    generation of 20, 3 buckets instead of 9 and 1.68x its dense arithmetic instead of 1.11x,
    benchmarks/generation_arithmetic.py). The same numbers up to rounding either way (padding)."""
    return env_choice("FEDEVO_WIDTH_CLASSES", WIDTH_CLASSES, "pow2", expected="'pow2' or 'depth'")


def _opt_in(variable: str, setting: bool) -> bool:
    """A config's opt-in `setting`, overridden by environment variable `variable` where set (1/0: env_flag)."""
    return env_flag(variable, bool(setting))


def tf32_enabled(setting: bool = False) -> bool:
    """TF32 matmuls in the stacked trainer on CUDA: FEDEVO_CUDA_TF32 where set (an override: 1/0), else `setting`
    (a config's tf32; off by default)."""
    return _opt_in("FEDEVO_CUDA_TF32", setting)


def compile_enabled(setting: bool = False) -> bool:
    """The step loop's pointwise work torch.compile'd in the stacked trainer on CUDA: FEDEVO_CUDA_COMPILE where set
    (an override: 1/0), else `setting` (a config's torch_compile; off by default)."""
    return _opt_in("FEDEVO_CUDA_COMPILE", setting)


def settings_of(cfg) -> dict:
    """A Member's `schedule`, `tf32` and `torch_compile` for a SimConfig (its keys, the environment's overrides)."""
    return {"schedule": schedule_setting(cfg.batch_schedule), "tf32": tf32_enabled(cfg.tf32),
            "torch_compile": compile_enabled(cfg.torch_compile)}


def opt_ins(cfg, device, hooked: bool = False, cnn: bool = False, model=None) -> dict:
    """The opt-ins the stacked trainer trains `cfg` with on `device`, for a result's `engine` (none by default;
    TF32 and torch_compile on CUDA only; hooked: a per-step hook's loop, which has no compiled pointwise work, nor
    a first-layer window nor biases inside its weights; cnn: a CNN bucket's, which takes TF32 alone; model: the
    MLP's, whose first layer's SET mask, if any, rules the window out)."""
    got = settings_of(cfg)
    if cnn:
        return {"tf32": True} if got["tf32"] and torch.device(device).type == "cuda" else {}
    out = {"batch_schedule": "device"} if got["schedule"] == "device" else {}
    if torch.device(device).type == "cuda":
        out.update({k: True for k in ("tf32", "torch_compile") if got[k] and not (hooked and k == "torch_compile")})
    k = stacked_window.steps()
    if k > 1 and model is not None and stacked_window.applies(hooked, _first_masked(cfg, model)):
        out["first_layer_window"] = k
    if width_classes() != "pow2":  # the members beside it padded to other widths than by default
        out["width_classes"] = width_classes()
    if (stacked_bias.enabled() and model is not None and len(getattr(model, "dims", ())) > 2
            and stacked_bias.applies(hooked, bool(out.get("torch_compile")))):
        out["bias_in_weights"] = True
    return out


def _first_masked(cfg, model) -> bool:
    """Whether an MLP's first weight has a SET mask under `cfg` (erdos_renyi_masks leaves a layer whose density
    reaches 1 unmasked)."""
    from ..models.sparse import mask_count

    if cfg.alpha is None:
        return False
    n_in, n_out = model.shapes[0][0], math.prod(model.shapes[0][1:])
    return mask_count(cfg.alpha, n_in, n_out) < n_in * n_out


def engine_label(engine: dict, mlp: bool = True) -> dict:
    """A result's `engine` as this process trained it: torch_compile's fallback (stacked_fused) and the fused
    update's kernel (stacked_update) named where it trained in the MLP buckets (`mlp`, `applies_mlp`); another
    result's unchanged (a CNN's, a user model's: none of those is theirs)."""
    return stacked_update.engine_label(stacked_fused.engine_label(engine)) if mlp else engine


def enabled() -> bool:
    """FEDEVO_STACKED=0: the device path of fl/device.py for MLPs too (what this replaced; benchmarks compare).
    On by default; a value env_flag does not take is a SetupError."""
    return env_flag("FEDEVO_STACKED", True)


def graphs_enabled() -> bool:
    """FEDEVO_CUDA_GRAPHS=0: the stacked trainer's step loops eager on CUDA, no captured graphs. On by default; a
    value env_flag does not take is a SetupError."""
    return env_flag("FEDEVO_CUDA_GRAPHS", True)


__all__ = ["SCHEDULES", "WIDTH_CLASSES", "compile_enabled", "enabled", "engine_label", "graphs_enabled", "opt_ins",
           "schedule_setting", "settings_of", "tf32_enabled", "width_classes"]
