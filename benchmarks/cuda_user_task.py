"""GPU check (not part of the suite; needs CUDA): the user's own data with natural, very unbalanced clients (40
clients, 3 to ~93k rows, tabular), the built-in MLP and a generic (not lowered) user model, trained on CUDA and
on the CPU with the same seed; the objectives side by side (error within fp32 drift; comm, ε, Ω equal).

    python benchmarks/cuda_user_task.py
"""
import argparse, os, sys, tempfile, textwrap, json
argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
import numpy as np
from pathlib import Path
sys.path.insert(0, os.getcwd())
from fedevo import api
from fedevo.problem import load_problem
import torch

if not torch.cuda.is_available():
    sys.exit("benchmarks/cuda_user_task.py needs a CUDA GPU (torch.cuda.is_available() is False)")

d = Path(tempfile.mkdtemp())
rng = np.random.default_rng(0)
sizes = np.maximum(3, (600 * rng.pareto(1.2, 40)).astype(int))[:40]
n = int(sizes.sum())
x = rng.normal(size=(n, 20)).astype(np.float32); w = rng.normal(size=(20, 4))
y = (x @ w).argmax(1).astype(np.int64); cid = np.repeat(np.arange(40), sizes)
np.savez(d / "tab.npz", x=x, y=y, client_id=cid)
(d / "gated.py").write_text(textwrap.dedent('''
    import math, torch
    from torch import nn
    class Gated(nn.Module):
        def __init__(self, d, k, hidden):
            super().__init__(); self.a = nn.Linear(d, hidden); self.g = nn.Linear(d, hidden); self.o = nn.Linear(hidden, k)
        def forward(self, x):
            x = x.flatten(1); return self.o(torch.tanh(self.a(x)) * torch.sigmoid(self.g(x)))
    def make(input_shape, num_classes, hidden=32):
        return Gated(math.prod(input_shape), num_classes, hidden)
'''))
for model, extra in (('"mlp"', 'layers = 1\nunits = 32\n'), ('"python:gated.py:make"', '')):
    (d / "p.toml").write_text(f'''name = "nat"\nmodel = {model}\n[data]\nsource = "npz"\npath = "tab.npz"\npartition = "natural"\n[train]\nrounds = 5\nepochs = 2\nbatch_size = 32\nparticipation = 0.5\n{extra}[privacy]\nmechanism = "update"\ntrust = "central"\nclip = 1.0\nsigma = 0.5\ndelta = 1e-6\n[deployment]\npopulation = 10000\ncohort = 100\n[genes]\nlr = {{ type = "real", low = 0.01, high = 0.5, default = 0.1 }}\n''')
    prob = load_problem(str(d / "p.toml"))
    out = {}
    for dev in ("cpu", "cuda"):
        r = api.evaluate(prob, {"device": dev}, seed=3)
        out[dev] = dict(status=r.status, error=r.error, comm=r.comm, eps=r.eps, omega=r.omega, device=r.engine.get("device"))
    print(model, "clients", len(sizes), "sizes", int(sizes.min()), int(np.median(sizes)), int(sizes.max()), json.dumps(out))
