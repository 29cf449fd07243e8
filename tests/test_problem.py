import pytest

from fedevo.errors import FedevoError, command_line
from fedevo.problem import list_problems, load_problem, parse_params


def test_bundled_problems_load():
    names = list_problems()
    for required in ("digits_mlp", "fashion_mlp", "fashion_cnn", "mnist_mlp", "mnist_cnn", "cifar10_cnn"):
        assert required in names
    for n in names:
        p = load_problem(n)
        assert p.genes and p.sim_config() is not None


def test_gene_defaults_and_overrides(tiny_problem):
    cfg = tiny_problem.sim_config({"lr": 0.3, "units": 20})
    assert cfg.lr == 0.3 and cfg.arch.units == 20 and cfg.arch.layers == 1


@pytest.mark.parametrize("params, msg", [
    ({"lr": 5.0}, "out of bounds"),
    ({"units": 12.5}, "expected an integer"),
    ({"units": "many"}, "expected a number"),
    ({"bogus": 1}, "unknown parameter"),
    ({"mechanism": "magic"}, "unknown mechanism"),
])
def test_bad_params(tiny_problem, params, msg):
    with pytest.raises(FedevoError, match=msg):
        tiny_problem.sim_config(params)


def test_unknown_problem():
    with pytest.raises(FedevoError, match="unknown problem 'nope'.*digits_mlp"):
        load_problem("nope")


@pytest.mark.parametrize("text, msg", [
    ("dataset = \"digits\"\nmodel = ", "malformed"),
    ("dataset = \"digits\"\nmodel = \"mlp\"\n[genes]\nwings = { type = \"int\", low = 1, high = 2 }", "unknown gene 'wings'"),
    ("dataset = \"digits\"\nmodel = \"rnn\"\n[genes]\n", "unknown model"),
    ("model = \"mlp\"\n[genes]\n", "missing required key 'dataset'"),
    ("dataset = \"digits\"\nmodel = \"mlp\"\n[genes]\nlr = { type = \"real\", low = 1, high = 0 }", "low' <= 'high"),
    ("dataset = \"digits\"\nmodel = \"mlp\"\n[train]\nspeed = 3\n[genes]\n", "unknown key"),
])
def test_malformed_problem_files(tmp_path, text, msg):
    f = tmp_path / "bad.toml"
    f.write_text(text)
    with pytest.raises(FedevoError, match=msg):
        load_problem(str(f))


@pytest.mark.parametrize("table, expect", [
    ("[data]\nwings = 2", r"\[data\] wings: unknown key; known: partition, "),
    ("[data]\nclients = \"20\"", r'\[data\] clients: expected an integer, got "20"$'),
    ("[data]\nsource = \"npz\"\npath = \"d.npz\"\nholdout = \"x\"",
     r'\[data\] holdout: expected a finite number, got "x"$'),
    ("[data]\nsource = \"npz\"\npath = \"d.npz\"\nwings = 2", r"\[data\] wings: unknown key; .*known: .*normalise"),
    ("[train]\nepochs = 1.5", r"\[train\] epochs: expected an integer, got 1.5$"),
    ("[deployment]\nwings = 2", r"\[deployment\] wings: unknown key"),
    ("[privacy]\nsigma = 1.0\n[genes.sigma]\ntype = \"real\"\nlow = 0.1\nhigh = 2",
     r"\[privacy\] sigma: is also a gene \(\[genes\] sigma\); give it in one place$"),
])
def test_a_settings_tables_errors_name_the_problem(tmp_path, table, expect):
    """[data] (a bundled dataset's or a [data] source's), [train], [privacy] and [deployment] errors start with
    the problem's name, as its [data] source's own errors (`needs a path`) and [model_args]' do."""
    f = tmp_path / "mine.toml"
    f.write_text('model = "mlp"\n' + ("" if "source" in table else 'dataset = "digits"\n') + table
                 + ("" if "[genes" in table else "\n[genes]\n"))
    with pytest.raises(FedevoError, match=r"^problem 'mine': " + expect):
        load_problem(str(f))


def test_parse_params(tmp_path):
    assert parse_params('{"lr": 0.1}') == {"lr": 0.1}
    (tmp_path / "p.json").write_text('{"lr": 0.2}')
    assert parse_params(str(tmp_path / "p.json")) == {"lr": 0.2}
    # a path that is no file was reported as bad JSON ("Expecting value"; the 2026-11-27 audit)
    with pytest.raises(FedevoError, match=r"--params '.*nope.json' does not exist \(give a JSON object"):
        parse_params(str(tmp_path / "nope.json"))
    (tmp_path / "bad.json").write_text("{lr: 1}")
    with pytest.raises(FedevoError, match=r"--standard is not valid JSON \(file '.*bad.json'\)"):
        parse_params(str(tmp_path / "bad.json"), "--standard")  # retrain's option named, not --params
    with pytest.raises(FedevoError, match="not valid JSON"):
        parse_params("{lr: 0.1}")
    with pytest.raises(FedevoError, match="JSON object"):
        parse_params("[1, 2]")


def test_presets_expand_to_privacy_settings():
    p = load_problem("digits_mlp_local")
    c = p.sim_config({"preset": "dcdp-fedavg", "beta": 0.05, "tau": 0.01})
    assert (c.privacy.mechanism, c.privacy.recall, c.privacy.similarity, c.privacy.beta) == ("update", True, "cosine", 0.05)
    c = p.sim_config({"preset": "dp-fedavg", "beta": 0.05})
    assert c.privacy.beta == 0.0 and not c.privacy.recall  # DP-FedAvg: fixed clip, whatever the gene says
    assert p.sim_config({"preset": "fedavg"}).privacy.mechanism == "none"
    with pytest.raises(FedevoError, match="unknown preset"):
        p.sim_config({"preset": "magic"})


def test_a_privacy_gene_the_mechanism_does_not_take_is_refused(tmp_path):
    """The 2026-11-27 audit: digits_mlp without its [privacy] table searched sigma and clip under mechanism "none":
    every ε infinite, every value of those genes the same objectives, and nothing said."""
    import re

    from fedevo.problem import problems_dir

    text = (problems_dir() / "digits_mlp.toml").read_text()
    no_privacy = re.sub(r"\n\[privacy\]\n(?:[^\[]*\n)", "\n", text, count=1)
    assert "[privacy]" not in no_privacy
    path = tmp_path / "p.toml"
    path.write_text(no_privacy)
    with pytest.raises(FedevoError, match=r"gene\(s\) sigma, clip have no effect under mechanism 'none' \(its "
                                          r"settings: none\); set \[privacy\] mechanism"):
        load_problem(str(path))
    signds = no_privacy.replace("[genes]", '[privacy]\nmechanism = "signds"\ntrust = "local"\n[genes]')
    path.write_text(signds)
    with pytest.raises(FedevoError, match=r"have no effect under mechanism 'signds' \(its settings: signds_eps, "):
        load_problem(str(path))
    load_problem("digits_mlp")  # update takes sigma and clip
    load_problem("fashion_mlp_mech")  # the mechanism is a gene: its genes are each some mechanism's


def test_messages_name_params_and_problem_as_the_caller_does(tmp_path, monkeypatch):
    """From Python the argument is the keyword (`params=`, `problem=digits_mlp`), from the CLI the option."""
    f = tmp_path / "g.toml"
    f.write_text('dataset = "digits"\nmodel = "mlp"\n[genes]\nunits = { type = "int", low = 1, high = 4 }\n')
    with pytest.raises(FedevoError, match=r"units have no default; .*a value in params=\)$"):
        load_problem(str(f))
    with command_line(), pytest.raises(FedevoError, match=r"units have no default; .*a value in --params\)$"):
        load_problem(str(f))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FedevoError, match=r"\(the bundled problem is problem=digits_mlp, without \.toml\)$"):
        load_problem("digits_mlp.toml")
    with command_line(), pytest.raises(FedevoError, match=r"\(the bundled problem is --problem digits_mlp, without"):
        load_problem("digits_mlp.toml")


def test_numpy_values_stand_for_the_python_ones(tiny_problem):
    """A notebook's genes from a DataFrame row (`df.iloc[0]`: np.int64, np.float32) or np.arange were refused as
    "expected a number, got np.int64(2)"; they are the numbers they hold (an out-of-bounds one still refused), and
    a problem dict holding them is written as its TOML text."""
    import numpy as np

    from fedevo.problem import Problem

    cfg = tiny_problem.sim_config({"lr": np.float32(0.25), "units": np.int64(20)})
    assert cfg.arch.units == 20 and type(cfg.arch.units) is int and cfg.lr == pytest.approx(0.25)
    assert tiny_problem.resolve({"units": np.int64(20)})["units"] == 20
    with pytest.raises(FedevoError, match="expected an integer"):
        tiny_problem.sim_config({"units": np.float64(12.5)})
    with pytest.raises(FedevoError, match="out of bounds"):
        tiny_problem.sim_config({"lr": np.float32(5.0)})
    doc = {"name": "np", "dataset": "digits", "model": "mlp", "data": {"clients": np.int64(4)},
           "genes": {"units": {"type": "int", "low": np.int64(8), "high": 64, "default": np.int64(16)},
                     "layers": {"type": "choice", "choices": np.array([1, 2]), "default": 1}}}
    p = Problem.from_dict(doc)
    assert p.gene("units").low == 8 and p.gene("layers").choices == (1, 2) and p.fixed["clients"] == 4


def test_numpy_values_in_a_problem_dict_whose_data_are_arrays():
    """The dict holding an ArraySource (a notebook's own arrays) was parsed as given, its np.int64 refused
    ("[data] clients: expected an integer, got np.int64(5)") where the same dict on a bundled dataset was accepted."""
    import numpy as np

    import fedevo
    from fedevo.problem import Problem

    x = np.random.default_rng(0).normal(size=(200, 1, 8, 8)).astype("float32")
    y = np.arange(200) % 4
    doc = {"name": "t", "model": "mlp", "train": {"rounds": np.int64(2)},
           "genes": {"layers": {"type": "int", "low": np.int64(1), "high": np.int64(2), "default": np.int64(1)}},
           "data": {"source": fedevo.ArraySource(x=x, y=y), "clients": np.int64(5)}}
    p = Problem.from_dict(doc)
    assert p.fixed["clients"] == 5 and type(p.fixed["clients"]) is int and p.gene("layers").high == 2
