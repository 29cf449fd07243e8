"""The model architectures a configuration names (the built-in MLP and CNN, a user's factory): typed, frozen,
validated. Torch-free and below the models that build them (fedevo/models/), beside config.py, which re-exports
them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from .configcheck import check as _check, typed as _typed


@dataclass(frozen=True)
class MLPArch:
    """Fully-connected net: `layers` hidden layers of `units` ReLU units."""

    layers: int = 2
    units: int = 200

    def __post_init__(self):
        _typed(self)
        _check(self.layers >= 0, f"layers must be >= 0, got {self.layers}")
        _check(self.units >= 1, f"units must be >= 1, got {self.units}")


@dataclass(frozen=True)
class CNNArch:
    """`conv_layers` conv blocks (conv k×k, ReLU, 2×2 max-pool while the map is ≥ 4 px; `channels` doubling per
    block) then an MLP head of `layers` × `units`."""

    conv_layers: int = 2
    channels: int = 32
    kernel: int = 5
    layers: int = 1
    units: int = 128

    def __post_init__(self):
        _typed(self)
        _check(1 <= self.conv_layers <= 4, f"conv_layers must be in [1, 4], got {self.conv_layers}")
        _check(self.channels >= 1, f"channels must be >= 1, got {self.channels}")
        _check(self.kernel in (1, 3, 5, 7) or (self.kernel >= 1 and self.kernel % 2 == 1),
               f"kernel must be a positive odd integer, got {self.kernel}")
        _check(self.layers >= 0, f"layers must be >= 0, got {self.layers}")
        _check(self.units >= 1, f"units must be >= 1, got {self.units}")


USER_INITS = ("module", "fedevo")  # UserArch.init


@dataclass(frozen=True)
class UserArch:
    """The user's model (issue 26): `spec` names a factory, "python:/abs/path/file.py:function" (the problem
    file's relative path already resolved) or "package.module:function", called as
    `function(input_shape=..., num_classes=..., **kwargs)`; `kwargs`: the keyword arguments ((name, value) pairs,
    sorted by name: hashable and picklable for Ray). `init`: "module" (the module's own initialisation, torch's
    global generator seeded from the evaluation's seed) or "fedevo" (Linear and Conv2d weights and biases drawn
    as the built-in models draw theirs: a user MLP then equals the built-in MLP bit for bit). `sparse_conv`: SET
    masks Conv2d weights too (Linear weights always, when alpha is set). docs/models.md."""

    spec: str
    kwargs: tuple = ()
    init: str = "module"
    sparse_conv: bool = False

    def __post_init__(self):
        _typed(self)
        _check(isinstance(self.spec, str) and ":" in self.spec,
               f"model must be 'mlp', 'cnn', 'python:path/to/file.py:function' or 'package.module:function', "
               f"got {self.spec!r}")
        _check(self.init in USER_INITS, f"model_init must be 'module' or 'fedevo', got {self.init!r}")
        _check(isinstance(self.sparse_conv, bool), f"sparse_conv must be true or false, got {self.sparse_conv!r}")

    @property
    def kwargs_dict(self) -> dict:
        return dict(self.kwargs)

    @property
    def factory_name(self) -> str:
        """How messages name the factory: its function ("python:/home/me/nets.py:make_model" is make_model)."""
        return self.spec.rpartition(":")[2]


Arch = Union[MLPArch, CNNArch, UserArch]
