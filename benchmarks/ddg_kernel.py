"""The distributed discrete Gaussian's native encoding kernel (fedevo/native/ddg.c, `fedevo_ddg_encode`) of a git
revision (--base) against this checkout's, side by side in one process: each revision's ddg.c (and common.h)
compiled with fedevo's flags into a library of its own, the same rows encoded by both in alternating order, the
outputs checked equal. Nanoseconds per coordinate, for discrete Gaussian σ of 1.5 to 5000 (integer units).

    python benchmarks/ddg_kernel.py --base 8db034e [--coords 1000000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from machine import cpu  # noqa: E402

from fedevo import native  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def build(rev: str, where: Path):
    """ddg.c of `rev` ('' for the working tree) as a library; its encode function."""
    where.mkdir(parents=True, exist_ok=True)
    for name in ("ddg.c", "common.h"):
        src = f"fedevo/native/{name}"
        text = (ROOT / src).read_text() if not rev else subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{rev}:{src}"], check=True, capture_output=True, text=True).stdout
        (where / name).write_text(text)
    cc = os.environ.get("CC", "cc")
    subprocess.run([cc, *native.CFLAGS, "-shared", str(where / "ddg.c"), "-o", str(where / "ddg.so"), "-lm"],
                   check=True)
    fn = ctypes.CDLL(str(where / "ddg.so")).fedevo_ddg_encode
    fn.argtypes = native.SIGNATURES["fedevo_ddg_encode"]
    fn.restype = ctypes.c_int
    return fn


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the git revision to compare against")
    ap.add_argument("--coords", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        fns = {a.base: build(a.base, Path(tmp) / "base"), "this checkout": build("", Path(tmp) / "head")}
        x = np.random.default_rng(0).normal(size=a.coords) * 0.01
        outs = {name: np.empty(a.coords, dtype=np.int64) for name in fns}
        print(f"CPU: {cpu()}; {a.coords} coordinates, median of {a.repeats} (alternating order)")
        print(f"{'sigma':>8}" + "".join(f"{name + ' ns/coord':>26}" for name in fns) + f"{'ratio':>8}  equal")
        for sigma in (1.5, 30.0, 300.0, 5000.0):
            times: dict = {name: [] for name in fns}
            for r in range(a.repeats):
                for name in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                    t = time.perf_counter()
                    fns[name](x.ctypes.data, a.coords, 100.0, sigma, 1234 + r, outs[name].ctypes.data)
                    times[name].append(time.perf_counter() - t)
            equal = np.array_equal(*outs.values())
            med = [statistics.median(times[name]) for name in fns]
            print(f"{sigma:8g}" + "".join(f"{1e9 * m / a.coords:26.2f}" for m in med) + f"{med[0] / med[1]:7.2f}x  "
                  f"{equal}")


if __name__ == "__main__":
    main()
