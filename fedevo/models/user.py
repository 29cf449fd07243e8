"""The user's model (issue 26): a factory `make_model(input_shape=..., num_classes=..., **kwargs)` returning a
`torch.nn.Module`, trained by the same engine as the built-in models.

Two ways in, chosen when the model is built (`build_user_model`):

- **Lowered.** A module whose forward pass is a plain chain of recognised layers (traced with torch.fx:
  `Flatten`, `Linear`, `ReLU`, `Conv2d` with 'same' padding, 2×2 `MaxPool2d`, `Dropout` (off: modules run in eval
  mode)) in the shape of the built-in MLP (any widths) or CNN (the built-in CNN's layout) runs on the built-in
  kernels (`LoweredMLP`, `LoweredCNN`): the same speed and, with `init = "fedevo"`, the same numbers bit for bit.
  A lowered model's logits are checked against the module's own forward pass on a random batch when it is
  built; any difference and the generic path takes it instead.
- **Generic.** Anything else: `GenericModel`, the module's parameters stacked per chunk of clients and trained
  with `torch.func.functional_call` under `vmap(grad(...))` (the CPU engine's eager path and the device path).

Both present the engine's model interface: `shapes` (parameter shapes, in the engine's order), `fc_weight_ids`
(the parameters SET masks: Linear weights, and Conv2d weights with `sparse_conv`), `init(gen)`, `logits(params,
x)`, `grads(params, x, y, w)` (per-client gradients of Σ_b w_b·CE over stacked parameters), `grads_vmap` (the
device path), `compute_dtype`, `supports_bf16`, `kind`. Modules run in eval mode; their buffers (BatchNorm's
running statistics) are constants, not trained or federated.

Loading a `python:` model file runs its code with the user's rights, as an import does.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
import sys
import threading
from typing import Callable, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, grad, vmap

from ..config import CNNArch, UserArch
from ..envvars import env_auto_flag
from ..errors import FedevoError
from .cnn import StackedCNN
from .layout import conv_layout
from .mlp import StackedMLP
from ..plugins import load_callable
from ..usercode import call_user

def lowering_enabled() -> bool:
    """FEDEVO_LOWER: 'auto' (default; or 1/on/yes/true: lower recognisable stacks) or 0/off/no/false (never: the
    generic path, for tests and benchmarks); another value is a SetupError (envvars.env_auto_flag)."""
    return env_auto_flag("FEDEVO_LOWER") is not False


# ------------------------------------------------------------------ the factory



@functools.lru_cache(maxsize=64)
def load_factory(spec: str) -> Callable:
    """The factory a (resolved) spec names; FedevoError when the file, module or function does not exist. A model
    file is imported once per process (a Ray worker's first evaluation), under a private module name."""
    return load_callable(spec, kind="model")


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or "(no message)"


def make_module(arch: UserArch, input_shape: tuple, num_classes: int, seed: int = 0, *,
                same_as_template: bool = True) -> nn.Module:
    """The factory's module, built with torch's global generator seeded with `seed` (restored afterwards), on
    the CPU, in eval mode. Its size is checked on torch's meta device first (no memory used), and its parameters'
    shapes against this process's template (same_as_template): a factory must build the same architecture for the
    same arguments, or the engine's stacked parameters would not fit. (Its size is checked before: at load time,
    fedevo.problem's probe, and by the memory check, both on torch's meta device.)"""
    factory = load_factory(arch.spec)
    name = arch.spec.rpartition(":")[2]
    template = _template(arch, tuple(input_shape), int(num_classes)) if same_as_template else None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:  # sys.exit / a KeyboardInterrupt raised in the factory: its error, never the process's end
            module = call_user(factory, input_shape=tuple(input_shape), num_classes=int(num_classes),
                               **arch.kwargs_dict)
        except Exception as e:
            raise FedevoError(f"model factory {name!r} raised {type(e).__name__}: {_one_line(e)} "
                              f"(called with {_called_with(arch, input_shape, num_classes)})") from None
    if not isinstance(module, nn.Module):
        raise FedevoError(f"model factory {name!r} returned {type(module).__name__}, not a torch.nn.Module")
    if not any(True for _ in module.parameters()):
        raise FedevoError(f"model factory {name!r} returned a module without parameters")
    if template is not None:
        if _shapes(template) != _shapes(module):
            raise _different(name, _shapes(template), _shapes(module))
    return module.to(torch.float32).eval()


def _called_with(arch: UserArch, input_shape: tuple, num_classes: int) -> str:
    return (f"input_shape={tuple(input_shape)}, num_classes={num_classes}"
            f"{''.join(f', {k}={v!r}' for k, v in arch.kwargs)}")


def _shapes(module: nn.Module) -> list[tuple]:
    return [tuple(p.shape) for p in module.parameters()]


def meta_module(arch: UserArch, input_shape: tuple, num_classes: int, seed: int = 0) -> Optional[nn.Module]:
    """The factory's module built on torch's meta device (shapes, no memory); None when the factory cannot build
    there (it reads data, calls .item(), ...) or fails: the real build then says what is wrong."""
    factory = load_factory(arch.spec)
    try:  # what the factory prints goes to stderr (this is sizing, not an evaluation: no log to take it)
        with torch.random.fork_rng(devices=[]), torch.device("meta"), contextlib.redirect_stdout(sys.stderr):
            torch.manual_seed(seed)
            module = call_user(factory, input_shape=tuple(input_shape), num_classes=int(num_classes),
                               **arch.kwargs_dict)
    except Exception:  # noqa: BLE001 - UserExit too: the real build names it
        return None
    return module if isinstance(module, nn.Module) and any(True for _ in module.parameters()) else None


def _different(name: str, want: list, got: list) -> FedevoError:
    diff = next((f"{a} against {b}" for a, b in zip(want, got) if a != b), f"{len(want)} against {len(got)} parameters")
    return FedevoError(f"model factory {name!r} built a different architecture on another call with the same "
                       f"arguments (parameter shapes {diff}); its layers' sizes must depend on its arguments only "
                       "(a random width: make it a gene)")


def probe(arch: UserArch, input_shape: tuple, num_classes: int,
          check_size: Callable[[int, str], None] = lambda n, called: None) -> None:
    """`_probe` with what the factory prints sent to stderr (stdout is fedevo's: a JSON object, progress lines)."""
    with contextlib.redirect_stdout(sys.stderr):
        _probe(arch, input_shape, num_classes, check_size)


def _probe(arch: UserArch, input_shape: tuple, num_classes: int, check_size: Callable[[int, str], None]) -> None:
    """Build the module and run one forward pass on a zero batch of 2: FedevoError naming what is wrong (the
    factory, its size, an architecture that changes from call to call, or the input shape / logits the module
    rejects). Problem files call it at load time: on torch's meta device where the factory builds there (no
    memory is used: check_size(parameters, how it was called) refuses a model too large before it exists), else
    for real."""
    name = arch.spec.rpartition(":")[2]
    meta = meta_module(arch, input_shape, num_classes)
    if meta is not None:
        check_size(sum(p.numel() for p in meta.parameters()), _called_with(arch, input_shape, num_classes))
        again = meta_module(arch, input_shape, num_classes, seed=1)
        if again is not None and _shapes(again) != _shapes(meta):
            raise _different(name, _shapes(meta), _shapes(again))
        try:
            with torch.no_grad():
                out = call_user(meta.eval(), torch.zeros(2, *input_shape, device="meta"))
            if isinstance(out, torch.Tensor) and tuple(out.shape) == (2, num_classes):
                return
        except Exception:  # noqa: BLE001 - the real forward pass below names what is wrong
            pass
    module = make_module(arch, input_shape, num_classes)
    try:
        with torch.no_grad():
            out = call_user(module, torch.zeros(2, *input_shape))
    except Exception as e:
        raise FedevoError(f"model {name!r} rejects input shape {tuple(input_shape)} (a batch of 2 zero samples): "
                          f"{type(e).__name__}: {_one_line(e)}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, num_classes):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise FedevoError(f"model {name!r} returns {got} for a batch of 2 samples of shape {tuple(input_shape)}; "
                          f"expected logits of shape (2, {num_classes})")


@functools.lru_cache(maxsize=32)
def _template(arch: UserArch, input_shape: tuple, num_classes: int) -> nn.Module:
    """The module built once per process (a worker) for this arch; models copy it."""
    return make_module(arch, input_shape, num_classes, same_as_template=False)


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


def _seed_from(gen: torch.Generator) -> int:
    return int(torch.randint(0, 2 ** 62, (1,), generator=gen))


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


# ------------------------------------------------------------------ lowering onto the built-in kernels

def _chain(module: nn.Module) -> Optional[list[tuple]]:
    """The module's forward pass as a chain of ops [("linear", name), ("relu",), ("flatten",), ("conv", name),
    ("pool",)], or None when it is not a straight chain of recognised ops."""
    try:
        import torch.fx as fx

        graph = fx.symbolic_trace(module).graph
    except Exception:
        return None
    ops: list[tuple] = []
    prev = size = None
    for node in graph.nodes:
        if node.op == "placeholder":
            if prev is not None:
                return None
            prev = node
            continue
        if node.op == "output":
            return ops if node.args[0] is prev and size is None else None
        if node.op == "call_method" and node.target == "size" and node.args == (prev, 0) and size is None:
            size = node  # x.view(x.size(0), -1): the batch size, read for the next node only
            continue
        if size is not None:
            if node.op == "call_method" and node.target in ("view", "reshape") and node.args == (prev, size, -1):
                ops.append(("flatten",))
                prev, size = node, None
                continue
            return None
        if not node.args or node.args[0] is not prev or any(isinstance(a, fx.Node) for a in node.args[1:]) \
                or any(isinstance(v, fx.Node) for v in node.kwargs.values()):
            return None
        op = _recognise(module, node)
        if op is None:
            return None
        if op != ("identity",):
            ops.append(op)
        prev = node
    return None


def _recognise(module: nn.Module, node) -> Optional[tuple]:
    args, kw = node.args[1:], node.kwargs
    if node.op == "call_module":
        m = module.get_submodule(node.target)
        t = type(m)
        if t is nn.Linear:
            return ("linear", node.target) if m.bias is not None else None
        if t is nn.ReLU:
            return ("relu",)
        if t is nn.Flatten:
            return ("flatten",) if m.start_dim == 1 and m.end_dim == -1 else None
        if t in (nn.Dropout, nn.Identity):
            return ("identity",)  # modules run in eval mode
        if t is nn.Conv2d:
            k = m.kernel_size
            ok = (k[0] == k[1] and k[0] % 2 == 1 and m.stride == (1, 1) and m.dilation == (1, 1) and m.groups == 1
                  and m.bias is not None and m.padding_mode == "zeros"
                  and (m.padding == (k[0] // 2, k[0] // 2) or (m.padding == "same")))
            return ("conv", node.target) if ok else None
        if t is nn.MaxPool2d:
            pair = lambda v: v if isinstance(v, tuple) else (v, v)  # noqa: E731
            ok = (pair(m.kernel_size) == (2, 2) and pair(m.stride) == (2, 2) and pair(m.padding) == (0, 0)
                  and pair(m.dilation) == (1, 1) and not m.ceil_mode and not m.return_indices)
            return ("pool",) if ok else None
        return None
    if node.op == "call_function":
        if node.target in (F.relu, torch.relu, torch.relu_) and args in ((), (False,), (True,)) \
                and set(kw) <= {"inplace"}:
            return ("relu",)
        if node.target is torch.flatten and (args == (1,) or kw == {"start_dim": 1}):
            return ("flatten",)
        if node.target is F.max_pool2d:
            names = ("kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices")
            a = {**dict(zip(names, args)), **kw}
            two = lambda v: v in (2, (2, 2), [2, 2])  # noqa: E731
            ok = (two(a.get("kernel_size")) and (a.get("stride") in (None, ()) or two(a.get("stride")))
                  and a.get("padding", 0) in (0, (0, 0)) and a.get("dilation", 1) in (1, (1, 1))
                  and not a.get("ceil_mode", False) and not a.get("return_indices", False))
            return ("pool",) if ok else None
        return None
    if node.op == "call_method":
        if node.target in ("relu", "relu_") and not args and not kw:
            return ("relu",)
        if node.target == "flatten" and (args == (1,) or kw == {"start_dim": 1}):
            return ("flatten",)
    return None


def _fc_tail(ops: list[tuple]) -> Optional[list[str]]:
    """Linear (ReLU Linear)*: the Linear layers' names, or None."""
    if not ops or len(ops) % 2 == 0:
        return None
    names = []
    for j, op in enumerate(ops):
        if j % 2 == 0:
            if op[0] != "linear":
                return None
            names.append(op[1])
        elif op != ("relu",):
            return None
    return names


def lower(arch: UserArch, module: nn.Module, input_shape: tuple, num_classes: int):
    """A LoweredMLP / LoweredCNN computing the module's function on the built-in kernels, or None."""
    ops = _chain(module)
    if ops is None:
        return None
    try:
        if any(op[0] == "conv" for op in ops):
            model = _lower_cnn(arch, module, ops, input_shape, num_classes)
        else:
            model = _lower_mlp(arch, module, ops, input_shape, num_classes)
    except (ValueError, FedevoError):
        return None
    if model is None or not _same_function(model, module, input_shape):
        return None
    return model


def _lower_mlp(arch, module, ops, input_shape, num_classes):
    if ops and ops[0] == ("flatten",):
        ops = ops[1:]
    elif len(input_shape) != 1:
        return None
    names = _fc_tail(ops)
    if names is None:
        return None
    lins = [module.get_submodule(n) for n in names]
    dims = [lins[0].in_features] + [m.out_features for m in lins]
    if dims[0] != math.prod(input_shape) or dims[-1] != num_classes or \
            any(a.out_features != b.in_features for a, b in zip(lins[:-1], lins[1:])):
        return None
    if not _covers(module, lins):
        return None
    return LoweredMLP(arch, dims, names, input_shape, num_classes)


def _lower_cnn(arch, module, ops, input_shape, num_classes):
    if arch.sparse_conv or len(input_shape) != 3 or input_shape[1] != input_shape[2]:
        return None  # the built-in CNN's masks cover its FC weights only; square maps
    convs, pools = [], []
    j = 0
    while j < len(ops) and ops[j][0] == "conv":
        convs.append(ops[j][1])
        rest = ops[j + 1:j + 3]
        if rest in ([("relu",), ("pool",)], [("pool",), ("relu",)]):
            pools.append(True)
            j += 3
        elif rest[:1] == [("relu",)]:
            pools.append(False)
            j += 2
        else:
            return None
    if not convs or ops[j:j + 1] != [("flatten",)]:
        return None
    names = _fc_tail(ops[j + 1:])
    if names is None:
        return None
    cms = [module.get_submodule(n) for n in convs]
    lins = [module.get_submodule(n) for n in names]
    hidden = {m.out_features for m in lins[:-1]}
    if len(hidden) > 1 or len({m.kernel_size for m in cms}) != 1 or not 1 <= len(cms) <= 4:
        return None
    cnn = CNNArch(conv_layers=len(cms), channels=cms[0].out_channels, kernel=cms[0].kernel_size[0],
                  layers=len(lins) - 1, units=hidden.pop() if hidden else 128)
    layout, flat = conv_layout(cnn, input_shape)
    if [(cv.c_out, cv.c_in, cv.pool) for cv in layout] != [(m.out_channels, m.in_channels, p)
                                                          for m, p in zip(cms, pools)]:
        return None
    dims = [lins[0].in_features] + [m.out_features for m in lins]
    if dims[0] != flat or dims[-1] != num_classes or not _covers(module, cms + lins):
        return None
    return LoweredCNN(arch, cnn, convs, names, input_shape, num_classes)


def _covers(module: nn.Module, layers: list[nn.Module]) -> bool:
    """The layers hold every parameter of the module, each once."""
    mine = [id(p) for m in layers for p in m.parameters()]
    return len(set(mine)) == len(mine) and set(mine) == {id(p) for p in module.parameters()}


def _same_function(model, module: nn.Module, input_shape: tuple) -> bool:
    """The lowered logits equal the module's own on a random batch (the parameters mapped across)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(4, *input_shape, generator=gen)
    with torch.no_grad():
        want = module(x)
        got = model.logits(model.from_module(module), x)
    return got.shape == want.shape and bool(torch.allclose(got, want, rtol=1e-4, atol=1e-5))


class _Lowered:
    """What the lowered models add to the built-in ones: the parameters' mapping from the module, its init."""

    def _setup(self, arch: UserArch, layer_names: list[str], input_shape: tuple, num_classes: int) -> None:
        self.arch, self.layer_names = arch, layer_names
        self.input_shape, self.num_classes = input_shape, num_classes

    def from_module(self, module: nn.Module) -> list[torch.Tensor]:
        """The module's parameters in the built-in layout: a Linear weight (out, in) as (in, out), its bias (1, out)."""
        out = []
        for n in self.layer_names:
            m = module.get_submodule(n)
            w, b = m.weight.detach(), m.bias.detach()
            if isinstance(m, nn.Linear):
                out += [w.t().contiguous().clone(), b.view(1, -1).clone()]
            else:
                out += [w.contiguous().clone(), b.clone()]
        return out

    def to_module(self, params: list[torch.Tensor]) -> nn.Module:
        """A fresh module of the factory holding `params` (the engine's layout, e.g. a run's trained model)."""
        module = make_module(self.arch, self.input_shape, self.num_classes)
        with torch.no_grad():
            for n, (w, b) in zip(self.layer_names, zip(params[0::2], params[1::2])):
                m = module.get_submodule(n)
                m.weight.copy_(w.t() if isinstance(m, nn.Linear) else w)
                m.bias.copy_(b.reshape(-1))
        return module

    def init(self, gen: torch.Generator) -> list[torch.Tensor]:
        """init "fedevo": the built-in model's own draws (bit for bit the built-in model); "module": the factory's
        initialisation, torch's generator seeded from `gen`."""
        if self.arch.init == "fedevo":
            return super().init(gen)
        return self.from_module(make_module(self.arch, self.input_shape, self.num_classes, seed=_seed_from(gen)))


class LoweredMLP(_Lowered, StackedMLP):
    """A Linear/ReLU stack on the built-in MLP's kernels (any widths)."""

    def __init__(self, arch: UserArch, dims: list[int], layer_names: list[str], input_shape: tuple, num_classes: int):
        self.dims = list(dims)
        self.shapes = []
        for a, b in zip(self.dims[:-1], self.dims[1:]):
            self.shapes += [(a, b), (1, b)]
        self.fc_weight_ids = tuple(range(0, len(self.shapes), 2))
        self._local = threading.local()
        self.compute_dtype = torch.float32
        self._setup(arch, layer_names, input_shape, num_classes)


class LoweredCNN(_Lowered, StackedCNN):
    """A Conv2d/ReLU/MaxPool/Flatten/Linear stack in the built-in CNN's layout, on its kernels."""

    def __init__(self, arch: UserArch, cnn: CNNArch, conv_names: list[str], fc_names: list[str], input_shape: tuple,
                 num_classes: int):
        StackedCNN.__init__(self, cnn, input_shape, num_classes)
        self._setup(arch, conv_names + fc_names, input_shape, num_classes)


@functools.lru_cache(maxsize=64)
def macs_and_params(arch: UserArch, input_shape: tuple, num_classes: int, alpha: Optional[float]) -> tuple[float, float]:
    """fl/cost.py's estimate for a user model: (multiply-adds of one sample's forward pass through its Linear and
    Conv2d layers, active parameters: masked weights at their Erdős–Rényi density, the rest dense). Measured on
    the module built on torch's meta device where the factory builds there: sized before it exists (the memory
    check refuses a model too large without allocating it)."""
    from .layout import density

    input_shape = tuple(input_shape)
    module = meta_module(arch, input_shape, num_classes)
    macs = None
    if module is not None:
        try:
            macs = _macs(module, torch.zeros(1, *input_shape, device="meta"))
        except Exception:  # noqa: BLE001 - an op the meta device lacks: the built module instead
            macs = None
    if macs is None:
        module = _template(arch, input_shape, num_classes)
        macs = _macs(module, torch.zeros(1, *input_shape))
    model = GenericModel(arch, module, input_shape, num_classes)
    params = 0.0
    for i, s in enumerate(model.shapes):
        n = math.prod(s)
        if alpha is not None and i in model.fc_weight_ids:
            n = density(alpha, s[0], math.prod(s[1:])) * n
        params += n
    return macs, params


def _macs(module: nn.Module, x: torch.Tensor) -> float:
    """Multiply-adds of the module's Linear and Conv2d layers on the batch `x` (of one sample)."""
    macs = [0.0]

    def hook(m, inp, out):
        if isinstance(m, nn.Linear):
            macs[0] += m.in_features * m.out_features * (out.numel() // max(1, out.shape[-1]))
        else:
            macs[0] += out.numel() * (m.in_channels // m.groups) * math.prod(m.kernel_size)

    handles = [m.register_forward_hook(hook) for m in module.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    try:
        with torch.no_grad():
            module.eval()(x)
    finally:
        for h in handles:
            h.remove()
    return macs[0]
