"""Issue 27's acceptance test: malformed problem files and --params, generated from the bundled problems (wrong
types, NaN/±inf, extremes, missing and unknown keys, string booleans, impossible combinations). Every one ends
with one `fedevo: error:` line naming the key, exit code 2, no traceback, nothing on stdout, nothing written.

The bad values are chosen here by the kind of each setting (an integer, a number, true/false, a name), not by
asking fedevo's schema which values it refuses: a schema that let a bad value through fails this test."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
import typing
from pathlib import Path

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedevo import _toml, schema
from fedevo.cli import main
from fedevo.problem import list_problems, problems_dir

NAN, INF = float("nan"), float("inf")
PROBLEMS = list_problems()
DOCS = {n: _toml.loads((problems_dir() / f"{n}.toml").read_text()) for n in PROBLEMS}
SECTIONS = ("data", "train", "privacy", "deployment")
N_EXAMPLES = 320  # the issue asks for at least 300


def kind(hint) -> str:
    """'int', 'float', 'bool', 'str', 'literal' or 'intstr' (secagg_neighbours) of a setting's type hint."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Literal:
        return "literal"
    if args and typing.get_origin(hint) is typing.Union:
        return "intstr" if set(args) == {int, str} else kind(args[0])
    return {int: "int", float: "float", bool: "bool", str: "str"}[hint]


def bad_values(hint) -> list:
    """Values of the wrong type (or not finite) for a setting of this type."""
    k = kind(hint)
    if k == "int":
        return [1.5, "2", True, False, "", [1], {"a": 1}, NAN, INF, -INF, 2.000001]
    if k == "float":
        return ["0.5", True, False, NAN, INF, -INF, [0.1], {"a": 1}, "nan", ""]
    if k == "bool":
        return ["false", "true", "False", 0, 1, 1.0, "", [True]]
    if k == "str":
        return [1, 2.5, True, ["x"], {"a": 1}]
    if k == "literal":
        c = typing.get_args(hint)[0]
        return [c + "x", c.upper() + "_", 1, True, [c], ""]
    return [1.5, True, [2], NAN, {"a": 1}]  # intstr


# valid types, impossible values or combinations: each must be refused at load, naming one of its keys
RANGES = [
    {"rounds": 0}, {"rounds": -3}, {"epochs": 0}, {"batch_size": 0}, {"lr": 0.0}, {"lr": -0.1},
    {"participation": 0.0}, {"participation": 1.5}, {"xi": 1.0}, {"xi": -0.1}, {"upload_loss": 1.0},
    {"chunk_clients": 0}, {"alpha": -1.0}, {"clients": 0}, {"shards_per_client": 0}, {"shard_size": 0},
    {"dirichlet_alpha": 1e-300}, {"dirichlet_alpha": 0.0}, {"dirichlet_alpha": -1.0}, {"test_fraction": 0.0},
    {"test_fraction": 1.5}, {"partition": "iid", "clients": 10**6},
    {"partition": "shards", "clients": 10**5, "shards_per_client": 2},
    {"partition": "shards", "shard_size": 10**6}, {"delta": 0.0}, {"delta": 1.0}, {"delta": 2.0},
    {"target_eps": 1e9}, {"target_eps": 0.0}, {"target_eps": -1.0}, {"eps_budget": -1.0},
    {"max_participations": 0}, {"max_participations": 10**5}, {"secagg_bits": 16}, {"secagg_threshold": 0.0},
    {"secagg_threshold": 1.5}, {"secagg_range": -1.0}, {"secagg_neighbours": 3}, {"secagg_neighbours": "many"},
    {"clip": -1.0}, {"tau": 2.0}, {"beta": -1.0}, {"signds_eps": -1.0}, {"signds_k": 0.0}, {"signds_h": 0.0},
    {"signds_lr": 0.0}, {"adaptive_levels": 1}, {"adaptive_gamma": -1.0}, {"adaptive_kappa": 1.0},
    {"adaptive_keep": 0.0}, {"adaptive_threshold": 2.0}, {"adaptive_level_eps": -1.0}, {"population": 0},
    {"cohort": 0}, {"colluders": -1}, {"population": 10, "cohort": 10**6}, {"mechanism": "nonesuch"},
    {"trust": "nobody"}, {"preset": "nonesuch"},
]


def _section(key: str) -> str:
    return schema.settings("mlp")[key].section if key in schema.settings("mlp") else "train"


def _model(doc) -> str:
    return doc["model"]


def _settings(doc) -> dict:
    return schema.settings(_model(doc))


def file_case(draw, name: str) -> tuple[dict, set, str]:
    """(a malformed problem document, the keys one of which its message must name, what was done)."""
    doc = json.loads(json.dumps(DOCS[name]))
    known = _settings(doc)
    what = draw(st.sampled_from(["type", "type", "type", "range", "range", "unknown", "missing", "top", "gene",
                                 "gene", "constraint"]))
    if what == "type":
        key = draw(st.sampled_from(sorted(k for k, s in known.items() if s.section in SECTIONS)))
        value = draw(st.sampled_from(bad_values(known[key].hint)))
        doc.setdefault(known[key].section, {})[key] = value
        return doc, {key}, f"{what} {key}={value!r}"
    if what == "range":
        change = draw(st.sampled_from(RANGES))
        for k, v in change.items():
            doc.setdefault(_section(k), {})[k] = v
        return doc, set(change), f"{what} {change}"
    if what == "unknown":
        where = draw(st.sampled_from(SECTIONS + ("", "genes.")))
        base = draw(st.sampled_from(sorted(known) + ["type", "low", "high", "log"]))
        key = draw(st.sampled_from([base + "s", base[:-1], base + "_x", "x" + base]))
        allowed = set(known) | {"name", "description", "dataset", "model", "model_args", "eps_objective", "genes",
                               "constraints", "type", "low", "high", "default", "choices", "log"} | set(SECTIONS)
        if key in allowed:
            key = key + "_zz"
        if where == "":
            doc[key] = 1
        elif where == "genes.":
            gene = draw(st.sampled_from(sorted(doc["genes"])))
            doc["genes"][gene][key] = 1
        else:
            doc.setdefault(where, {})[key] = 1
        return doc, {key}, f"{what} [{where}] {key}"
    if what == "missing":
        key = draw(st.sampled_from(["model", "genes", "dataset"]))
        del doc[key]
        return doc, {key}, f"{what} {key}"
    if what == "top":
        key, value = draw(st.sampled_from([
            ("data", 5), ("train", "x"), ("privacy", [1]), ("deployment", 2.5), ("genes", 5), ("genes", "lr"),
            ("constraints", 1), ("model_args", "x"), ("model", ["mlp"]), ("model", 5), ("model", "rnn"),
            ("dataset", 5), ("dataset", "imagenet"), ("name", 5), ("description", ["x"]),
            ("eps_objective", "epss"), ("eps_objective", 1)]))
        doc[key] = value
        return doc, {key}, f"{what} {key}={value!r}"
    if what == "gene":
        gene = draw(st.sampled_from(sorted(doc["genes"])))
        spec = doc["genes"][gene]
        choice = spec.get("type") == "choice"
        lo, hi = spec.get("low"), spec.get("high")
        options = [("type", "float"), ("type", "integer"), ("type", 5), ("log", "false"), ("log", "true"),
                   ("log", 1), ("default", "x" if not choice else "not-a-choice"), (None, 5), (None, "real")]
        if choice:
            options += [("choices", []), ("choices", 5), ("choices", [NAN]), ("low", 0)]
        else:
            options += [("choices", ["a", "b"]), ("low", "1"), ("low", NAN), ("low", INF), ("low", True), ("high", "x"), ("high", -INF),
                        ("low", hi + 1), ("default", hi + abs(hi - lo) + 1), ("default", NAN)]
            if spec.get("log"):
                options += [("low", 0), ("low", -1)]
            if spec.get("type") == "int":
                options += [("default", lo + 0.5), ("low", 1.5), ("high", [hi])]
        key, value = draw(st.sampled_from(options))
        if key is None:
            doc["genes"][gene] = value
        else:
            spec[key] = value
        if draw(st.booleans()):  # or a gene of a name fedevo does not know
            doc["genes"]["no_such_gene"] = {"type": "real", "low": 0, "high": 1, "default": 0.5}
            return doc, {"no_such_gene", gene}, f"{what} no_such_gene + {gene}.{key}={value!r}"
        return doc, {gene}, f"{what} {gene}.{key}={value!r}"
    key = draw(st.sampled_from(["eps", "error", "comm", "acc", "epsilon"]))
    value = draw(st.sampled_from([NAN, INF, -INF, -1.0, 0, "8", True, [1]] if key in ("eps", "error", "comm")
                                 else [1.0]))
    doc.setdefault("constraints", {})[key] = value
    return doc, {key}, f"constraint {key}={value!r}"


def params_case(draw, name: str) -> tuple[dict, set, str]:
    """(a malformed --params object for this problem, the keys one of which its message must name, what)."""
    doc = DOCS[name]
    known = _settings(doc)
    genes = doc["genes"]
    what = draw(st.sampled_from(["type", "type", "gene", "gene", "range", "unknown"]))
    if what == "type":
        key = draw(st.sampled_from(sorted(k for k in known if k not in genes)))
        value = draw(st.sampled_from(bad_values(known[key].hint)))
        return {key: value}, {key}, f"{what} {key}={value!r}"
    if what == "gene":
        gene = draw(st.sampled_from(sorted(genes)))
        spec = genes[gene]
        if spec.get("type") == "choice":
            values = ["zzz", [spec["choices"][0]], {"a": 1}, NAN]
            values += [str(c).lower() for c in spec["choices"] if isinstance(c, bool)]  # string booleans
            values += [int(c) for c in spec["choices"] if isinstance(c, bool)]  # 1 for true
        else:
            lo, hi = spec["low"], spec["high"]
            values = ["1", True, NAN, INF, -INF, [lo], hi + abs(hi - lo) + 1, lo - abs(hi - lo) - 1, None]
            if spec.get("type") == "int":
                values += [lo + 0.5]
        value = draw(st.sampled_from(values))
        return {gene: value}, {gene}, f"{what} {gene}={value!r}"
    if what == "range":
        change = draw(st.sampled_from(RANGES))
        return dict(change), set(change), f"{what} {change}"
    key = draw(st.sampled_from(sorted(known) + sorted(genes)))
    key = key + "_x"
    return {key: 1}, {key}, f"{what} {key}"


def run_cli(argv: list[str]) -> tuple[object, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
        except SystemExit as e:
            code = e.code
    return code, out.getvalue(), err.getvalue()


def assert_one_line(code, out: str, err: str, keys: set, what: str) -> None:
    assert code == 2, (what, code, err)
    assert out == "", (what, out)
    assert err.startswith("fedevo: error: ") and err.count("\n") == 1, (what, err)
    assert "Traceback" not in err, (what, err)
    assert any(k in err for k in keys), (what, keys, err)


def test_malformed_problem_files_and_params_end_in_one_line():
    seen = {"file": 0, "params": 0}

    @settings(max_examples=N_EXAMPLES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def one(data):
        name = data.draw(st.sampled_from(PROBLEMS))
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            out = tmp / "run"
            if data.draw(st.integers(0, 4)) < 3:  # a problem file, through `fedevo search`
                doc, keys, what = file_case(data.draw, name)
                f = tmp / f"{name}.toml"
                f.write_text(tomli_w.dumps(doc))
                code, o, e = run_cli(["search", "--problem", str(f), "--out", str(out), "--pop", "4", "--gen", "1",
                                      "--workers", "0", "--quiet"])
                seen["file"] += 1
            else:  # --params, through `fedevo evaluate` (and `fedevo audit --problem`)
                params, keys, what = params_case(data.draw, name)
                text = json.dumps(params)
                cmd = data.draw(st.sampled_from(["evaluate", "evaluate", "audit"]))
                argv = [cmd, "--problem", name, "--params", text, "--quiet"]
                code, o, e = run_cli(argv + (["--out", str(out)] if cmd == "audit" else []))
                seen["params"] += 1
            assert_one_line(code, o, e, keys, f"{name}: {what}")
            assert not out.exists(), what
            assert [p.name for p in tmp.iterdir()] in ([], [f"{name}.toml"]), what

    one()
    assert seen["file"] + seen["params"] >= 300, seen
    assert seen["file"] >= 100 and seen["params"] >= 60, seen


def test_bad_value_kinds_cover_every_setting():
    """Every setting's type is one this test knows how to break (a new kind of field needs new bad values)."""
    for model in ("mlp", "cnn", None):
        for key, s in schema.settings(model).items():
            assert bad_values(s.hint), key
