"""Example model factories for fedevo problem files (docs/models.md).

A problem file names one as `model = "python:models.py:make_mlp"` (the path relative to the problem file); fedevo
calls it as `make_mlp(input_shape=..., num_classes=..., **kwargs)`, the keyword arguments from the problem's
[model_args] table and from its genes that are not fedevo settings (here `hidden`, `depth`, `channels`). Both
are plain Linear/ReLU (and Conv2d/MaxPool) stacks, so fedevo trains them on its built-in kernels.
"""

from __future__ import annotations

import math

from torch import nn


def make_mlp(input_shape, num_classes, hidden=200, depth=2):
    """`depth` hidden layers of `hidden` ReLU units."""
    layers = [nn.Flatten()]
    width = math.prod(input_shape)
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    layers.append(nn.Linear(width, num_classes))
    return nn.Sequential(*layers)


def make_cnn(input_shape, num_classes, channels=32, hidden=128):
    """Two 5×5 conv blocks (`channels`, then twice as many; each ReLU then 2×2 max-pool), a hidden layer of
    `hidden` units (the experiments' CNN with the defaults on 28×28 images)."""
    c, h, w = input_shape
    return nn.Sequential(
        nn.Conv2d(c, channels, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(channels, 2 * channels, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(2 * channels * (h // 4) * (w // 4), hidden), nn.ReLU(),
        nn.Linear(hidden, num_classes),
    )
