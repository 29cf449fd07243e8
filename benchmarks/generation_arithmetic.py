"""How much local-training arithmetic a generation holds against its largest member: the floor that issue #37's
"a generation in ≤ 2× the time of its slowest member alone" meets wherever the GPU is busy with arithmetic.

Counts, not timings (no GPU needed; deterministic): for a generation drawn as benchmarks/cuda_population.py draws it
(--generation N individuals uniformly from the problem's genes, --gen-seed), each member's multiply-adds of one
round's local training, 3 × (Σ d_i·d_(i+1)) × samples per client × E × expected arrived clients (p·K·(1 − upload
loss)), dense as the stacked trainer computes it (SET masks are applied to dense weights); then the same after the
stacked trainer's bucketing (`stacked.bucket_key`: one depth, one power-of-two width class; each member padded to
its bucket's widest layers), and with FEDEVO_WIDTH_CLASSES=depth (one bucket a depth). The ratio Σ / max is what the batch must do against what its largest member alone does:
where both run at the device's arithmetic throughput, the batch takes that many times as long; the ≤ 2× target holds
only where a member alone reaches at most 2 / ratio of the batch's throughput.

--tflops R (optional): also the seconds these counts take at R TFLOP/s (2 FLOP a multiply-add), e.g. a throughput
measured for the reference round in a results file; an estimate, printed as one.

    python benchmarks/generation_arithmetic.py [--problem fashion_mlp_dp] [--generation 20] [--gen-seed 0]
        [--rounds R] [--tflops R]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections import defaultdict

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fedevo.config import MLPArch  # noqa: E402
from fedevo.fl import stacked  # noqa: E402
from fedevo.data.catalog import N_TRAIN  # noqa: E402
from fedevo.fl.cost import INPUT_SHAPES, NUM_CLASSES  # noqa: E402
from fedevo.models.layout import fc_dims  # noqa: E402
from fedevo.problem import load_problem  # noqa: E402


def member_rows(problem, gen: list, rounds=None, samples=None) -> list[dict]:
    """Per member of `gen` (parameter dicts of `problem`): its widths, expected arrived clients a round, dense
    multiply-adds of one round's local training ('macs'), the same padded to its bucket's widest ('padded', with
    'bucket' its widths), its bucket keys ('key', 'exact_key') and the planned rounds."""
    rows = []
    for i, p in enumerate(gen):
        cfg = problem.sim_config(p, rounds=rounds)
        if not isinstance(cfg.arch, MLPArch):
            raise SystemExit(f"{problem.name}: the stacked trainer batches MLPs only")
        dims = tuple(fc_dims(math.prod(INPUT_SHAPES[cfg.data.dataset]), cfg.arch, NUM_CLASSES))
        n = samples or N_TRAIN[cfg.data.dataset] // cfg.data.clients
        arrived = cfg.sampled_per_round * (1.0 - cfg.upload_loss)
        per_sample = 3 * sum(x * y for x, y in zip(dims[:-1], dims[1:]))
        m = stacked.Member(dims=dims, params=[], masks={}, lr=cfg.lr,
                           chunks=[[np.arange(n)] * max(1, round(arrived))],
                           seeds=[0], epochs=cfg.epochs, batch_size=cfg.batch_size, schedule="engine", tf32=False,
                           torch_compile=False)
        rows.append(dict(i=i, p=p, dims=dims, arrived=arrived, macs=per_sample * n * cfg.epochs * arrived,
                         per_epoch=n * cfg.epochs * arrived, rounds=cfg.rounds, key=stacked.bucket_key(m),
                         exact_key=stacked.bucket_key(m, exact=True)))
    buckets = defaultdict(list)
    for r in rows:
        buckets[r["key"]].append(r)
    for ms in buckets.values():
        widest = [max(r["dims"][j] for r in ms) for j in range(len(ms[0]["dims"]))]
        per_sample = 3 * sum(x * y for x, y in zip(widest[:-1], widest[1:]))
        for r in ms:
            r["padded"] = per_sample * r["per_epoch"]
            r["bucket"] = "x".join(str(w) for w in widest[1:-1])
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problem", default="fashion_mlp_dp")
    ap.add_argument("--generation", type=int, default=20)
    ap.add_argument("--gen-seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=None)
    ap.add_argument("--samples", type=int, default=None,
                    help="training samples per client (default: the data set's training examples / clients)")
    ap.add_argument("--tflops", type=float, default=None)
    a = ap.parse_args(argv)
    from cuda_population import draw_generation  # here: cuda_population imports member_rows

    problem = load_problem(a.problem)
    rows = member_rows(problem, draw_generation(problem, a.generation, a.gen_seed), a.rounds, a.samples)
    buckets = {r["key"] for r in rows}
    exact = len({r["exact_key"] for r in rows})
    genes = [g.name for g in problem.genes if g.name in ("trust", "layers", "units", "participation")]
    print(f"{a.problem}: a generation of {a.generation} drawn uniformly from its genes (seed {a.gen_seed}); "
          f"multiply-adds of one round's local training (expected arrivals), GMAC")
    print(f"{'#':>3} " + "".join(f"{g:>14}" for g in genes) + f"{'arrived':>9}{'own':>9}{'padded':>9}  bucket")
    for r in rows:
        vals = "".join(f"{r['p'][g]:>14.3g}" if isinstance(r['p'][g], float) else f"{r['p'][g]:>14}" for g in genes)
        print(f"{r['i']:>3} {vals}{r['arrived']:9.1f}{r['macs'] / 1e9:9.4g}{r['padded'] / 1e9:9.4g}  {r['bucket']}")
    own = sum(r['macs'] for r in rows)
    padded = sum(r['padded'] for r in rows)
    big = max(rows, key=lambda r: r['macs'])
    print(f"generation: {own / 1e9:.4g} GMAC a round dense, {padded / 1e9:.4g} in its {len(buckets)} buckets "
          f"(padding +{100 * (padded / own - 1):.0f} %); largest member #{big['i']}: {big['macs'] / 1e9:.4g} GMAC")
    print(f"with exact=True (equal widths only share a bucket): {exact} buckets, no padding")
    os.environ["FEDEVO_WIDTH_CLASSES"] = "depth"  # every width of one depth in one bucket (fl/stacked_settings.py)
    try:
        deep = member_rows(problem, draw_generation(problem, a.generation, a.gen_seed), a.rounds, a.samples)
    finally:
        os.environ.pop("FEDEVO_WIDTH_CLASSES")
    print(f"with FEDEVO_WIDTH_CLASSES=depth (every width of one depth in one bucket): {len({r['key'] for r in deep})} "
          f"buckets, {sum(r['padded'] for r in deep) / 1e9:.4g} GMAC (padding "
          f"+{100 * (sum(r['padded'] for r in deep) / own - 1):.0f} %)")
    print(f"ratio to the largest member: {own / big['macs']:.2f} dense, {padded / big['macs']:.2f} as bucketed "
          f"-> the batch in <= 2x the largest alone needs the member alone at <= "
          f"{100 * 2 * big['macs'] / padded:.0f} % of the batch's arithmetic throughput")
    if a.tflops:
        T = rows[0]["rounds"]
        print(f"at {a.tflops:g} TFLOP/s (an estimate, 2 FLOP a multiply-add, {T} rounds): the batch's local training "
              f"{2 * padded * T / a.tflops / 1e12:.3f} s, the largest member's "
              f"{2 * big['macs'] * T / a.tflops / 1e12:.3f} s")



if __name__ == "__main__":
    main()
