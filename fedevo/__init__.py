"""fedevo: multi-objective search over private federated learning configurations."""

import os as _os

# Torch's OpenMP pool and MKL's threads fight when neither has a wait policy: on a 2-core machine a 1 ms
# batched matmul followed by an elementwise op took 15 ms (see benchmarks/README.md). Must be set before torch loads.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
