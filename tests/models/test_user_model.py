"""The user's model (issue 26 item 2, models/user.py): a factory named in a problem file trains through the engine,
lowered onto the built-in kernels where it is a recognisable stack, else through the generic functional_call path;
genes reach the factory; SET masks Linear weights; Ω counts the module's parameters; bad models are one line at
load time."""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from fedevo.config import MLPArch, SimConfig, UserArch
from fedevo.errors import FedevoError
from fedevo.evaluation import evaluate
from fedevo.models import build_model
from fedevo.models.lowering import LoweredCNN, LoweredMLP
from fedevo.models.user import GenericModel
from fedevo.problem import load_problem

MODELS = '''
import math
import torch
from torch import nn

CALLS = []

def make_mlp(input_shape, num_classes, hidden=32, depth=2):
    CALLS.append(dict(input_shape=input_shape, num_classes=num_classes, hidden=hidden, depth=depth))
    layers, width = [nn.Flatten()], math.prod(input_shape)
    for _ in range(depth):
        layers += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    return nn.Sequential(*layers, nn.Linear(width, num_classes))

class PlainMLP(nn.Module):  # a hand-written forward: traced by torch.fx, lowered too
    def __init__(self, d, hidden, k):
        super().__init__()
        self.fc1, self.fc2, self.out = nn.Linear(d, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, k)

    def forward(self, x):
        x = torch.flatten(x, 1)
        x = torch.relu(self.fc1(x))
        x = nn.functional.relu(self.fc2(x))
        return self.out(x)

def make_plain(input_shape, num_classes, hidden=32):
    return PlainMLP(math.prod(input_shape), hidden, num_classes)

class PlainCNN(nn.Module):
    def __init__(self, c, hw, k):
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(c, 4, 3, padding=1), nn.Conv2d(4, 8, 3, padding="same")
        self.fc, self.out = nn.Linear(8 * (hw // 4) ** 2, 16), nn.Linear(16, k)

    def forward(self, x):
        x = nn.functional.max_pool2d(torch.relu(self.c1(x)), 2)
        x = nn.functional.max_pool2d(self.c2(x).relu(), kernel_size=2)
        x = x.view(x.size(0), -1)
        return self.out(nn.functional.relu(self.fc(x)))

def make_plain_cnn(input_shape, num_classes):
    return PlainCNN(input_shape[0], input_shape[1], num_classes)

class Near(nn.Module):  # a chain of recognised ops that is not an MLP: a ReLU on the logits
    def __init__(self, d, k):
        super().__init__()
        self.fc, self.out = nn.Linear(d, 16), nn.Linear(16, k)

    def forward(self, x):
        return torch.relu(self.out(torch.relu(self.fc(x.flatten(1)))))

def make_near(input_shape, num_classes):
    return Near(math.prod(input_shape), num_classes)

def make_odd_cnn(input_shape, num_classes):  # channels not doubling: not the built-in layout
    c, h, w = input_shape
    return nn.Sequential(nn.Conv2d(c, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(4, 5, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(5 * (h // 4) * (w // 4), num_classes))

def make_tanh(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 16), nn.Tanh(), nn.Linear(16, num_classes))

class Gated(nn.Module):  # not a chain: the generic path
    def __init__(self, d, k):
        super().__init__()
        self.a, self.b = nn.Linear(d, 16), nn.Linear(d, 16)
        self.norm = nn.LayerNorm(16)
        self.conv = nn.Conv2d(1, 2, 3, padding=1)
        self.out = nn.Linear(16, k)

    def forward(self, x):
        x = torch.flatten(x + self.conv(x).mean(1, keepdim=True), 1)
        return self.out(self.norm(torch.tanh(self.a(x)) * torch.sigmoid(self.b(x))))

def make_gated(input_shape, num_classes):
    return Gated(math.prod(input_shape), num_classes)

def make_cnn(input_shape, num_classes, channels=4):
    c, h, w = input_shape
    return nn.Sequential(nn.Conv2d(c, channels, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(channels, 2 * channels, 3, padding=1), nn.MaxPool2d(2), nn.ReLU(),
                         nn.Flatten(), nn.Linear(2 * channels * (h // 4) * (w // 4), 16), nn.ReLU(),
                         nn.Linear(16, num_classes))

def raises(input_shape, num_classes):
    raise ValueError("no such layer size")

def not_a_module(input_shape, num_classes):
    return 42

def wrong_input(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(100, num_classes))

def wrong_output(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 3))

class Recurrent(nn.Module):  # nn.LSTM: torch.func.vmap has no batching rule for it
    def __init__(self, d, k):
        super().__init__()
        self.lstm = nn.LSTM(d, 8, batch_first=True)
        self.fc = nn.Linear(8, k)

    def forward(self, x):
        out, _ = self.lstm(x.flatten(2))
        return self.fc(out[:, -1])

def lstm(input_shape, num_classes):
    return Recurrent(math.prod(input_shape[1:]), num_classes)

class Branches(nn.Module):  # data-dependent Python control flow
    def __init__(self, d, k, conv=False):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 3, padding=1) if conv else nn.Identity()
        self.fc = nn.Linear(d, k)

    def forward(self, x):
        x = self.conv(x).flatten(1)
        if x.sum() > 0:
            x = 2 * x
        return self.fc(x)

def branches(input_shape, num_classes):
    return Branches(math.prod(input_shape), num_classes)

def conv_branches(input_shape, num_classes):  # a loop of per-client grads on the CPU: no vmap there
    return Branches(math.prod(input_shape), num_classes, conv=True)

class Cast(nn.Module):
    def __init__(self, d, k, dtype=None, scale=1.0):
        super().__init__()
        self.fc, self.dtype, self.scale = nn.Linear(d, k), dtype, scale

    def forward(self, x):
        out = self.fc(x.flatten(1)) * self.scale
        return out if self.dtype is None else out.to(self.dtype)

def int_logits(input_shape, num_classes):
    return Cast(math.prod(input_shape), num_classes, dtype=torch.int64)

def nan_logits(input_shape, num_classes):
    return Cast(math.prod(input_shape), num_classes, scale=float("nan"))

def double_logits(input_shape, num_classes):  # float64 logits train (the cross-entropy takes them)
    return Cast(math.prod(input_shape), num_classes, dtype=torch.float64)

class Shadows(nn.Module):  # an attribute hiding a torch.nn.Module method fedevo (or torch) calls
    def __init__(self, d, k, where):
        super().__init__()
        self.fc = nn.Linear(d, k)
        if where == "module":
            self.to = "cpu"
        else:
            self.fc.train = True

    def forward(self, x):
        return self.fc(x.flatten(1))

def hides_to(input_shape, num_classes):
    return Shadows(math.prod(input_shape), num_classes, "module")

def hides_train(input_shape, num_classes):  # in a layer: nn.Module.eval() calls each layer's train()
    return Shadows(math.prod(input_shape), num_classes, "layer")

def frozen(input_shape, num_classes):  # its first Linear frozen: fedevo would train and upload it all the same
    m = nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 16), nn.ReLU(), nn.Linear(16, num_classes))
    m[1].requires_grad_(False)
    return m


class Complex(nn.Module):  # a complex gain: made float32 as every parameter is, its imaginary part was dropped
    def __init__(self, d, k):
        super().__init__()
        self.fc = nn.Linear(d, k)
        self.gain = nn.Parameter(torch.ones(2, dtype=torch.complex64))

    def forward(self, x):
        return self.fc(x.flatten(1)) * self.gain.abs().sum()

def complex_gain(input_shape, num_classes):
    return Complex(math.prod(input_shape), num_classes)


class Pair(nn.Module):  # (logits, features), as many a model's forward returns
    def __init__(self, d, k):
        super().__init__()
        self.fc = nn.Linear(d, k)

    def forward(self, x):
        z = self.fc(x.flatten(1))
        return z, x.flatten(1)

def pair(input_shape, num_classes):
    return Pair(math.prod(input_shape), num_classes)
'''

PROBLEM = '''
name = "user"
dataset = "synthetic"
model = "{model}"
{extra}
[data]
clients = 8

[train]
rounds = 2
epochs = 1
batch_size = 16
participation = 1.0
precision = "fp32"
device = "cpu"
upload_loss = 0.0
{train}
[genes]
lr = {{ type = "real", low = 0.01, high = 0.3, default = 0.1 }}
{genes}
'''


@pytest.fixture
def files(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "my_models.py").write_text(MODELS)

    def write(model="python:sub/my_models.py:make_mlp", *, extra="", train="", genes="", name="p.toml") -> Path:
        p = tmp_path / name
        p.write_text(PROBLEM.format(model=model, extra=extra, train=train, genes=genes))
        return p
    return write


def _rewrite(path: Path, old: str, new: str) -> Path:
    path.write_text(path.read_text().replace(old, new))
    return path


def _builtin(problem, params=None, seed=3, **kw):
    """The built-in MLP with the same settings as a user-model problem."""
    cfg = problem.sim_config(params)
    return SimConfig(**{**{f: getattr(cfg, f) for f in ("data", "rounds", "epochs", "batch_size", "lr",
                                                         "participation", "alpha", "xi", "upload_loss", "privacy",
                                                         "precision", "device", "chunk_clients")}, **kw})


def _same(a, b):
    assert (a.error, a.comm, a.eps, a.omega, a.accuracy_global) == (b.error, b.comm, b.eps, b.omega,
                                                                     b.accuracy_global)


@pytest.mark.parametrize("factory", ["make_mlp", "make_plain"])
@pytest.mark.parametrize("alpha", [None, 3.0])
def test_lowered_user_mlp_equals_the_builtin_mlp(files, factory, alpha):
    """nn.Sequential(Flatten, Linear, ReLU, Linear, ReLU, Linear) (or the same written as a module with its own
    forward) with init = "fedevo" is lowered onto the built-in MLP's kernels with its draws: the same objectives,
    exactly (dense, and SET-sparse with prune/regrow)."""
    prob = load_problem(str(files(f"python:sub/my_models.py:{factory}", train='model_init = "fedevo"\nxi = 0.2')))
    params = {} if alpha is None else {"alpha": alpha}
    cfg = prob.sim_config(params)
    assert isinstance(build_model(cfg.arch, (1, 8, 8), 10), LoweredMLP)
    from fedevo.fl.simulate import simulate

    ref = simulate(SimConfig(**{**vars(_builtin(prob, params)), "arch": MLPArch(layers=2, units=32)}), seed=3)
    got = evaluate(prob, params, seed=3)
    assert got.status == ref.status == "ok"
    _same(got, ref)


def test_generic_path_matches_the_builtin_mlp(files, monkeypatch):
    """The same user MLP through the generic vmap(grad(functional_call)) path (lowering off): the built-in MLP's
    objectives within the numerics' tolerance (fp32, other kernels): error within 0.03, Ω, comm and ε equal."""
    prob = load_problem(str(files(train='model_init = "fedevo"')))
    monkeypatch.setenv("FEDEVO_LOWER", "0")
    assert isinstance(build_model(prob.sim_config().arch, (1, 8, 8), 10), GenericModel)
    from fedevo.fl.simulate import simulate

    ref = simulate(SimConfig(**{**vars(_builtin(prob)), "arch": MLPArch(layers=2, units=32)}), seed=3)
    got = evaluate(prob, seed=3)
    assert got.status == "ok"
    assert abs(got.error - ref.error) <= 0.03
    assert (got.omega, got.comm, got.eps) == (ref.omega, ref.comm, ref.eps)


def test_generic_chunk_training_matches_the_builtin_engine(files, monkeypatch):
    """One chunk's local training, generic path vs the built-in MLP: the same parameters (transposed) to fp32
    rounding."""
    from fedevo.fl.engine import train_clients

    prob = load_problem(str(files(train='model_init = "fedevo"')))
    monkeypatch.setenv("FEDEVO_LOWER", "0")
    user = build_model(prob.sim_config().arch, (1, 8, 8), 10)
    mlp = build_model(MLPArch(2, 32), (1, 8, 8), 10)
    pu, pm = user.init(torch.Generator().manual_seed(1)), mlp.init(torch.Generator().manual_seed(1))
    for a, b in zip(pu, pm):
        assert torch.equal(a, b.t().reshape(a.shape)) if a.dim() == 2 else torch.equal(a, b.view(-1))
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(120, 1, 8, 8, generator=g), torch.randint(0, 10, (120,), generator=g)
    clients = [np.arange(0, 50), np.arange(50, 80), np.arange(80, 120)]
    kw = dict(epochs=2, batch_size=16, lr=0.1)
    tu = train_clients(user, pu, {}, x, y, clients, gen=torch.Generator().manual_seed(5), **kw)
    tm = train_clients(mlp, pm, {}, x, y, clients, gen=torch.Generator().manual_seed(5), **kw)
    for a, b in zip(tu, tm):
        b = b.transpose(1, 2) if a.dim() == 3 else b.reshape(a.shape)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)
        assert not torch.equal(a[0], pu[0]) or a.dim() != 3


@pytest.mark.parametrize("factory,kind", [("make_mlp", LoweredMLP), ("make_plain", LoweredMLP),
                                          ("make_cnn", LoweredCNN), ("make_plain_cnn", LoweredCNN),
                                          ("make_near", GenericModel), ("make_odd_cnn", GenericModel),
                                          ("make_tanh", GenericModel), ("make_gated", GenericModel)])
def test_what_is_lowered(files, factory, kind):
    """Recognisable stacks (nn.Sequential or a hand-written forward: torch.relu, F.max_pool2d, x.view(x.size(0),
    -1), ...) are lowered; anything else, or a chain whose lowering would compute another function, is not. Either
    way the model computes the module's function."""
    from fedevo.models.user_module import make_module

    arch = UserArch(load_problem(str(files(f"python:sub/my_models.py:{factory}"))).model_ref)
    model = build_model(arch, (1, 8, 8), 10)
    assert type(model) is kind
    module = make_module(arch, (1, 8, 8), 10, seed=9)
    params = model.from_module(module)
    x = torch.randn(5, 1, 8, 8)
    torch.testing.assert_close(model.logits(params, x), module(x).detach(), atol=1e-5, rtol=1e-4)
    back = model.to_module(params)  # the engine's parameters as the user's module again
    assert type(back) is type(module) and back is not module
    torch.testing.assert_close(back(x).detach(), module(x).detach(), atol=1e-6, rtol=1e-6)


def test_lowering_is_checked_against_the_module(files):
    """The guard behind lowering: a lowered model whose function differs from the module's (here a Tanh where the
    lowered MLP has a ReLU, the same layer names) is detected."""
    from fedevo.models.lowering import _same_function
    from fedevo.models.user_module import make_module

    spec = load_problem(str(files())).model_ref
    lowered = build_model(UserArch(spec, (("depth", 1), ("hidden", 16))), (1, 8, 8), 10)
    assert isinstance(lowered, LoweredMLP)
    same = make_module(UserArch(spec, (("depth", 1), ("hidden", 16))), (1, 8, 8), 10, seed=2)
    tanh = make_module(UserArch(spec.replace(":make_mlp", ":make_tanh")), (1, 8, 8), 10, seed=2)
    assert _same_function(lowered, same, (1, 8, 8))
    assert not _same_function(lowered, tanh, (1, 8, 8))


@pytest.mark.parametrize("factory", ["make_mlp", "make_gated"])
def test_generic_gradient_modes_agree(files, monkeypatch, factory):
    """The generic path's three ways to per-client gradients (a loop of grads, vmap(grad), the vmapped forward with
    one backward pass) give the same gradients, each client its own (a client's gradient is its loss's alone)."""
    monkeypatch.setenv("FEDEVO_LOWER", "0")
    model = build_model(UserArch(load_problem(str(files(f"python:sub/my_models.py:{factory}"))).model_ref),
                        (1, 8, 8), 10)
    gen = torch.Generator().manual_seed(0)
    params = [torch.stack([p, p * 0.5]) for p in model.init(gen)]
    x, y = torch.randn(2, 7, 1, 8, 8, generator=gen), torch.randint(0, 10, (2, 7), generator=gen)
    w = torch.full((2, 7), 1 / 7)
    got = {}
    for how in ("loop", "vmap", "autograd"):
        model.cpu_grads = how
        got[how] = model.grads(params, x, y, w)
    one = model.grads([p[1:] for p in params], x[1:], y[1:], w[1:])  # client 1 alone
    for a, b, c, d in zip(got["loop"], got["vmap"], got["autograd"], one):
        torch.testing.assert_close(b, a, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(c, a, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(d[0], a[1], atol=1e-6, rtol=1e-5)


def test_genes_and_model_args_reach_the_factory(files):
    prob = load_problem(str(files(extra="[model_args]\ndepth = 1\n",
                                  genes='hidden = { type = "int", low = 4, high = 64, default = 8 }')))
    assert prob.model_kwargs == ("depth", "hidden")
    cfg = prob.sim_config({"hidden": 17})
    assert cfg.arch.kwargs_dict == {"depth": 1, "hidden": 17}
    model = build_model(cfg.arch, (1, 8, 8), 10)
    assert model.dims == [64, 17, 10]
    from fedevo.models.user_module import load_factory

    calls = load_factory(cfg.arch.spec).__globals__["CALLS"]
    assert dict(input_shape=(1, 8, 8), num_classes=10, hidden=17, depth=1) in calls
    assert evaluate(prob, {"hidden": 5}, seed=0).omega == 64 * 5 + 5 + 5 * 10 + 10
    with pytest.raises(FedevoError, match="unknown parameter.*'width'"):
        prob.sim_config({"width": 3})


def test_gene_names_clash_and_fedevo_settings(files):
    with pytest.raises(FedevoError, match=r"\[model_args\] key 'lr' is a fedevo setting"):
        load_problem(str(files(extra="[model_args]\nlr = 1\n")))
    with pytest.raises(FedevoError, match="gene 'num_classes' is given to the model factory by fedevo"):
        load_problem(str(files(genes='num_classes = { type = "int", low = 2, high = 4 }')))
    with pytest.raises(FedevoError, match=r"\[model_args\].*model 'mlp' takes none"):
        load_problem(str(files("mlp", extra="[model_args]\nhidden = 3\n")))
    with pytest.raises(FedevoError, match=r"model: expected a string, got \[1, 2\]"):
        load_problem(str(_rewrite(files("mlp"), 'model = "mlp"', "model = [1, 2]")))
    with pytest.raises(FedevoError, match="unknown gene 'hidden'"):  # built-in models keep their closed gene list
        load_problem(str(files("mlp", genes='hidden = { type = "int", low = 4, high = 64, default = 8 }')))


def test_set_masks_only_linear_weights_and_omega_counts_real_parameters(files, monkeypatch):
    from fedevo.fl.rounds import run_rounds
    from fedevo.fl.simulate import prepare

    prob = load_problem(str(files("python:sub/my_models.py:make_gated")))
    arch = prob.sim_config().arch
    model = build_model(arch, (1, 8, 8), 10)
    assert isinstance(model, GenericModel)
    linear = tuple(i for i, n in enumerate(model.names) if n in ("a.weight", "b.weight", "out.weight"))
    assert model.fc_weight_ids == linear
    conv = build_model(UserArch(arch.spec, sparse_conv=True), (1, 8, 8), 10)
    assert conv.fc_weight_ids == tuple(sorted(linear + (model.names.index("conv.weight"),)))
    real = sum(p.numel() for p in model.template.parameters())
    for alpha in (None, 1.0):
        su = prepare(prob.sim_config({} if alpha is None else {"alpha": alpha}), seed=0)
        out = run_rounds(su.cfg, su.model, su.data, su.part, gen=su.gen)
        su.noise.close()
        assert set(out.masks) == (set() if alpha is None else set(linear))
        masked_off = sum(int((m == 0).sum()) for m in out.masks.values())
        assert out.omega == real - masked_off
        assert out.comm == pytest.approx(out.omega * su.cfg.rounds * su.cfg.sampled_per_round /
                                         (su.cfg.rounds * su.cfg.data.clients))
        for i, m in out.masks.items():  # inactive weights stay 0
            assert float((out.params[i] * (1 - m)).abs().max()) == 0.0
    assert masked_off > 0


def test_sparse_conv_trains_with_its_conv_masks(files):
    """`sparse_conv = true` masks a user model's Conv2d weights too; their masks were drawn as (c_out, c_in·k·k)
    matrices, which the 4-D weights could not be multiplied by: every evaluation failed ('The size of tensor a (3)
    must match the size of tensor b (9)') once α left a conv layer below full density. Trained now: the conv
    weights masked, inactive weights 0 after SET's prune/regrow, Ω as planned."""
    from fedevo.fl.rounds import run_rounds
    from fedevo.fl.simulate import prepare
    from fedevo.models.sparse import planned_omega

    prob = load_problem(str(files("python:sub/my_models.py:make_cnn", train="sparse_conv = true\nalpha = 0.5\n"
                                  "xi = 0.3")))
    su = prepare(prob.sim_config(), seed=0)
    out = run_rounds(su.cfg, su.model, su.data, su.part, gen=su.gen)
    su.noise.close()
    conv = [i for i, n in enumerate(su.model.names) if n.endswith("weight") and len(su.model.shapes[i]) == 4]
    assert conv and set(conv) <= set(out.masks)
    for i, m in out.masks.items():
        assert m.shape == out.params[i].shape and float((out.params[i] * (1 - m)).abs().max()) == 0.0
    assert out.omega == planned_omega(su.model.shapes, su.model.fc_weight_ids, 0.5) < \
        sum(math.prod(s) for s in su.model.shapes)
    assert evaluate(prob, seed=0).status == "ok"


def test_lowered_cnn_and_generic_cnn_agree(files, monkeypatch):
    """A Conv2d/ReLU/MaxPool stack in the built-in CNN's layout is lowered onto StackedCNN; the generic path
    gives the same evaluation within fp32 tolerance (init = "fedevo" for both)."""
    prob = load_problem(str(files("python:sub/my_models.py:make_cnn", train='model_init = "fedevo"')))
    assert isinstance(build_model(prob.sim_config().arch, (1, 8, 8), 10), LoweredCNN)
    low = evaluate(prob, seed=1)
    monkeypatch.setenv("FEDEVO_LOWER", "0")
    assert isinstance(build_model(prob.sim_config().arch, (1, 8, 8), 10), GenericModel)
    gen = evaluate(prob, seed=1)
    assert abs(low.error - gen.error) <= 0.03 and (low.omega, low.comm) == (gen.omega, gen.comm)


@pytest.mark.parametrize("lower", ["auto", "0"])
@pytest.mark.parametrize("factory", ["make_mlp", "make_gated"])
def test_step_mechanism_with_a_user_model(files, monkeypatch, lower, factory):
    """Per-step DP-SGD (the engine's step hook) trains a user model on either path: ε as for any model of the same
    problem (it depends on the schedule, not the model), finite results; no noise gives the plain run."""
    monkeypatch.setenv("FEDEVO_LOWER", lower)
    prob = load_problem(str(files(f"python:sub/my_models.py:{factory}",
                                  train='[privacy]\nmechanism = "step"\nclip = 1.0\nsigma = 1.0')))
    res = evaluate(prob, seed=0)
    assert res.status == "ok" and math.isfinite(res.eps) and res.eps > 0
    quiet = evaluate(prob, {"sigma": 1e-30, "clip": 1e9}, seed=0)
    plain = evaluate(load_problem(str(files(f"python:sub/my_models.py:{factory}", name="q.toml"))), seed=0)
    assert abs(quiet.error - plain.error) <= 0.03


@pytest.mark.parametrize("privacy", [
    'mechanism = "update"\nsigma = 0.5\nclip = 1.0',
    'mechanism = "update"\nsigma = 0.5\nclip = 1.0\ntrust = "central"\nsampling = "poisson"\ndelta = 1e-6',
    'mechanism = "update"\nsigma = 0.5\nclip = 1.0\ntrust = "secagg"\naggregation = "secagg"\ndelta = 1e-6',
    'mechanism = "signds"',
    'mechanism = "adaptive"\nsigma = 0.5\nclip = 1.0',
])
def test_every_mechanism_and_trust_model_trains_a_generic_model(files, monkeypatch, privacy):
    prob = load_problem(str(files("python:sub/my_models.py:make_gated",
                                  train=f"alpha = 2.0\n[deployment]\npopulation = 100000\n[privacy]\n{privacy}")))
    res = evaluate(prob, seed=0)
    assert res.status == "ok", res.message
    assert math.isfinite(res.eps) and res.eps > 0 and 0 <= res.error <= 1 and res.comm > 0


def test_module_init_is_seeded(files):
    """init = "module" (the default): the factory's own initialisation, seeded from the evaluation's seed."""
    prob = load_problem(str(files("python:sub/my_models.py:make_gated")))
    model = build_model(prob.sim_config().arch, (1, 8, 8), 10)
    a, b, c = (model.init(torch.Generator().manual_seed(s)) for s in (1, 1, 2))
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not all(torch.equal(x, y) for x, y in zip(a, c))
    assert evaluate(prob, seed=4).error == evaluate(prob, seed=4).error


def test_device_path_trains_a_generic_model(files, monkeypatch):
    """The device path (fl/device.py, on the CPU here as in test_device.py) trains a generic user model: the same
    parameters as the CPU engine within fp32 rounding."""
    from tests.fl.test_device import _rounds

    monkeypatch.setenv("FEDEVO_LOWER", "0")
    prob = load_problem(str(files("python:sub/my_models.py:make_gated", train="alpha = 2.0\nxi = 0.2")))
    cfg = prob.sim_config()
    a, b = _rounds(cfg, None), _rounds(cfg, torch.device("cpu"))
    for x, y in zip(a.params, b.params):
        assert float((x - y).abs().max()) <= 1e-5 * float(y.abs().max())
    assert a.comm == pytest.approx(b.comm)


def test_cost_estimate_counts_the_module(files):
    from fedevo.fl.cost import macs_and_params

    prob = load_problem(str(files(genes='hidden = { type = "int", low = 4, high = 64, default = 8 }')))
    macs, params = macs_and_params(prob.sim_config({"hidden": 10}))
    assert macs == 64 * 10 + 10 * 10 + 10 * 10
    assert params == 64 * 10 + 10 + 10 * 10 + 10 + 10 * 10 + 10


def test_a_factory_is_named_by_its_function():
    """UserArch.factory_name: the one name the load-time probe (fedevo.problem) and the builder
    (models/user_module.py) give a factory in their messages, whatever its file's path holds."""
    assert UserArch("python:/home/me/nets.py:make_model").factory_name == "make_model"
    assert UserArch("python:C:/Users/me/a:b/nets.py:make_cnn").factory_name == "make_cnn"
    assert UserArch("my_pkg.models:make").factory_name == "make"


@pytest.mark.parametrize("model,expect", [
    ("python:sub/nope.py:make_mlp", r"model file '.*nope\.py' does not exist"),
    ("python:sub/my_models.py:make_nothing", r"model file '.*my_models\.py' has no function 'make_nothing'"),
    ("no_such_pkg_xyz.models:make", r"model module 'no_such_pkg_xyz.models' cannot be imported"),
    ("python:sub/my_models.py:raises", r"model factory 'raises' raised ValueError: no such layer size"),
    ("python:sub/my_models.py:not_a_module", r"model factory 'not_a_module' returned int, not a torch.nn.Module"),
    ("python:sub/my_models.py:wrong_input", r"model 'wrong_input' rejects input shape \(1, 8, 8\)"),
    ("python:sub/my_models.py:wrong_output", r"model 'wrong_output' returns \(2, 3\) .* expected logits of shape"),
    ("python:sub/my_models.py:lstm", r"model 'lstm' cannot be trained: the CPU step \(its clients' forward passes "
                                     r"under torch.func.vmap\) fails on a batch of 2 zero samples: RuntimeError: "
                                     r"Batching rule not implemented for aten::lstm"),
    ("python:sub/my_models.py:branches", r"model 'branches' cannot be trained: the CPU step .*: RuntimeError: vmap: "
                                         r".*data-dependent control flow"),
    ("python:sub/my_models.py:int_logits", r"model 'int_logits' returns logits of dtype torch.int64; expected "
                                           r"floating-point logits"),
    ("python:sub/my_models.py:nan_logits", r"model 'nan_logits' returns non-finite logits \(NaN or inf\) on a batch "
                                           r"of 2 zero samples of shape \(1, 8, 8\)$"),
    ("python:sub/my_models.py:frozen", r"model 'frozen' has 2 parameters with requires_grad=False \(1\.weight, "
                                       r"1\.bias\); fedevo trains and uploads every parameter: unfreeze them, or "
                                       r"register frozen weights as buffers$"),
    ("python:sub/my_models.py:hides_to", r"model 'hides_to': its attribute 'to' hides torch.nn.Module.to\(\), which "
                                         r"fedevo and torch call on the module; rename the attribute$"),
    ("python:sub/my_models.py:hides_train", r"model 'hides_train': its attribute 'fc.train' hides "
                                            r"torch.nn.Module.train\(\)"),
    ("python:sub/my_models.py", r"model 'python:sub/my_models.py': expected 'python:path/to/file.py:function'"),
])
def test_bad_models_are_one_line_and_nothing_is_written(files, tmp_path, capsys, model, expect):
    from tests.cli.test_bad_input import bad

    prob = files(model)
    out = tmp_path / "run"
    bad(capsys, ["search", "--problem", prob, "--out", out, "--pop", 4, "--gen", 1, "--workers", 0],
        r"problem 'user': " + expect, watch=out)
    assert not out.exists()
    bad(capsys, ["evaluate", "--problem", prob], expect)


def test_the_device_paths_step_is_tried_where_the_run_may_train_on_a_gpu(files):
    """A convolutional module trains on the CPU with a loop of per-client torch.func.grads, which data-dependent
    control flow does not trouble; the device path's vmap(grad) cannot run it: refused only where the run may train
    on a GPU (device = "cuda", or "auto" where torch sees one)."""
    from fedevo.hardware import may_use_gpu

    prob = load_problem(str(files("python:sub/my_models.py:conv_branches")))
    assert evaluate(prob, seed=0).status == "ok"
    with pytest.raises(FedevoError, match=r"^problem 'user': model 'conv_branches' cannot be trained: the GPU step "
                                          r"\(torch.func.vmap\(grad\) over its clients\) fails .*data-dependent"):
        load_problem(str(_rewrite(files("python:sub/my_models.py:conv_branches"), 'device = "cpu"',
                                  'device = "cuda"')))
    assert not may_use_gpu("cpu") and may_use_gpu("cuda")
    with pytest.raises(FedevoError, match=r"^problem 'user': gene 'device' at its choice 'cuda' gives an invalid "
                                          r"configuration \(model 'conv_branches' cannot be trained: the GPU step"):
        load_problem(str(_rewrite(files("python:sub/my_models.py:conv_branches", genes='device = { type = "choice", '
                                        'choices = ["cpu", "cuda"], default = "cpu" }'), 'device = "cpu"\n', "")))


@pytest.mark.parametrize("env, gpu, expect", [("cpu", True, False), ("cuda", False, True), ("", True, True),
                                              ("", False, False)])
def test_may_use_gpu_reads_auto_as_the_run_would(monkeypatch, env, gpu, expect):
    from fedevo.hardware import may_use_gpu

    monkeypatch.setenv("FEDEVO_DEVICE", env)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    assert may_use_gpu("auto") is expect


def test_float64_logits_and_lowered_models_pass_the_training_step(files):
    """The load check's training step refuses only what training cannot run: float64 logits train, as do the
    lowered stacks (through the generic step here; the built-in kernels in training)."""
    for factory in ("double_logits", "make_plain", "make_cnn"):
        prob = load_problem(str(files(f"python:sub/my_models.py:{factory}")))
        assert evaluate(prob, seed=0).status == "ok"


def test_a_model_too_large_for_the_training_step_is_checked_on_the_meta_device(files, monkeypatch):
    """Above PROBE_STEP_PARAMETERS the module is not built at load (the meta device's shape and dtype only): an
    LSTM passes there, int64 logits do not."""
    from fedevo.models import user_module

    monkeypatch.setattr(user_module, "PROBE_STEP_PARAMETERS", 100)
    built = []
    real = user_module.make_module
    monkeypatch.setattr(user_module, "make_module", lambda *a, **k: built.append(a) or real(*a, **k))
    load_problem(str(files("python:sub/my_models.py:lstm")))
    with pytest.raises(FedevoError, match=r"model 'int_logits' returns logits of dtype torch.int64"):
        load_problem(str(files("python:sub/my_models.py:int_logits")))
    assert built == []


def test_a_model_with_frozen_parameters_is_refused_where_it_is_built_too(files):
    """Frozen parameters were trained and uploaded as any other (the same results as unfrozen): refused at load
    (above) and where the model is built without a problem file's load check (the Python API's build_model)."""
    spec = load_problem(str(files())).model_ref.replace(":make_mlp", ":frozen")
    with pytest.raises(FedevoError, match=r"^model 'frozen' has 2 parameters with requires_grad=False"):
        build_model(UserArch(spec), (1, 8, 8), 10)


def test_a_model_with_a_complex_parameter_is_refused(files):
    """A complex parameter was made float32 like every other (torch's one UserWarning, 'discards the imaginary
    part') and trained so, silently another model: refused when the problem loads, one line naming it."""
    with pytest.raises(FedevoError, match=r"^problem 'user': model 'complex_gain' has a complex parameter 'gain' "
                                          r"\(complex64\); fedevo trains real float32 parameters"):
        load_problem(str(files("python:sub/my_models.py:complex_gain")))


def test_a_model_returning_several_outputs_is_told_to_return_the_logits_alone(files):
    """A forward returning (logits, features) was refused as 'returns tuple ... expected logits': the line now says
    what to do about it."""
    with pytest.raises(FedevoError, match=r"^problem 'user': model 'pair' returns tuple for a batch of 2 samples of "
                                          r"shape \(1, 8, 8\); expected logits of shape \(2, 10\); a forward that "
                                          r"returns several outputs: wrap the module so that its forward returns the "
                                          r"logits alone"):
        load_problem(str(files("python:sub/my_models.py:pair")))


def test_a_gene_bound_the_factory_rejects_is_caught_at_load(files):
    with pytest.raises(FedevoError, match=r"^problem 'user': gene 'hidden' at its low bound -1 gives an invalid "
                                          r"configuration \(model factory 'make_mlp' raised RuntimeError"):
        load_problem(str(files(genes='hidden = { type = "int", low = -1, high = 64, default = 8 }')))


def test_a_factory_slow_at_a_gene_bound_is_named_while_the_problem_loads(files, tmp_path, monkeypatch, capfd):
    """The load-time check calls the factory at each gene's bounds: one that hangs there was a silent hang before
    anything was printed; past SLOW_NOTE_S one line on stderr names the factory, the gene and the bound."""
    import fedevo.usercode

    (tmp_path / "sub" / "slow.py").write_text(
        "import math, time\nfrom torch import nn\nSLEPT = []\n\n"
        "def make(input_shape, num_classes, hidden=8):\n"
        "    if hidden > 40 and not SLEPT:\n        SLEPT.append(time.sleep(1.5))\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.ReLU(),\n"
        "                         nn.Linear(hidden, num_classes))\n")
    monkeypatch.setattr(fedevo.usercode, "SLOW_NOTE_S", 0.3, raising=False)
    gene = 'hidden = { type = "int", low = 4, high = 64, default = 8 }'
    load_problem(str(files("python:sub/slow.py:make", genes=gene)))
    err = capfd.readouterr().err.splitlines()
    assert err.count("fedevo: checking problem 'user' at each gene's bounds: model factory 'make' with gene 'hidden' "
                     "at its high bound 64 has not returned after 0.3 s; still waiting for it (Ctrl-C stops)") == 1, err
    assert all(line.startswith("fedevo: checking problem 'user'") for line in err), err  # (a loaded machine: more)


def test_a_gene_the_module_ignores_in_eval_mode_is_named_at_load(files, tmp_path, capfd):
    """A Dropout rate as a gene: fedevo trains the module in eval mode, where Dropout is off, so the search's
    dimension changed nothing, silently. The load-time check now compares what the module computes at the gene's
    bounds and says so in one stderr line; a gene that changes the model (hidden) gets no line."""
    (tmp_path / "sub" / "drop.py").write_text(
        "import math\nfrom torch import nn\n\n"
        "def make(input_shape, num_classes, hidden=8, drop=0.1):\n"
        "    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden), nn.ReLU(),\n"
        "                         nn.Dropout(drop), nn.Linear(hidden, num_classes))\n")
    genes = ('hidden = { type = "int", low = 4, high = 16, default = 8 }\n'
             'drop = { type = "real", low = 0.0, high = 0.5, default = 0.1 }')
    load_problem(str(files("python:sub/drop.py:make", genes=genes)))
    err = capfd.readouterr().err
    assert err.splitlines() == ["fedevo: warning: problem 'user': gene 'drop' seems to change nothing the module "
                                "computes at initialisation (outputs and gradients on probe inputs: the same at its "
                                "low bound 0.0, high bound 0.5): fedevo trains the module in eval mode, where Dropout "
                                "is off and BatchNorm uses its running statistics (docs/models.md); a warning only: if "
                                "the gene matters, e.g. once training has moved the parameters, ignore it"], err


def test_a_factory_slow_in_the_no_effect_check_is_named_too(files, tmp_path, monkeypatch, capfd):
    """The no-effect check builds the module again at each bound (and runs it forward and backward): a factory
    that hangs there is named as at the bounds' probe."""
    import fedevo.usercode
    from fedevo.models import user_module

    real = user_module.computed

    def slow(*a):
        time.sleep(1.0)
        return real(*a)
    monkeypatch.setattr(user_module, "computed", slow)
    monkeypatch.setattr(fedevo.usercode, "SLOW_NOTE_S", 0.3, raising=False)
    (tmp_path / "sub" / "drop.py").write_text(
        "import math\nfrom torch import nn\n\n"
        "def make(input_shape, num_classes, drop=0.1):\n"
        "    return nn.Sequential(nn.Flatten(), nn.Dropout(drop), nn.Linear(math.prod(input_shape), num_classes))\n")
    load_problem(str(files("python:sub/drop.py:make", genes='drop = { type = "real", low = 0.0, high = 0.5, '
                                                           'default = 0.1 }')))
    err = capfd.readouterr().err.splitlines()
    assert ("fedevo: checking whether gene 'drop' of problem 'user' changes what model factory 'make' computes (its "
            "low bound 0.0) has not returned after 0.3 s; still waiting for it (Ctrl-C stops)") in err, err


GENES_THAT_MATTER = """
import math, torch
from torch import nn

def zero_head(input_shape, num_classes, act="relu", hidden=16):
    head = nn.Linear(hidden, num_classes)
    nn.init.zeros_(head.weight); nn.init.zeros_(head.bias)  # logits 0 at initialisation, whatever act is
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), hidden),
                         nn.ReLU() if act == "relu" else nn.Tanh(), head)

class Cap(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c

    def forward(self, x):
        return x.clamp(-self.c, self.c)

def capped(input_shape, num_classes, cap=6.0):  # N(0, 1) inputs never reach a cap of 5 or more
    return nn.Sequential(nn.Flatten(), Cap(cap), nn.Linear(math.prod(input_shape), 16), nn.ReLU(),
                         nn.Linear(16, num_classes))

class Scaled(torch.autograd.Function):
    generate_vmap_rule = True  # (fedevo's CPU step runs it under torch.func.vmap)

    @staticmethod
    def forward(x, k):
        return x.clone()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.k = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k, None

class GradScale(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return Scaled.apply(x, self.k)

def backward_only(input_shape, num_classes, k=1.0):  # the gene acts in the backward pass alone
    return nn.Sequential(nn.Flatten(), nn.Linear(math.prod(input_shape), 16), GradScale(k), nn.ReLU(),
                         nn.Linear(16, num_classes))
"""


@pytest.mark.parametrize("factory, gene", [
    ("zero_head", 'act = { type = "choice", choices = ["relu", "tanh"], default = "relu" }'),
    ("capped", 'cap = { type = "real", low = 5.0, high = 20.0, default = 6.0 }'),
    ("backward_only", 'k = { type = "real", low = 0.5, high = 2.0, default = 1.0 }'),
])
def test_a_gene_that_matters_is_not_warned_of(files, tmp_path, capfd, factory, gene):
    """The check compared logits on one N(0, 1) batch only: a zero-initialised head (logits 0 for every gene), a
    clamp the batch never reaches, a gene acting in the backward pass were each said to change nothing. It now
    compares the gradients of a loss too, and on a batch ×100 as well."""
    (tmp_path / "sub" / "matter.py").write_text(GENES_THAT_MATTER)
    load_problem(str(files(f"python:sub/matter.py:{factory}", genes=gene)))
    assert "warning" not in capfd.readouterr().err


def test_two_generation_search_with_a_user_model(files, tmp_path):
    from fedevo.searching import Runtime, SearchSettings, search

    prob = files(genes='hidden = { type = "int", low = 4, high = 32, default = 8 }\n'
                       'alpha = { type = "real", low = 1, high = 8, default = 2 }')
    out = tmp_path / "run"
    search(SearchSettings(problem=str(prob), pop=4, gen=2, seed=1), out, Runtime(workers=0))
    import csv

    rows = list(csv.DictReader(open(out / "evaluations.csv")))
    assert len(rows) >= 8 and all(r["status"] == "ok" for r in rows)
    assert len({r["hidden"] for r in rows}) > 1


@pytest.mark.parametrize("factory,kind", [("make_mlp", LoweredMLP), ("make_cnn", LoweredCNN)])
@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 28, 28)])
def test_example_factories_are_lowered(factory, kind, shape):
    """examples/models.py (the README's example) trains on the built-in kernels."""
    spec = f"python:{Path(__file__).resolve().parents[2] / 'examples' / 'models.py'}:{factory}"
    assert type(build_model(UserArch(spec, (("hidden", 24),)), shape, 10)) is kind


def test_user_model_on_user_data(files, tmp_path):
    """A user model on the user's own tabular data ([data] source, natural clients): the factory gets the data's
    input shape (D,) and class count, and trains."""
    g = np.random.default_rng(0)
    n, d = 300, 12
    np.savez(tmp_path / "tab.npz", x=g.normal(size=(n, d)).astype(np.float32), y=g.integers(0, 3, n),
             client_id=g.integers(0, 6, n))
    p = files(extra="", genes='hidden = { type = "int", low = 4, high = 32, default = 8 }')
    text = p.read_text().replace('dataset = "synthetic"\n', "").replace(
        "[data]\nclients = 8\n", '[data]\nsource = "npz"\npath = "tab.npz"\npartition = "natural"\n')
    p.write_text(text)
    prob = load_problem(str(p))
    model = build_model(prob.sim_config().arch, (d,), 3)
    assert isinstance(model, LoweredMLP) and model.dims == [d, 8, 8, 3]
    res = evaluate(prob, {"hidden": 6}, seed=0)
    assert res.status == "ok" and res.omega == d * 6 + 6 + 6 * 6 + 6 + 6 * 3 + 3


def test_lowered_cnns_train_as_one_batched_generation(files):
    """A generation of a user's CNN factory lowered onto the built-in CNN (other channel counts from a gene) trains
    in one CNN bucket (fl/stacked_cnn.py), each result as its evaluation alone (a population of one)."""
    from fedevo.evaluation import evaluate_population

    prob = load_problem(str(files("python:sub/my_models.py:make_cnn", train='model_init = "fedevo"',
                                  genes='channels = { type = "int", low = 2, high = 8, default = 4 }')))
    gen, seeds = [{"channels": 4}, {"channels": 3}, {"channels": 4, "lr": 0.05}], [1, 2, 3]
    together = evaluate_population(prob, gen, seeds, device="cpu")
    for p, s, got in zip(gen, seeds, together):
        assert got.engine.get("population") == 3, got.engine
        (alone,) = evaluate_population(prob, [p], [s], device="cpu")
        _same(got, alone)


def test_models_built_in_threads_at_once_are_all_lowered(files):
    """torch.fx's tracing patches nn.Module.__call__ for every thread: builds in threads at once (a batched
    generation prepares its runs so) must not trace each other's module calls (before the build lock, each of 6 runs of
    this test had builds fail with 'module is not installed as a submodule')."""
    import threading

    files()  # writes sub/my_models.py
    spec = str(files().parent / "sub" / "my_models.py")
    got: list = []
    barrier = threading.Barrier(8)

    def build(i):
        barrier.wait()
        for k in range(20):
            try:
                got.append(type(build_model(UserArch(f"python:{spec}:make_cnn", (("channels", 2 + i + 8 * k),)),
                                            (1, 8, 8), 10)))
            except Exception as e:  # noqa: BLE001 - the failure this test looks for
                got.append(repr(e))
    for _ in range(5):
        threads = [threading.Thread(target=build, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert got == [LoweredCNN] * 800
