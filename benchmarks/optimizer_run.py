"""One benchmark search, for running many in parallel processes (one per optimiser and seed):

    python benchmarks/optimizer_run.py PROBLEM OPTIMIZER SEED BUDGET TIME_BUDGET_S OUT [POP]

fedevo.search with --pop POP (the batch size; default 16; POP 1 is what gp and tpe use in-process when --pop is not
given: the model sees every result before its next proposal), in-process, no pages; TIME_BUDGET_S 0 = none.
benchmarks/optimizers_report.py makes the table of the finished runs.
"""
import sys, time, fedevo
problem, opt, seed, budget, tb, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), sys.argv[6]
pop = int(sys.argv[7]) if len(sys.argv) > 7 else 16
t0 = time.time()
kw = dict(time_budget=tb) if tb > 0 else {}
fedevo.search(problem, pop=pop, budget=budget, seed=seed, workers=0, out=out, optimizer=opt, page=False, progress=False, **kw)
print(problem, opt, seed, f"{time.time()-t0:.0f}s", flush=True)
