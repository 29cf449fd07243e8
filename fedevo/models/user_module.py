"""The user's model factory (issue 26): `make_model(input_shape=..., num_classes=..., **kwargs)` named by a problem's
`model = "python:file.py:make_model"` (or a registered name), loaded once per process, called to build the module
(seeded, in eval mode, its architecture checked to be the same on every call), on torch's meta device to size it
before it exists, and probed at load time (a forward pass and a training step on a zero batch). What the factory
prints goes to stderr; an exception, `sys.exit` or a KeyboardInterrupt it raises is one FedevoError naming it.

The two ways its module trains: fedevo/models/lowering.py (recognised stacks on the built-in kernels) and
fedevo/models/user.py (`GenericModel`, anything else; `build_user_model` picks).

Loading a `python:` model file runs its code with the user's rights, as an import does.
"""

from __future__ import annotations

import functools
import math
from typing import Callable, Optional

import torch
import torch.nn as nn

from ..arch import UserArch
from ..errors import FedevoError, one_line
from ..plugins import load_callable, on_reimport, reloaded_since
from ..usercode import call_user, stdout_to_stderr


def load_factory(spec: str) -> Callable:
    """The factory a (resolved) spec names; FedevoError when the file, module or function does not exist. A model
    file is imported once per process (a Ray worker's first evaluation), under a private module name; a
    `package.module:fn` is loaded again once the module was reloaded (plugins.reloaded_since)."""
    fn = _load_factory(spec)
    return _load_factory(spec) if reloaded_since(spec, fn) else fn


@functools.lru_cache(maxsize=64)
def _load_factory(spec: str) -> Callable:
    return load_callable(spec, kind="model")


load_factory.cache_clear = _load_factory.cache_clear  # (what callers and on_reimport clear)


def make_module(arch: UserArch, input_shape: tuple, num_classes: int, seed: int = 0, *,
                same_as_template: bool = True) -> nn.Module:
    """The factory's module, built with torch's global generator seeded with `seed` (restored afterwards), on
    the CPU, in eval mode. Its size is checked on torch's meta device first (no memory used), and its parameters'
    shapes against this process's template (same_as_template): a factory must build the same architecture for the
    same arguments, or the engine's stacked parameters would not fit. (Its size is checked before: at load time,
    fedevo.problem's probe, and by the memory check, both on torch's meta device.)"""
    factory = load_factory(arch.spec)
    name = arch.factory_name
    template = _template(arch, tuple(input_shape), int(num_classes)) if same_as_template else None
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        try:  # sys.exit / a KeyboardInterrupt raised in the factory: its error, never the process's end
            module = call_user(factory, input_shape=tuple(input_shape), num_classes=int(num_classes),
                               **arch.kwargs_dict)
        except Exception as e:
            raise FedevoError(f"model factory {name!r} raised {type(e).__name__}: {one_line(e)} "
                              f"(called with {_called_with(arch, input_shape, num_classes)})") from None
    if not isinstance(module, nn.Module):
        raise FedevoError(f"model factory {name!r} returned {type(module).__name__}, not a torch.nn.Module")
    _check_methods(name, module)
    if not any(True for _ in module.parameters()):
        raise FedevoError(f"model factory {name!r} returned a module without parameters")
    _check_trainable(name, module)
    if template is not None:
        if _shapes(template) != _shapes(module):
            raise _different(name, _shapes(template), _shapes(module))
    return module.to(torch.float32).eval()


# the nn.Module methods fedevo calls on a user's module and its layers, and those torch's own calls reach from
# them (`to` -> `_apply` -> `children` -> `named_children`, `parameters` -> `named_parameters` -> `_named_members`
# -> `named_modules`, `eval` -> `train`, ...): an attribute of the same name set on the module hides the method
_CALLED_METHODS = ("to", "_apply", "eval", "train", "children", "named_children", "modules", "named_modules",
                   "parameters", "named_parameters", "named_buffers", "_named_members", "get_submodule",
                   "register_forward_hook")


def _hidden_method(module: nn.Module, prefix: str = "") -> Optional[tuple[str, str]]:
    """(the attribute's dotted name, the method it hides) of the first attribute of the module or a layer below
    it (in definition order) that hides one of _CALLED_METHODS, or None. Read from the instances' own __dict__
    (the methods themselves may be the hidden ones); a layer, parameter or buffer of such a name is not one
    (torch keeps those apart and refuses the last two)."""
    own = vars(module)
    for method in _CALLED_METHODS:
        if method in own:
            return prefix + method, method
    for key, sub in own.get("_modules", {}).items():
        found = _hidden_method(sub, f"{prefix}{key}.") if isinstance(sub, nn.Module) else None
        if found is not None:
            return found
    return None


def _check_methods(name: str, module: nn.Module) -> None:
    """FedevoError where an attribute of the module (`self.to = ...`, `self.train = ...`) hides a torch.nn.Module
    method fedevo or torch calls on it: it is refused here, in one line, not failing later with a traceback
    ('int' object is not callable) inside torch."""
    found = _hidden_method(module)
    if found is not None:
        attr, method = found
        raise FedevoError(f"model {name!r}: its attribute {attr!r} hides torch.nn.Module.{method}(), which fedevo "
                          "and torch call on the module; rename the attribute")


def _check_trainable(name: str, module: nn.Module) -> None:
    """FedevoError where the module has frozen parameters (requires_grad=False): fedevo trains and uploads every
    parameter of the module (both paths take `module.parameters()`, SET masks and Ω count them all), so a frozen
    layer would be trained all the same, silently; or a complex one (made float32: its imaginary part dropped)."""
    complex_ = [(n, p.dtype) for n, p in module.named_parameters() if p.is_complex()]
    if complex_:  # made float32 as every parameter is, the imaginary part would be dropped (torch's one warning)
        n, dtype = complex_[0]
        raise FedevoError(f"model {name!r} has a complex parameter {n!r} ({str(dtype).removeprefix('torch.')}); fedevo "
                          "trains real float32 parameters: hold its real and imaginary parts as two parameters")
    frozen = [n for n, p in module.named_parameters() if not p.requires_grad]
    if frozen:
        names = ", ".join(frozen[:4]) + (", ..." if len(frozen) > 4 else "")
        raise FedevoError(f"model {name!r} has {len(frozen)} parameter{'s' if len(frozen) != 1 else ''} with "
                          f"requires_grad=False ({names}); fedevo trains and uploads every parameter: unfreeze "
                          "them, or register frozen weights as buffers")


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
        with torch.random.fork_rng(devices=[]), torch.device("meta"), stdout_to_stderr():
            torch.manual_seed(seed)
            module = call_user(factory, input_shape=tuple(input_shape), num_classes=int(num_classes),
                               **arch.kwargs_dict)
    except Exception:  # noqa: BLE001 - UserExit too: the real build names it
        return None
    if not isinstance(module, nn.Module) or _hidden_method(module) is not None:
        return None  # the real build names what is wrong
    return module if any(True for _ in module.parameters()) else None


def _different(name: str, want: list, got: list) -> FedevoError:
    diff = next((f"{a} against {b}" for a, b in zip(want, got) if a != b), f"{len(want)} against {len(got)} parameters")
    return FedevoError(f"model factory {name!r} built a different architecture on another call with the same "
                       f"arguments (parameter shapes {diff}); its layers' sizes must depend on its arguments only "
                       "(a random width: make it a gene)")


# the load check tries a training step (real zero samples, fedevo's own step) on models of up to this many
# parameters (an MLP of 15 million: built and stepped on 2 samples in 0.3 s, 1 s with the GPU's step too); a larger
# one is checked on torch's meta device only (the shape and dtype of its logits) where its factory builds there
PROBE_STEP_PARAMETERS = 20_000_000


def probe(arch: UserArch, input_shape: tuple, num_classes: int,
          check_size: Callable[[int, str], None] = lambda n, called: None, *, device_path: bool = False,
          try_step: Optional[Callable] = None) -> None:
    """`_probe` with what the factory prints sent to stderr, below Python too (stdout is fedevo's: a JSON object,
    results). try_step: fedevo.models.user.try_step (passed in: user.py imports this module), or None: no step."""
    with stdout_to_stderr():
        _probe(arch, input_shape, num_classes, check_size, device_path, try_step)


def _probe(arch: UserArch, input_shape: tuple, num_classes: int, check_size: Callable[[int, str], None],
           device_path: bool = False, try_step: Optional[Callable] = None) -> None:
    """Build the module, run one forward pass on a zero batch of 2 and try one training step on it: FedevoError
    naming what is wrong (the factory, its size, frozen parameters, an architecture that changes from call to
    call, the input shape the module rejects, logits of the wrong shape or dtype or not finite, a forward pass
    fedevo's step cannot train: an op torch.func.vmap cannot batch, data-dependent control flow). Problem files
    call it at load time. The factory is called on torch's meta device first where it builds there (no memory is
    used: check_size(parameters, how it was called) refuses a model too large before it exists); a model of more
    than PROBE_STEP_PARAMETERS is then checked there only. `device_path`: the run may train on a GPU, whose step
    (`GenericModel.grads_vmap`) is tried too."""
    name = arch.factory_name
    meta = meta_module(arch, input_shape, num_classes)
    if meta is not None:
        _check_trainable(name, meta)
        n = sum(p.numel() for p in meta.parameters())
        check_size(n, _called_with(arch, input_shape, num_classes))
        again = meta_module(arch, input_shape, num_classes, seed=1)
        if again is not None and _shapes(again) != _shapes(meta):
            raise _different(name, _shapes(meta), _shapes(again))
        if n > PROBE_STEP_PARAMETERS:
            try:
                with torch.no_grad():
                    out = call_user(meta.eval(), torch.zeros(2, *input_shape, device="meta"))
            except Exception:  # noqa: BLE001 - the real forward pass below names what is wrong
                out = None
            if isinstance(out, torch.Tensor) and tuple(out.shape) == (2, num_classes):
                _check_dtype(name, out)
                return
    module = make_module(arch, input_shape, num_classes, same_as_template=meta is None)
    try:
        with torch.no_grad():
            out = call_user(module, torch.zeros(2, *input_shape))
    except Exception as e:
        raise FedevoError(f"model {name!r} rejects input shape {tuple(input_shape)} (a batch of 2 zero samples): "
                          f"{type(e).__name__}: {one_line(e)}") from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (2, num_classes):
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        several = not isinstance(out, torch.Tensor) and isinstance(out, (tuple, list, dict)) or hasattr(out, "logits")
        raise FedevoError(f"model {name!r} returns {got} for a batch of 2 samples of shape {tuple(input_shape)}; "
                          f"expected logits of shape (2, {num_classes})"
                          + ("; a forward that returns several outputs: wrap the module so that its forward returns "
                             "the logits alone (e.g. `return self.inner(x)[0]`)" if several else ""))
    _check_dtype(name, out)
    if not bool(torch.isfinite(out).all()):
        raise FedevoError(f"model {name!r} returns non-finite logits (NaN or inf) on a batch of 2 zero samples of "
                          f"shape {tuple(input_shape)}")
    if try_step is not None and sum(p.numel() for p in module.parameters()) <= PROBE_STEP_PARAMETERS:
        try_step(name, arch, module, tuple(input_shape), int(num_classes), device_path)


def _check_dtype(name: str, out: torch.Tensor) -> None:
    if not out.is_floating_point():
        raise FedevoError(f"model {name!r} returns logits of dtype {out.dtype}; expected floating-point logits "
                          "(fedevo trains them with the cross-entropy): return e.g. float32")


@functools.lru_cache(maxsize=32)
def _template(arch: UserArch, input_shape: tuple, num_classes: int) -> nn.Module:
    """The module built once per process (a worker) for this arch; models copy it."""
    return make_module(arch, input_shape, num_classes, same_as_template=False)


# a module beside a model file reloaded after its edit: the file is imported anew, and what was built of it goes
on_reimport(load_factory.cache_clear)
on_reimport(_template.cache_clear)


def _seed_from(gen: torch.Generator) -> int:
    return int(torch.randint(0, 2 ** 62, (1,), generator=gen))


# the no-effect check's probe inputs: a fixed N(0, 1) batch, and the same batch this many times larger (a gene
# that acts only on large activations, e.g. a clamp's bound, is met there)
PROBE_SCALES = (1.0, 100.0)
PROBE_BATCH = 4


def computed(arch: UserArch, input_shape: tuple, num_classes: int, shapes: Optional[tuple] = None) -> Optional[tuple]:
    """What the factory's module computes at initialisation, as fedevo trains it (eval mode, seed 0): its
    parameters' shapes, and on each probe input (a fixed random batch of 4 at each of PROBE_SCALES) its logits and
    the parameters' gradients of the cross-entropy against fixed labels. Two gene values that give the same have no
    effect on the training (a Dropout rate: off in eval mode); the gradients tell apart a gene whose effect the
    outputs hide at initialisation (a zero-initialised head: logits 0 whatever comes before it; a backward hook).
    None where that is not cheap to know (a module too large to build twice here) or the build fails (the probe
    names why). Cost: the build, and a forward and a backward pass per probe input. `shapes`: the parameter shapes
    from `meta_shapes`, where the caller has them (not built on the meta device again)."""
    shapes = meta_shapes(arch, input_shape, num_classes) if shapes is None else shapes
    if shapes is not None and sum(math.prod(s) for s in shapes) > PROBE_STEP_PARAMETERS:
        return None
    try:
        with stdout_to_stderr():
            module = make_module(arch, input_shape, num_classes, same_as_template=False)
            gen = torch.Generator().manual_seed(0)
            x = torch.randn(PROBE_BATCH, *input_shape, generator=gen)
            y = torch.randint(0, int(num_classes), (PROBE_BATCH,), generator=gen)
            seen = [_outputs_and_gradients(module, x * scale, y) for scale in PROBE_SCALES]
    except Exception:  # noqa: BLE001 - the probe names what is wrong
        return None
    return None if any(s is None for s in seen) else (tuple(_shapes(module)), seen)


def _outputs_and_gradients(module: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Optional[tuple]:
    """(logits, the trainable parameters' gradients of their cross-entropy against y: None for a parameter the loss
    does not reach), or None where the module returns no tensor."""
    params = [p for p in module.parameters() if p.requires_grad]
    with torch.enable_grad():
        out = call_user(module, x)
        if not isinstance(out, torch.Tensor):
            return None
        grads: tuple = ()
        if out.is_floating_point() and out.requires_grad and out.dim() == 2:
            loss = nn.functional.cross_entropy(out.float(), y)
            grads = torch.autograd.grad(loss, params, allow_unused=True)
    return out.detach(), tuple(None if g is None else g.detach() for g in grads)


def meta_shapes(arch: UserArch, input_shape: tuple, num_classes: int) -> Optional[tuple]:
    """The module's parameter shapes from a build on torch's meta device (no memory, no forward pass); None where
    the factory cannot build there."""
    meta = meta_module(arch, input_shape, num_classes)
    return None if meta is None else tuple(_shapes(meta))


def same_computation(a: Optional[tuple], b: Optional[tuple]) -> bool:
    """Two `computed` results known and equal: the same shapes, and on every probe input bit-identical logits AND
    gradients."""
    if a is None or b is None or a[0] != b[0] or len(a[1]) != len(b[1]):
        return False
    return all(_same_tensor(oa, ob) and len(ga) == len(gb) and all(map(_same_tensor, ga, gb))
               for (oa, ga), (ob, gb) in zip(a[1], b[1]))


def _same_tensor(a: Optional[torch.Tensor], b: Optional[torch.Tensor]) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and bool(torch.equal(a, b))
