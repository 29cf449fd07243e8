"""The native kernels of this machine's build (-march=native) against torch."""

import pytest

from fedevo import native

from . import kernel_checks

pytestmark = pytest.mark.skipif(native.load() is None, reason="native kernels unavailable (no C compiler)")


def test_kernels_match_torch():
    kernel_checks.run_all(native.load())
