"""fedevo/schema.py: the types of problem-file and --params settings come from the config dataclasses."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal, Optional, Union

import pytest

from fedevo import _toml, schema
from fedevo.errors import FedevoError
from fedevo.problem import Problem, list_problems, load_problem, problems_dir


@pytest.mark.parametrize("hint,value,expect", [
    (int, 2, 2), (int, 2.0, 2), (float, 2, 2), (float, 0.5, 0.5), (bool, False, False), (str, "x", "x"),
    (Optional[float], None, None), (Literal["a", "b"], "b", "b"), (Union[int, str], "auto", "auto"),
    (Union[int, str], 4, 4), (tuple[str, ...], ["a", "b"], ("a", "b")),
])
def test_values_of_their_type_pass(hint, value, expect):
    got = schema.check_value("k", hint, value)
    assert got == expect and type(got) is type(expect)


@pytest.mark.parametrize("hint,value,message", [
    (int, 1.5, "k: expected an integer, got 1.5"), (int, "2", 'k: expected an integer, got "2"'),
    (int, True, "k: expected an integer, got true"), (int, math.inf, "k: expected an integer, got inf"),
    (float, math.nan, "k: expected a finite number, got nan"), (float, -math.inf, "got -inf"),
    (float, "0.5", 'got "0.5"'), (float, False, "got false"), (bool, "false", 'k: expected true or false, got "false"'),
    (bool, 0, "got 0"), (str, 5, "k: expected a string, got 5"),
    (Literal["iid", "shards"], "shard", 'expected one of "iid", "shards", got "shard"; did you mean "shards"?'),
    (Optional[int], 1.5, "expected an integer, got 1.5"), (Union[int, str], 2.5, "a string or an integer"),
    (tuple[str, ...], [1], "expected a list of strings"), (dict, 5, "expected a table, got 5"),
])
def test_values_of_another_type_are_refused(hint, value, message):
    with pytest.raises(FedevoError) as e:
        schema.check_value("k", hint, value)
    assert message in str(e.value)


def test_keys_are_the_dataclass_fields():
    from dataclasses import fields

    from fedevo.config import DataConfig, DeploymentConfig, MLPArch, SimConfig

    known = schema.settings("mlp")
    for cls, skip in ((SimConfig, schema.NESTED), (DataConfig, schema.DATA_NOT_SETTINGS), (DeploymentConfig, ()),
                      (MLPArch, ())):
        for f in fields(cls):
            if f.name not in skip:
                assert known[f.name].owner is cls and known[f.name].hint is not None


def test_a_new_field_is_validated_without_a_second_list(tmp_path):
    """A mechanism registered at runtime: its parameter dataclass's fields are typed [privacy] and --params keys."""
    from fedevo.privacy import registry

    @dataclass(frozen=True)
    class LevelsParams:
        levels: int = 2
        spread: float = 1.0

    registry.register(registry.Spec("levels_toy", LevelsParams, runtime={"local": "mechanism:Mechanism"},
                                    private=False))
    try:
        doc = _toml.loads((problems_dir() / "digits_mlp.toml").read_text())
        doc["privacy"]["levels"] = 1.5
        with pytest.raises(FedevoError, match=r"^problem 'digits_mlp': \[privacy\] levels: expected an integer, "
                                              r"got 1.5$"):
            Problem.from_dict(doc)
        doc["privacy"]["levels"] = 3
        prob = Problem.from_dict(doc)
        with pytest.raises(FedevoError, match=r"^parameter spread: expected a finite number, got nan$"):
            prob.resolve({"spread": math.nan})
    finally:
        registry.unregister("levels_toy")


def test_valid_problems_keep_their_values():
    """The bundled problems load with every fixed value as the file gives it (nothing coerced or dropped)."""
    for name in list_problems():
        doc = _toml.loads((problems_dir() / f"{name}.toml").read_text())
        prob = load_problem(name)
        for section in ("data", "train", "privacy", "deployment"):
            for k, v in doc.get(section, {}).items():
                assert prob.fixed[k] == v and type(prob.fixed[k]) is type(v), (name, k)


def test_integral_float_counts_are_integers(tmp_path):
    doc = _toml.loads((problems_dir() / "digits_mlp.toml").read_text())
    doc["train"]["epochs"] = 2.0
    cfg = Problem.from_dict(doc).sim_config({"clients": 10.0})
    assert type(cfg.epochs) is int and cfg.epochs == 2 and type(cfg.data.clients) is int


def test_accountant_survives_tiny_noise():
    """σ so small that dp-accounting's PLD grid overflows (or 1/σ² does): ε is the RDP bound, or ∞, not a crash."""
    from fedevo.privacy.accounting import eps_gaussian

    assert eps_gaussian(noise_multiplier=1e-300, sample_rate=0.01, steps=10, delta=1e-6) == math.inf
    few = eps_gaussian(noise_multiplier=0.01, sample_rate=0.01, steps=100, delta=1e-6)
    many = eps_gaussian(noise_multiplier=0.01, sample_rate=0.01, steps=10000, delta=1e-6)  # overflowed the PLD
    assert math.isfinite(many) and many > few > 1000


def test_docs_problem_table_says_what_the_schema_checks():
    """docs/problems.md's table of settings holds every key of the schema with the type the schema checks."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "problems.md").read_text()
    rows = dict((k, (sec, typ)) for k, sec, typ in re.findall(r"^\| `(\w+)` \| `\[(\w+)\]` \| ([^|]+?) \|", text, re.M))
    want = {}
    for model in ("mlp", "cnn", None):
        for k, s in schema.settings(model).items():
            want.setdefault(k, (s.section, schema.describe(s.hint)))
    assert rows == want


@pytest.mark.parametrize("line, ok", [
    ('fidelity = "0.5"', False), ("fidelity = true", False), ('fidelity = ["1/3", 1]', False),
    ("fidelity = 0.5", True), ("fidelity = [0.25, 1]", True), ("fidelity = 1", True),
    ('eval_timeout = "5"', False), ("eval_timeout = 0", False), ("eval_timeout = 2.5", True),
])
def test_fidelity_and_eval_timeout_are_typed_like_every_other_key(tmp_path, line, ok):
    from fedevo.problem import load_problem, problems_dir

    p = tmp_path / "p.toml"
    p.write_text(line + "\n" + (problems_dir() / "digits_mlp.toml").read_text())
    if ok:
        load_problem(str(p))
    else:
        with pytest.raises(FedevoError, match=line.split(" ")[0]):
            load_problem(str(p))


@pytest.mark.parametrize("make, message", [
    (lambda c: c.MLPArch(layers=1.5), "layers must be an int, got 1.5"),
    (lambda c: c.MLPArch(units=True), "units must be an int, got True"),
    (lambda c: c.MLPArch(layers="2"), "layers must be an int, got '2'"),
    (lambda c: c.CNNArch(kernel=3.0), "kernel must be an int, got 3.0"),
    (lambda c: c.SimConfig(rounds=2.5), "rounds must be an int, got 2.5"),
    (lambda c: c.SimConfig(epochs="1"), "epochs must be an int, got '1'"),
    (lambda c: c.SimConfig(lr="0.1"), "lr must be a number, got '0.1'"),
    (lambda c: c.SimConfig(tf32=1), "tf32 must be a bool, got 1"),
    (lambda c: c.DataConfig(clients=4.0), "clients must be an int, got 4.0"),
])
def test_a_config_built_from_python_is_held_to_its_types(make, message):
    """Problem files' values are typed by schema.py; the configs built from Python were not (the 2026-11-27
    audit: MLPArch(layers=1.5) was accepted, SimConfig(epochs='1') a TypeError from a comparison)."""
    import fedevo.config as c

    with pytest.raises(FedevoError, match=re.escape(message)):
        make(c)


def test_numpy_numbers_are_numbers_to_a_config():
    import numpy as np

    import fedevo.config as c

    assert c.MLPArch(layers=np.int64(2)).layers == 2 and c.SimConfig(lr=np.float32(0.1)).lr == np.float32(0.1)
