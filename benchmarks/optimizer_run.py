"""One benchmark search, for running many in parallel processes (one per optimiser and seed):

    python benchmarks/optimizer_run.py PROBLEM OPTIMIZER SEED BUDGET TIME_BUDGET_S OUT [POP]

fedevo.search with --pop POP (the batch size; default 16; POP 1 is what gp and tpe use in-process when --pop is not
given: the model sees every result before its next proposal), in-process, no pages; TIME_BUDGET_S 0 = none.
benchmarks/optimizers_report.py makes the table of the finished runs.
"""
import argparse, time
ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
for name, kind in (("problem", str), ("optimizer", str), ("seed", int), ("budget", int), ("time_budget_s", float),
                   ("out", str)):
    ap.add_argument(name, type=kind)
ap.add_argument("pop", type=int, nargs="?", default=16)
a = ap.parse_args()
import fedevo  # noqa: E402
problem, opt, seed, budget, tb, out, pop = a.problem, a.optimizer, a.seed, a.budget, a.time_budget_s, a.out, a.pop
t0 = time.time()
kw = dict(time_budget=tb) if tb > 0 else {}
fedevo.search(problem, pop=pop, budget=budget, seed=seed, workers=0, out=out, optimizer=opt, page=False, progress=False, **kw)
print(problem, opt, seed, f"{time.time()-t0:.0f}s", flush=True)
