"""Models built from genes (stacked for many clients at once) and SET sparsity."""

from __future__ import annotations

from ..arch import CNNArch, MLPArch, UserArch


def build_model(arch, input_shape: tuple, num_classes: int):
    from .cnn import StackedCNN
    from .mlp import StackedMLP

    if isinstance(arch, MLPArch):
        return StackedMLP(arch, input_shape, num_classes)
    if isinstance(arch, CNNArch):
        return StackedCNN(arch, input_shape, num_classes)
    if isinstance(arch, UserArch):
        from .user import build_user_model

        return build_user_model(arch, input_shape, num_classes)
    raise TypeError(f"unknown architecture {arch!r}")
