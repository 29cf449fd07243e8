"""User models lowered onto the built-in kernels (issue 26): a module whose forward pass is a plain chain of
recognised layers (traced with torch.fx: `Flatten`, `Linear`, `ReLU`, `Conv2d` with 'same' padding, 2×2
`MaxPool2d`, `Dropout` (off: modules run in eval mode)) in the shape of the built-in MLP (any widths) or CNN (the
built-in CNN's layout) runs as `LoweredMLP` / `LoweredCNN`: the same speed and, with `init = "fedevo"`, the same
numbers bit for bit. A lowered model's logits are checked against the module's own forward pass on a random batch
when it is built; any difference (or FEDEVO_LOWER=0) and the generic path (fedevo/models/user.py) takes it."""

from __future__ import annotations

import math
import threading
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from ..arch import CNNArch, UserArch
from ..envvars import env_auto_flag
from ..errors import FedevoError
from .cnn import StackedCNN
from .layout import conv_layout
from .mlp import StackedMLP
from .user_module import _seed_from, make_module


def lowering_enabled() -> bool:
    """FEDEVO_LOWER: 'auto' (default; or 1/on/yes/true: lower recognisable stacks) or 0/off/no/false (never: the
    generic path, for tests and benchmarks); another value is a SetupError (envvars.env_auto_flag)."""
    return env_auto_flag("FEDEVO_LOWER") is not False



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
