"""How often the stacked trainer's CUDA graphs would be captured and replayed (fl/stacked.py `_GraphCache`), under
the rule before 2026-11-27 (capture any bucket shape seen before; the 4 latest graphs kept) and today's (`recurs`:
only buckets whose members have GRAPH_ROUNDS rounds left or more, their shapes rounded up so that they recur; the
32 latest kept), on the bucket shapes real runs present.

Counts, not timings (no GPU needed; deterministic): each scenario's round loops (`rounds.round_program`: its
sampling, upload losses and client order) are driven without training (each round answered with no aggregate), so
the arrivals follow a real run's law but not its draws (a real run's SET regrowth draws from the same generator in
between; a CPU run of the 5-round generation with training made 4 captures, not 3, under the rule before), the
arrived clients grouped into buckets as a batched
generation groups them (`stacked.bucket_key`), and each bucket's shape signature (clients, widths, each step's
computed samples) replayed through both rules. A capture costs about two eager runs (a warm-up and the capture), a
replay a fraction of one where the step loop is bound by its launches (not measured here: on a GPU). Also the
arithmetic today's rounding adds to the recurring buckets (padding clients, zero-weight columns).

    python benchmarks/graph_recurrence.py [--data-dir D]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter, OrderedDict

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cuda_population import draw_generation  # noqa: E402

from fedevo.fl import stacked, stacked_graphs  # noqa: E402
from fedevo.fl.rounds import round_program  # noqa: E402
from fedevo.fl.simulate import prepare  # noqa: E402
from fedevo.problem import load_problem  # noqa: E402


def signatures(problem, params: list[dict], seeds: list[int], rounds: int, data_dir) -> list[tuple]:
    """Per bucket run, in order: (its members, the training labels)."""
    runs = []
    for p, s in zip(params, seeds):
        su = prepare(problem.sim_config(dict(p, precision="fp32"), rounds=rounds, data_dir=data_dir), seed=s)
        prog = round_program(su.cfg, su.model, su.data, su.part, gen=su.gen, privatizer=su.privatizer,
                             engine=su.engine)
        runs.append([su, prog, next(prog)])
    out = []
    while runs:
        buckets: dict = {}
        for su, _, work in runs:
            m = stacked.Member(dims=su.model.dims, params=[], masks={}, lr=su.cfg.lr, chunks=work.local_data,
                               seeds=work.seeds, epochs=su.cfg.epochs, batch_size=su.cfg.batch_size,
                               rounds_left=work.rounds_left, schedule="engine", tf32=False, torch_compile=False)
            if m.clients:
                buckets.setdefault(stacked.bucket_key(m), []).append(m)
        y = runs[0][0].data.y_train  # one data set per scenario
        for members in buckets.values():
            out.append((members, y))
        live = []
        for run in runs:
            su, prog, work = run
            try:
                run[2] = prog.send((None, work.comm_total))
                live.append(run)
            except StopIteration:
                su.noise.close()
        runs = live
    return out


def shape(members, y, shaped: bool) -> tuple[tuple, int, int]:
    """(signature, computed client-samples, real client-samples) of the stacked trainer's bucket of `members`, its
    shapes rounded up or not (`stacked._Bucket`, as on CUDA)."""
    cpu = torch.device("cpu")
    bucket, plain = stacked._Bucket(members, y, cpu, shaped=shaped), stacked._Bucket(members, y, cpu, shaped=False)
    return (bucket.C, tuple(bucket.dims), bucket.used), bucket.C * sum(bucket.used), plain.C * sum(plain.used)


def replay(buckets, rule: str) -> tuple[Counter, float]:
    seen, graphs, ev = set(), OrderedDict(), Counter()
    size = 4 if rule == "before" else stacked_graphs.GraphCache().size
    computed = real = 0
    for members, y in buckets:
        rec = stacked_graphs.recurs(members)
        key, c, r = shape(members, y, rule == "today" and rec is True)
        computed, real = computed + c, real + r
        if key in graphs:
            graphs.move_to_end(key)
            ev["replay"] += 1
        elif key in seen and (rule == "before" or rec is not False):
            ev["capture"] += 1
            graphs[key] = True
            while len(graphs) > size:
                graphs.popitem(last=False)
        else:
            ev["eager"] += 1
        seen.add(key)
    return ev, computed / real - 1.0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default=None)
    a = ap.parse_args(argv)
    fashion = load_problem("fashion_mlp_dp")
    gen = [dict(p, trust="central") for p in draw_generation(fashion, 20, 0)]
    scenarios = [
        ("fashion_mlp_dp generation of 20 (gen-seed 0, central), 5 rounds", fashion, gen, list(range(1, 21)), 5),
        ("fashion_mlp_dp default, participation 1.0 (~70 arrive), 100 rounds", fashion,
         [{"trust": "central", "participation": 1.0}], [1], 100),
        ("fashion_mlp_dp default (participation 0.1: ~7 arrive), 100 rounds", fashion, [{"trust": "central"}],
         [1], 100),
        ("fashion_mlp_dp generation of 20, 30 rounds", fashion, gen, list(range(1, 21)), 30),
        ("fashion_mlp_dp generation of 20, 60 rounds", fashion, gen, list(range(1, 21)), 60),
        ("digits_mlp default (20 clients of 71-72 samples, 10 a round), 50 rounds", load_problem("digits_mlp"), [{}],
         [1], 50),
    ]
    print(f"GRAPH_ROUNDS {stacked_graphs.GRAPH_ROUNDS}, CLIENT_SLACK {stacked_graphs.CLIENT_SLACK}, "
          f"SAMPLE_QUANTUM {stacked_graphs.SAMPLE_QUANTUM}")
    print(f"{'scenario':<72}{'rule':<8}{'runs':>6}{'eager':>7}{'capture':>9}{'replay':>8}{'+arith':>8}")
    for name, problem, params, seeds, rounds in scenarios:
        buckets = signatures(problem, params, seeds, rounds, a.data_dir)
        for rule in ("before", "today"):
            ev, extra = replay(buckets, rule)
            print(f"{name if rule == 'before' else '':<72}{rule:<8}{len(buckets):>6}{ev['eager']:>7}"
                  f"{ev['capture']:>9}{ev['replay']:>8}{100 * extra:>7.1f}%", flush=True)


if __name__ == "__main__":
    main()
