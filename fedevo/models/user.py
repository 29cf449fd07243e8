"""The user's model (issue 26): a factory `make_model(input_shape=..., num_classes=..., **kwargs)` returning a
`torch.nn.Module`, trained by the same engine as the built-in models.

Two ways in, chosen when the model is built (`build_user_model`):

- **Lowered** (fedevo/models/lowering.py). A module whose forward pass is a plain chain of recognised layers in
  the shape of the built-in MLP or CNN runs on the built-in kernels (`LoweredMLP`, `LoweredCNN`): the same speed
  and, with `init = "fedevo"`, the same numbers bit for bit; checked against the module's own forward pass.
- **Generic.** Anything else: `GenericModel`, the module's parameters stacked per chunk of clients and trained
  with `torch.func.functional_call` under `vmap(grad(...))` (the CPU engine's eager path and the device path).

Both present the engine's model interface: `shapes` (parameter shapes, in the engine's order), `fc_weight_ids`
(the parameters SET masks: Linear weights, and Conv2d weights with `sparse_conv`), `init(gen)`, `logits(params,
x)`, `grads(params, x, y, w)` (per-client gradients of Σ_b w_b·CE over stacked parameters), `grads_vmap` (the
device path), `compute_dtype`, `supports_bf16`, `kind`. Modules run in eval mode; their buffers (BatchNorm's
running statistics) are constants, not trained or federated.

The factory and its module (loading, building, sizing, probing): fedevo/models/user_module.py. Here: the choice
between the two ways, the generic path and a user model's size and cost (`macs_and_params`).

Loading a `python:` model file runs its code with the user's rights, as an import does.
"""

from __future__ import annotations

import copy
import functools
import math
import threading
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from ..arch import UserArch
from ..errors import FedevoError, one_line
from ..plugins import on_reimport
from ..usercode import call_user, stdout_to_stderr
from .lowering import lower, lowering_enabled
from .user_module import _seed_from, _template, make_module, meta_module


_BUILDING = threading.RLock()


def build_user_model(arch: UserArch, input_shape: tuple, num_classes: int):
    """A lowered model where the module is a recognised stack (and FEDEVO_LOWER allows it), else the generic one.
    One build at a time in a process: torch.fx's tracing (`lower`) patches nn.Module.__call__ for every thread, so
    another thread's module call during it (a batched generation prepares its runs in threads) would be traced."""
    input_shape = tuple(input_shape)
    with _BUILDING:
        module = _template(arch, input_shape, num_classes)
        if lowering_enabled():
            lowered = lower(arch, module, input_shape, num_classes)
            if lowered is not None:
                return lowered
        return GenericModel(arch, module, input_shape, num_classes)


def _fedevo_draw(shape: tuple, fan_in: int, gen: torch.Generator) -> torch.Tensor:
    """The built-in models' init: uniform ±1/√fan_in (PyTorch's default Linear/Conv2d distribution)."""
    return (torch.rand(*shape, generator=gen) * 2 - 1) * (1.0 / math.sqrt(fan_in))


# ------------------------------------------------------------------ the generic path

class GenericModel:
    """Any module, trained through functional_call: parameters in `named_parameters` order, in their own shapes."""

    kind = "user"
    supports_bf16 = False

    def __init__(self, arch: UserArch, module: nn.Module, input_shape: tuple, num_classes: int):
        self.arch, self.input_shape, self.num_classes = arch, input_shape, num_classes
        self.template = module
        self.names = [n for n, _ in module.named_parameters()]
        self.shapes = [tuple(p.shape) for _, p in module.named_parameters()]
        index = {n: i for i, n in enumerate(self.names)}
        self.layer_of: dict[int, nn.Module] = {}  # param index -> its Linear/Conv2d (weights and biases)
        sparse = []
        for prefix, m in module.named_modules():
            if isinstance(m, (nn.Linear, nn.Conv2d)):
                for pn in ("weight", "bias"):
                    i = index.get(f"{prefix}.{pn}" if prefix else pn)
                    if i is not None:
                        self.layer_of[i] = m
                i = index.get(f"{prefix}.weight" if prefix else "weight")
                if i is not None and (isinstance(m, nn.Linear) or arch.sparse_conv):
                    sparse.append(i)
        self.fc_weight_ids = tuple(sorted(set(sparse)))
        self.has_conv = any(isinstance(m, nn.Conv2d) for m in module.modules())
        # how `grads` computes on the CPU: "loop", "vmap" or "autograd"; None: a loop where the module has
        # convolutions, else "autograd" (see `grads`; the benchmark compares them)
        self.cpu_grads: Optional[str] = None
        self.buffers = dict(module.named_buffers())
        self._local = threading.local()
        self.compute_dtype = torch.float32
        self._grad = grad(self._loss)
        self._grad_vmap = vmap(self._grad, in_dims=(0, 0, 0, 0))
        self._fwd_vmap = vmap(self._call, in_dims=(0, 0))

    def from_module(self, module: nn.Module) -> list[torch.Tensor]:
        """A module's parameters in the engine's layout (here: its own, `named_parameters` order)."""
        return [p.detach().clone().contiguous() for p in module.parameters()]

    def to_module(self, params: list[torch.Tensor]) -> nn.Module:
        """A fresh module of the factory holding `params` (the engine's layout, e.g. a run's trained model)."""
        module = copy.deepcopy(self.template)
        with torch.no_grad():
            for p, v in zip(module.parameters(), params):
                p.copy_(v)
        return module

    def _module(self) -> nn.Module:
        """A copy of the module per thread: functional_call swaps a module's parameters while it runs, and chunks
        train in parallel threads."""
        m = getattr(self._local, "module", None)
        if m is None:
            m = self._local.module = copy.deepcopy(self.template)
        return m

    def _buffers(self, device: torch.device) -> dict:
        key = ("buffers", str(device))
        b = self._local.__dict__.get(key)
        if b is None:
            b = self._local.__dict__[key] = {k: v.to(device) for k, v in self.buffers.items()}
        return b

    def init(self, gen: torch.Generator) -> list[torch.Tensor]:
        """init "module": the factory's own initialisation, torch's generator seeded from `gen`; "fedevo": Linear and
        Conv2d parameters drawn from `gen` as the built-in models draw theirs (a Linear weight as its (in, out)
        transpose, in the built-in MLP's order), the other parameters the module's own (seeded from `gen` after
        them, only when there are any)."""
        if self.arch.init == "module":
            m = make_module(self.arch, self.input_shape, self.num_classes, seed=_seed_from(gen))
            return [p.detach().clone().contiguous() for p in m.parameters()]
        out: list[Optional[torch.Tensor]] = []
        for i, s in enumerate(self.shapes):
            layer = self.layer_of.get(i)
            if layer is None:
                out.append(None)
                continue
            if isinstance(layer, nn.Linear):
                fan_in = layer.in_features
                t = _fedevo_draw(s[::-1], fan_in, gen).t().contiguous() if len(s) == 2 else \
                    _fedevo_draw((1, *s), fan_in, gen).view(s)
            else:
                fan_in = layer.in_channels // layer.groups * math.prod(layer.kernel_size)
                t = _fedevo_draw(s, fan_in, gen)
            out.append(t)
        if any(t is None for t in out):
            m = make_module(self.arch, self.input_shape, self.num_classes, seed=_seed_from(gen))
            own = [p.detach().clone().contiguous() for p in m.parameters()]
            out = [o if o is not None else own[i] for i, o in enumerate(out)]
        return out

    def _call(self, params, x):
        return functional_call(self._module(), ({n: p for n, p in zip(self.names, params)},
                                                self._buffers(x.device)), (x,))

    def _loss(self, params, x, y, w):
        return (F.cross_entropy(self._call(params, x), y, reduction="none") * w).sum()

    def logits(self, params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return self._call(params, x)

    def grads(self, params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> list[torch.Tensor]:
        """Per-client gradients of Σ_b w_b·CE; params stacked (c, ...), x (c, B, ...), y (c, B), w (c, B). On the
        CPU a module with convolutions takes a loop of per-client gradients (`cpu_grads`; as the built-in CNN:
        batching clients buys nothing for compute-bound convolutions there), any other the clients' forward passes
        under vmap and one backward pass; the device path vmaps grad (`grads_vmap`)."""
        if params[0].device.type != "cpu":
            return self.grads_vmap(params, x, y, w)
        how = self.cpu_grads or ("loop" if self.has_conv else "autograd")
        if how == "vmap":
            return self.grads_vmap(params, x, y, w)
        if how == "loop":
            per = [self._grad([p[k] for p in params], x[k].float(), y[k], w[k].float()) for k in range(y.shape[0])]
            return [torch.stack(gs) for gs in zip(*per)]
        # the clients' forward passes vmapped, one backward pass of the sum of their losses: client k's parameters
        # get client k's gradient (the clients do not interact); ~10% less CPU time a step than vmap(grad) on a
        # Zen 3 (paired, one thread)
        ps = [p.detach().requires_grad_() for p in params]
        with torch.enable_grad():
            logits = self._fwd_vmap(ps, x.float())
            loss = (F.cross_entropy(logits.flatten(0, 1), y.reshape(-1), reduction="none") * w.reshape(-1).float()).sum()
            return list(torch.autograd.grad(loss, ps))

    def grads_vmap(self, params: list[torch.Tensor], x: torch.Tensor, y: torch.Tensor,
                   w: torch.Tensor) -> list[torch.Tensor]:
        """`grads` with the clients batched by torch.func.vmap (the device path's choice: one kernel for all)."""
        return list(self._grad_vmap(list(params), x.float(), y, w.float()))



@functools.lru_cache(maxsize=64)
def macs_and_params(arch: UserArch, input_shape: tuple, num_classes: int,
                    alpha: Optional[float]) -> tuple[float, float, float]:
    """fl/cost.py's estimate for a user model: (multiply-adds of one sample's forward pass through its Linear and
    Conv2d layers; the same over their active weights: a layer SET masks (every Linear, a Conv2d with
    `sparse_conv`) at its Erdős–Rényi density; active parameters, masked weights at that density, the rest
    dense). Measured on
    the module built on torch's meta device where the factory builds there: sized before it exists (the memory
    check refuses a model too large without allocating it)."""
    from .layout import density

    input_shape = tuple(input_shape)
    module = meta_module(arch, input_shape, num_classes)
    macs = None
    # what the module's forward (or the factory, building the template) prints goes to stderr, below Python too:
    # stdout is fedevo's (the memory check runs this before a search's table, a retrain's, `--json`'s object)
    with stdout_to_stderr():
        masked = (lambda m: isinstance(m, nn.Linear) or arch.sparse_conv) if alpha is not None else None
        if module is not None:
            try:
                macs = _macs(module, torch.zeros(1, *input_shape, device="meta"), alpha, masked)
            except Exception:  # noqa: BLE001 - an op the meta device lacks: the built module instead
                macs = None
        if macs is None:
            module = _template(arch, input_shape, num_classes)
            macs = _macs(module, torch.zeros(1, *input_shape), alpha, masked)
    model = GenericModel(arch, module, input_shape, num_classes)
    params = 0.0
    for i, s in enumerate(model.shapes):
        n = math.prod(s)
        if alpha is not None and i in model.fc_weight_ids:
            n = density(alpha, s[0], math.prod(s[1:])) * n
        params += n
    return macs[0], macs[1], params


on_reimport(macs_and_params.cache_clear)  # (sized from a factory a reloaded module changed)


def _macs(module: nn.Module, x: torch.Tensor, alpha: Optional[float] = None, masked=None) -> tuple[float, float]:
    """Multiply-adds of the module's Linear and Conv2d layers on the batch `x` (of one sample): all, and over the
    active weights (a layer `masked(layer)` says SET masks at its Erdős–Rényi density under `alpha`)."""
    from .layout import density

    macs = [0.0, 0.0]

    def hook(m, inp, out):
        if isinstance(m, nn.Linear):
            n = m.in_features * m.out_features * (out.numel() // max(1, out.shape[-1]))
        else:
            n = out.numel() * (m.in_channels // m.groups) * math.prod(m.kernel_size)
        s = m.weight.shape
        d = density(alpha, s[0], math.prod(s[1:])) if masked is not None and masked(m) else 1.0
        macs[0] += n
        macs[1] += d * n

    handles = [m.register_forward_hook(hook) for m in module.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    try:
        with torch.no_grad():
            module.eval()(x)
    finally:
        for h in handles:
            h.remove()
    return macs[0], macs[1]


def try_step(name: str, arch: UserArch, module: nn.Module, input_shape: tuple, num_classes: int,
             device_path: bool) -> None:
    """One training step of the generic path (`GenericModel`, the code that trains the
    module where it is not lowered onto the built-in kernels; a lowered stack trains there as well) for one client
    on 2 zero samples: the CPU engine's step and, with `device_path`, the GPU's `vmap(grad(...))` (run on the
    CPU: the same transforms). FedevoError naming what failed: an op vmap cannot batch (nn.LSTM), data-dependent
    Python control flow, random ops under vmap, ..."""
    model = GenericModel(arch, module, input_shape, num_classes)
    params = [p.detach().unsqueeze(0).clone() for p in module.parameters()]
    x, y, w = torch.zeros(1, 2, *input_shape), torch.zeros(1, 2, dtype=torch.long), torch.ones(1, 2)
    how = model.cpu_grads or ("loop" if model.has_conv else "autograd")
    steps = [("the CPU step (torch.func.grad per client)" if how == "loop" else
              "the CPU step (its clients' forward passes under torch.func.vmap)", model.grads)]
    if device_path:
        steps.append(("the GPU step (torch.func.vmap(grad) over its clients)", model.grads_vmap))
    for what, step in steps:
        try:
            call_user(step, params, x, y, w)
        except Exception as e:
            raise FedevoError(f"model {name!r} cannot be trained: {what} fails on a batch of 2 zero samples: "
                              f"{type(e).__name__}: {one_line(e)} (docs/models.md: what the generic path "
                              "trains)") from None
