"""Problem files: a dataset × model search space in TOML, and its decoding into a SimConfig.

A problem file fixes the setting (dataset, partition, K, rounds, epochs, batch, mechanism, δ) and declares the
decision variables (genes) with type, bounds and default. `Problem.sim_config(params)` validates a gene
assignment and builds the frozen SimConfig that the simulator runs.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import stat
import sys
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal, Mapping, Optional, Union, get_args

from . import _toml, schema
from .config import SHARED_KEYS, CNNArch, DataConfig, DeploymentConfig, MLPArch, PrivacyConfig, SimConfig, UserArch
from .data.catalog import DATASETS
from .data.sources import SOURCE_KEYS, ArraySource
from .argcheck import checked, plain
from .errors import FedevoError, arg

# Where each known parameter goes, read from the config dataclasses' fields (fedevo/schema.py): a field added to
# SimConfig, DataConfig, DeploymentConfig or an architecture is a problem-file key and a --params key at once.
ARCH_KEYS = {"mlp": schema.arch_keys("mlp"), "cnn": schema.arch_keys("cnn")}
# a user model (model = "python:file.py:function" or "package.module:function"; docs/models.md): fedevo's settings
# for it, in [train]; every other gene, and the [model_args] table, are the factory's keyword arguments
USER_ARCH_KEYS = schema.arch_keys(None)
SIM_KEYS = schema.sim_keys()
PRESET_KEY = schema.PRESET.name  # expands to privacy settings (fedevo/privacy/presets.py)
DATA_KEYS = schema.data_keys()
DEPLOY_KEYS = schema.deploy_keys()
GeneType = Literal["int", "real", "choice"]
GENE_TYPES = get_args(GeneType)
EPS_OBJECTIVES = ("eps", "eps_paper")


def privacy_keys() -> tuple[str, ...]:
    """The `[privacy]` keys: the settings every mechanism shares, then each registered mechanism's own
    (fedevo/privacy/registry.py; a mechanism registered at runtime brings its keys)."""
    from .privacy import registry

    return SHARED_KEYS + registry.mechanism_keys()


def __getattr__(name: str):
    if name == "PRIVACY_KEYS":  # read when used: the registry may grow
        return privacy_keys()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def problems_dir() -> Path:
    """The bundled problem files: the package's `fedevo/problems/` (installed with it; the checkout's top-level
    `problems` is a link to it)."""
    return Path(str(resources.files("fedevo") / "problems"))


@dataclass(frozen=True)
class Gene:
    name: str
    type: GeneType
    low: Optional[float] = None
    high: Optional[float] = None
    default: Any = None
    choices: tuple = ()
    log: bool = False  # sample/mutate on a log scale (encoded as log10 in the search space)

    def __post_init__(self):
        if self.type not in GENE_TYPES:
            raise FedevoError(f"gene {self.name!r}: unknown type {self.type!r}; use one of {', '.join(GENE_TYPES)}")
        if self.type == "choice":
            if not self.choices:
                raise FedevoError(f"gene {self.name!r}: type 'choice' needs a non-empty 'choices' list")
            if self.low is not None or self.high is not None:
                raise FedevoError(f"gene {self.name!r}: a gene of type 'choice' has 'choices', not 'low'/'high'")
            if self.default is not None and not any(_same(self.default, c) for c in self.choices):
                raise FedevoError(f"gene {self.name!r}: default {self.default!r} is not one of {list(self.choices)}")
        else:
            if self.choices:
                raise FedevoError(f"gene {self.name!r}: only a gene of type 'choice' has 'choices' (this one is "
                                  f"{self.type!r})")
            if self.low is None or self.high is None or not self.low <= self.high:
                raise FedevoError(f"gene {self.name!r}: needs numeric 'low' <= 'high'")
            if self.type == "int" and math.ceil(self.low) > math.floor(self.high):
                raise FedevoError(f"gene {self.name!r}: no integer lies in [{self.low:g}, {self.high:g}]")
            if self.log and self.low <= 0:
                raise FedevoError(f"gene {self.name!r}: a log-scale gene needs low > 0")
            if self.default is not None:
                self.check(self.default)

    def check(self, value: Any) -> Any:
        """Validate one value of this gene; returns it with its proper Python type."""
        if self.type == "choice":  # a choice of the same kind: "false" is not false, 1 is not true
            if not any(_same(value, c) for c in self.choices):
                raise FedevoError(f"gene {self.name!r}: {value!r} is not one of {list(self.choices)}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise FedevoError(f"gene {self.name!r}: expected a number, got {value!r}")
        if self.type == "int":
            if isinstance(value, float) and not value.is_integer():
                raise FedevoError(f"gene {self.name!r}: expected an integer, got {value!r}")
            value = int(value)
        else:
            value = float(value)
            if not math.isfinite(value):
                raise FedevoError(f"gene {self.name!r}: {value!r} is not finite")
        if not self.low <= value <= self.high:
            raise FedevoError(f"gene {self.name!r}: {value!r} is out of bounds [{self.low:g}, {self.high:g}]")
        return value


def _plain_tree(value: Any) -> Any:
    """A problem dict's NumPy values as Python's (np.int64(8) -> 8, an array -> a list: what TOML can write)."""
    if isinstance(value, Mapping):
        return {k: _plain_tree(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_tree(v) for v in value]
    if type(value).__module__ == "numpy" and getattr(value, "ndim", 0) > 0 and hasattr(value, "tolist"):
        return value.tolist()
    return plain(value)


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same kind (booleans, numbers, strings are three kinds: 1 == True, but not here)."""
    kind = lambda v: bool if isinstance(v, bool) else (float if isinstance(v, (int, float)) else type(v))  # noqa: E731
    return kind(a) is kind(b) and a == b


@dataclass(frozen=True)
class Problem:
    """A search problem read from a TOML file."""

    name: str
    dataset: str
    model: str
    genes: tuple[Gene, ...]
    fixed: Mapping[str, Any] = field(default_factory=dict)  # every non-gene setting, by parameter name
    eps_objective: str = "eps"
    constraints: Mapping[str, float] = field(default_factory=dict)  # objective name -> upper bound
    description: str = ""
    path: Optional[str] = None
    data_source: Any = None  # the user's data ([data] source: fedevo.data.sources.UserData); None: `dataset`
    model_ref: Optional[str] = None  # a user model's factory, its file's path resolved (models/user_module.py)
    model_kwargs: tuple[str, ...] = ()  # a user model's factory keyword arguments: [model_args] keys, free genes
    text: Optional[str] = None  # the problem file's TOML text (written by `from_dict`), as run.json records it
    evaluator: Optional[str] = None  # the user's own training ("python:file.py:function" or "module:function")
    standard: Mapping[str, Any] = field(default_factory=dict)  # own evaluator: retrain's standard solution's values
    # top-level `fidelity`: the multi-fidelity search's rung ladder as written (a fraction, or fractions ending at
    # 1); checked by the search (fedevo.searching.fidelity.parse_ladder), which alone uses it
    fidelity: Any = None
    # top-level `objectives`: the names in order (empty: error, comm and `eps_objective`), and the problem file's
    # own [objective.NAME] definitions (fedevo.objectives.spec); the rest come from fedevo.objectives' registry
    objectives: tuple[str, ...] = ()
    objective_defs: tuple = ()

    def objective_set(self):
        """The problem's objectives in order (:class:`fedevo.objectives.ObjectiveSet`); FedevoError naming an
        objective that is neither registered nor defined in the problem file."""
        from .objectives import ObjectiveSet, default_names, registered

        own = {o.name: o for o in self.objective_defs}
        names = self.objectives or default_names(self.eps_objective)
        unknown = [n for n in names if n not in own and registered(n) is None]
        if unknown:
            from .objectives import names as known

            raise FedevoError(f"problem {self.name!r}: unknown objective {unknown[0]!r}; known: "
                              f"{', '.join(sorted(known()))} (register yours with fedevo.objectives.register, or "
                              f"define it in the problem file: [objective.{unknown[0]}] read = \"python:file.py:fn\")")
        return ObjectiveSet(tuple(own.get(n) or registered(n) for n in names))
    eval_timeout: Optional[float] = None  # top-level `eval_timeout`: seconds one evaluation may take (None: no limit)

    @property
    def user_model(self) -> bool:
        return self.model_ref is not None

    @property
    def simulated(self) -> bool:
        """True when fedevo's simulator trains this problem (False: the user's own evaluator does)."""
        return self.evaluator is None

    @classmethod
    @checked
    def from_file(cls, name_or_path: str | Path) -> "Problem":
        """A bundled problem by name (`digits_mlp`) or a TOML problem file by path."""
        return load_problem(str(name_or_path))

    @classmethod
    @checked
    def from_dict(cls, doc: Mapping[str, Any], *, name: Optional[str] = None) -> "Problem":
        """A problem from a dict shaped like a problem file (docs/api.md); `name` defaults to doc["name"]."""
        import tomli_w

        if not isinstance(doc, Mapping):
            raise FedevoError(f"a problem dict must be a mapping, got {type(doc).__name__}")
        name = name or doc.get("name")
        if not isinstance(name, str) or not name:
            raise FedevoError("a problem made from a dict needs a name (a \"name\" key or name=...)")
        data = doc.get("data")
        if isinstance(data, Mapping) and not isinstance(data.get("source", ""), str):  # arrays (ArraySource)
            # evaluated as it is (NumPy values as Python's, the arrays kept); no TOML text, so no run records it
            plain_doc = {k: _plain_tree(v) for k, v in doc.items() if k != "data"}
            plain_doc["data"] = {k: v if k == "source" else _plain_tree(v) for k, v in data.items()}
            prob = parse_problem(plain_doc, name=name)
            check_gene_bounds(prob)
            return prob
        try:
            text = tomli_w.dumps(anchored({k: _plain_tree(v) for k, v in doc.items() if v is not None}, Path.cwd()))
        except (TypeError, ValueError) as e:
            raise FedevoError(f"problem {name!r}: cannot be written as a problem file ({e})") from None
        prob = parse_problem(_toml.loads(text), name=name)
        check_gene_bounds(prob)
        return replace(prob, text=text)

    @property
    def gene_names(self) -> tuple[str, ...]:
        return tuple(g.name for g in self.genes)

    def gene(self, name: str) -> Gene:
        for g in self.genes:
            if g.name == name:
                return g
        raise KeyError(name)

    def known_keys(self) -> tuple[str, ...]:
        if not self.simulated:  # the user's evaluator: its own settings and genes, uninterpreted
            return tuple(self.fixed) + self.gene_names
        if self.user_model:
            return fedevo_keys(None) + self.model_kwargs
        return ARCH_KEYS[self.model] + SIM_KEYS + privacy_keys() + DATA_KEYS + DEPLOY_KEYS + (PRESET_KEY,)

    def defaults(self) -> dict[str, Any]:
        return {g.name: g.default for g in self.genes if g.default is not None}

    def resolve(self, params: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
        """Fixed settings ← gene defaults ← `params`, each gene checked against its bounds and type."""
        params = {k: plain(v) for k, v in dict(params or {}).items()}  # a DataFrame row's np.int64: the int
        known = set(self.known_keys())
        unknown = sorted(k for k in params if k not in known)
        if unknown:
            near = difflib.get_close_matches(unknown[0], sorted(known), n=1)
            raise FedevoError(f"unknown parameter(s) {', '.join(map(repr, unknown))} for problem {self.name!r}; "
                              + (f"did you mean {near[0]!r}? " if near else "") + f"known: {', '.join(sorted(known))}")
        merged = {**self.fixed, **self.defaults()}
        typed = schema.settings(None if self.user_model else self.model) if self.simulated else {}
        for k, v in params.items():
            if k in self.gene_names:
                merged[k] = self.gene(k).check(v)
            elif k in typed:  # a fixed setting overridden: held to its dataclass field's type
                merged[k] = schema.check_value(f"parameter {k}", typed[k].hint, v)
            else:  # a user model's keyword argument or an own evaluator's setting: the user's code checks it
                merged[k] = v
        missing = [g.name for g in self.genes if g.name not in merged]
        if missing:
            raise FedevoError(f"gene(s) {', '.join(missing)} have no default; give each a `default` in [genes] "
                              f"(or, for one evaluation, a value in {arg('params')})")
        if PRESET_KEY in merged and self.simulated:
            from .privacy.presets import PRESETS

            name = merged[PRESET_KEY]
            if name not in PRESETS:
                raise FedevoError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
            merged.update(PRESETS[name])
        return merged

    def sim_config(self, params: Optional[Mapping[str, Any]] = None, *, rounds: Optional[int] = None,
                   data_dir: Optional[str] = None, download: bool = False) -> SimConfig:
        if not self.simulated:
            raise FedevoError(f"problem {self.name!r} is trained by its own evaluator {self.evaluator!r}; it has "
                              "no simulator configuration")
        from .privacy import registry

        p = self.resolve(params)
        if rounds is not None:
            p["rounds"] = rounds
        if p.get("partition") == "natural" and self.data_source is not None and self.data_source.clients is not None \
                and p.get("clients") != self.data_source.clients:  # (DataConfig may be re-sized later: the audit)
            raise FedevoError(f"problem {self.name!r}: partition = \"natural\": the data has {self.data_source.clients} "
                              f"clients (distinct client ids), clients = {p.get('clients')} differs; leave clients out")
        p.update(registry.trust_implies(p.get("trust")))  # e.g. secure aggregation's trust always aggregates securely
        pick = lambda keys: {k: p[k] for k in keys if k in p}  # noqa: E731
        data = DataConfig(dataset=self.dataset, data_dir=data_dir, download=download, source=self.data_source,
                          **pick(DATA_KEYS))
        data.check_partition()
        try:
            if self.user_model:
                kwargs = {k: _hashable(v, f"problem {self.name!r}: {k!r}") for k, v in pick(self.model_kwargs).items()}
                arch = UserArch(spec=self.model_ref, kwargs=tuple(sorted(kwargs.items())),
                                init=p.get("model_init", "module"), sparse_conv=p.get("sparse_conv", False))
            else:
                arch = (MLPArch if self.model == "mlp" else CNNArch)(**pick(ARCH_KEYS[self.model]))
            return SimConfig(data=data, arch=arch,
                             privacy=PrivacyConfig(**pick(privacy_keys())), deployment=DeploymentConfig(**pick(DEPLOY_KEYS)),
                             **pick(SIM_KEYS))
        except TypeError as e:  # wrong value types that dataclasses don't coerce
            raise FedevoError(f"problem {self.name!r}: {e}") from None


def _gene_from_toml(name: str, spec: Any) -> Gene:
    """A [genes] entry, each key held to its type in `Gene` (fedevo/schema.py)."""
    if not isinstance(spec, dict):
        raise FedevoError(f"[genes] {name}: expected a table like {{ type = \"real\", low = 0, high = 1 }}, got "
                          f"{schema._show(spec)}")
    hints = {f.name: f for f in schema._own(Gene).values() if f.name != "name"}
    for k in spec:
        if k not in hints:
            raise schema.unknown_key(f"[genes] {name}.", k, list(hints))
    v = {k: schema.check_value(f"[genes] {name}.{k}", hints[k].hint, x) for k, x in spec.items() if k != "default"}
    if "choices" in spec:
        for c in v["choices"]:
            if not isinstance(c, (str, int, float)) or (isinstance(c, float) and not math.isfinite(c)):
                raise FedevoError(f"[genes] {name}.choices: expected strings, numbers or booleans, got "
                                  f"{schema._show(c)}")
    if "default" in spec and spec["default"] is not None and v.get("type", "real") != "choice":
        v["default"] = schema.check_value(f"[genes] {name}.default", float, spec["default"])
    elif "default" in spec:
        v["default"] = spec["default"]
    return Gene(name=name, type=v.get("type", "real"), low=v.get("low"), high=v.get("high"),
                default=v.get("default"), choices=tuple(v.get("choices", ())), log=v.get("log", False))


def anchored(doc: Mapping[str, Any], base: Path) -> dict:
    """A problem dict with its relative file names made absolute against `base` (a dict has no file for them to be
    relative to: the folder the problem was made in): `[data] path` and `test_path`, and the `python:` files of
    `model`, `evaluator` and each `[objective.NAME] read`. What a run directory records (run.json's text) then names
    the same files from any folder (a relative one was read against the folder of each later command: `fedevo
    front` from elsewhere failed, and a resume from a folder holding another `mine.npz` trained on it)."""
    from .data.sources import anchor_path
    from .plugins import PYTHON_PREFIX, resolve_spec

    def spec(v, kind):
        # relative to `base`: resolve_spec takes a path inside the folder its names are relative to
        return resolve_spec(v, str(base / "problem"), kind=kind) if isinstance(v, str) and v.startswith(
            PYTHON_PREFIX) else v

    out = dict(doc)
    data = out.get("data")
    if isinstance(data, Mapping):
        data = dict(data)
        for key in ("path", "test_path"):
            if isinstance(data.get(key), str):  # (a wrong type: parse_problem names it)
                data[key] = anchor_path(data[key], base)
        out["data"] = data
    for key in ("model", "evaluator"):
        if key in out:
            out[key] = spec(out[key], key)
    objective = out.get("objective")
    if isinstance(objective, Mapping):
        out["objective"] = {n: ({**t, "read": spec(t.get("read"), f"[objective.{n}] read")}
                                if isinstance(t, Mapping) and "read" in t else t) for n, t in objective.items()}
    return out


def parse_problem(doc: Mapping[str, Any], *, name: str, path: Optional[str] = None,
                  registered_only: bool = True, reading: bool = False,
                  facts: Optional[Mapping[str, Any]] = None) -> Problem:
    """Build a Problem from a parsed TOML document; every mistake is a FedevoError naming the key.

    registered_only=False: an objective name that is neither registered nor defined in the file is taken as it
    is (a run's reader: run.json records the objectives, the log their values; fedevo.searching.rundata).
    reading=True: for a reader of a run directory, which needs no data and runs none of the user's code: the
    user's data rebuilt from `facts` (run.json's `data_facts`, `data.sources.facts_of`) instead of read, the
    user's model not built and probed, an evaluator not imported (each is, if the problem then trains)."""
    if "evaluator" in doc:
        return _parse_own_evaluator(doc, name=name, path=path, registered_only=registered_only, reading=reading)
    _check_top(doc, TOP)
    user_data = "source" in doc.get("data", {})  # the user's data ([data] source, docs/data.md), not `dataset`
    for req in ("model", "genes") + (() if user_data else ("dataset",)):
        if req not in doc:
            raise FedevoError(f"problem {name!r}: missing required key {req!r}"
                              + (" (or a [data] source: docs/data.md)" if req == "dataset" else ""))
    if not user_data and doc["dataset"] not in DATASETS:
        raise FedevoError(f"dataset: unknown dataset {doc['dataset']!r}; choose one of {', '.join(DATASETS)} "
                          "(or your own data: a [data] source, docs/data.md)")
    model = doc["model"]
    user = isinstance(model, str) and ":" in model
    if not user and (not isinstance(model, str) or model not in ARCH_KEYS):
        raise FedevoError(f"problem {name!r}: unknown model {model!r}; use 'mlp', 'cnn', "
                          "'python:path/to/file.py:function' or 'package.module:function'")
    fixed: dict[str, Any] = {}
    kwargs_table = doc.get("model_args", {})
    if kwargs_table and not user:
        raise FedevoError(f"problem {name!r}: [model_args] holds a user model's keyword arguments; model {model!r} "
                          "takes none")
    if not isinstance(kwargs_table, dict):
        raise FedevoError(f"problem {name!r}: [model_args] must be a table of keyword arguments")
    for k, v in kwargs_table.items():
        if k in fedevo_keys(None) or k in ("input_shape", "num_classes"):
            raise FedevoError(f"problem {name!r}: [model_args] key {k!r} is "
                              f"{'given by fedevo' if k in ('input_shape', 'num_classes') else 'a fedevo setting'}; "
                              "[model_args] holds the factory's own keyword arguments")
        fixed[k] = _hashable(v, f"problem {name!r}: [model_args] {k!r}")
    known = schema.settings(None if user else model, user_data=user_data)
    for section in ("data", "train", "privacy", "deployment"):  # each value held to its dataclass field's type
        raw = doc.get(section, {})
        arrays = section == "data" and isinstance(raw, dict) and isinstance(raw.get("source"), ArraySource)
        try:  # named with the problem, as its [data] source's and [model_args]' errors are
            table = schema.check_table(section, {k: v for k, v in raw.items() if k != "source"} if arrays else raw,
                                       {k: s for k, s in known.items() if s.section == section}, known)
        except FedevoError as e:
            raise FedevoError(f"problem {name!r}: {e}") from None
        fixed.update({k: v for k, v in table.items() if section != "data" or k not in SOURCE_KEYS})
    data_source = _user_data(doc, fixed, name=name, path=path, model=model, facts=facts) if user_data else None
    genes = tuple(_gene_from_toml(k, v) for k, v in doc["genes"].items())
    for section in ("data", "train", "privacy", "deployment", "model_args"):
        for k in doc.get(section, {}):
            if k in doc["genes"]:  # the gene's value would silently replace the fixed one
                raise FedevoError(f"problem {name!r}: [{section}] {k}: is also a gene ([genes] {k}); give it in one "
                                  "place")
    allowed = set(fedevo_keys(None if user else model))
    model_kwargs: tuple[str, ...] = ()
    if user:  # genes that are not fedevo settings are the factory's keyword arguments
        model_kwargs = tuple(kwargs_table) + tuple(g.name for g in genes if g.name not in allowed
                                                   and g.name not in kwargs_table)
        for g in genes:
            if g.name in ("input_shape", "num_classes"):
                raise FedevoError(f"problem {name!r}: gene {g.name!r} is given to the model factory by fedevo")
    for g in genes:
        if g.name not in allowed and g.name not in model_kwargs:
            near = difflib.get_close_matches(g.name, sorted(allowed), n=1)
            raise FedevoError(f"problem {name!r}: unknown gene {g.name!r}; "
                              + (f"did you mean {near[0]!r}? " if near else "")
                              + f"genes may be {', '.join(sorted(allowed))}")
    eps_obj, constraints, objectives = _objectives(doc, name, path, registered_only)
    model_ref = None
    if user:
        from .plugins import check_current, resolve_spec

        try:
            model_ref = resolve_spec(model, path)
            if not reading:  # a file edited since this process imported it: its old text would train
                check_current(model_ref, kind="model")
        except FedevoError as e:
            raise FedevoError(f"problem {doc.get('name', name)!r}: {e}") from None
    dataset = data_source.name if data_source else doc["dataset"]
    prob = Problem(name=doc.get("name", name), dataset=dataset, model=model, genes=genes, fixed=fixed,
                   eps_objective=eps_obj, constraints=constraints, description=doc.get("description", ""), path=path,
                   data_source=data_source, model_ref=model_ref, model_kwargs=model_kwargs,
                   fidelity=tuple(doc["fidelity"]) if isinstance(doc.get("fidelity"), list) else doc.get("fidelity"),
                   eval_timeout=_eval_timeout(doc), **objectives)
    config = prob.sim_config()  # validate the defaults once, at load time
    _check_privacy_genes(prob, config.privacy.mechanism)
    if user and not reading:
        probe_model(prob, config)
    return prob


def _check_privacy_genes(prob: "Problem", mechanism: str) -> None:
    """A gene of a mechanism's own settings (σ, clip, τ...) that the problem's mechanism does not take would be
    searched for nothing: every value the same objectives (a problem file without [privacy] searched σ and clip
    under mechanism "none", every ε infinite, silently). Not where a gene picks the mechanism or a preset."""
    from .privacy import registry

    names = set(prob.gene_names)
    if names & {"mechanism", PRESET_KEY}:
        return
    own = set(registry.mechanism(mechanism).keys)
    inert = [g for g in prob.gene_names if g in registry.mechanism_keys() and g not in own]
    if inert:
        raise FedevoError(f"problem {prob.name!r}: gene(s) {', '.join(inert)} have no effect under mechanism "
                          f"{mechanism!r} (its settings: {', '.join(sorted(own)) or 'none'}); set [privacy] "
                          "mechanism to one that takes them, or drop the gene(s)")


# a problem file's top-level keys and their types (the settings' tables are typed by fedevo/schema.py)
TOP = {"name": str, "description": str, "dataset": str, "model": str, "model_args": dict,
       "eps_objective": Literal["eps", "eps_paper"], "data": dict, "train": dict, "privacy": dict,
       "deployment": dict, "genes": dict, "constraints": dict, "objectives": tuple[str, ...], "objective": dict,
       # the multi-fidelity rung ladder (its values checked by the search: searching/fidelity.parse_ladder)
       "fidelity": Union[float, tuple[float, ...]],
       "eval_timeout": float}  # seconds an evaluation may take (searching/containment.py)


def _eval_timeout(doc: Mapping[str, Any]) -> Optional[float]:
    """The top-level `eval_timeout` (its type checked by _check_top): a positive number of seconds, or None."""
    from .guards import check_eval_timeout

    return check_eval_timeout(doc.get("eval_timeout"), "eval_timeout")


def _check_top(doc: Mapping[str, Any], top: Mapping[str, Any]) -> None:
    for k, v in doc.items():
        if k not in top:
            raise schema.unknown_key("", k, list(top))
        schema.check_value(k, top[k], v)


def fedevo_keys(model: Optional[str]) -> tuple[str, ...]:
    """fedevo's own setting names for a built-in model ('mlp', 'cnn') or a user model (None)."""
    arch = USER_ARCH_KEYS if model is None else ARCH_KEYS[model]
    return arch + SIM_KEYS + privacy_keys() + DATA_KEYS + DEPLOY_KEYS + (PRESET_KEY,)


def _hashable(v: Any, where: str) -> Any:
    """A [model_args] value as the frozen config holds it: TOML arrays become tuples; tables are refused."""
    if isinstance(v, list):
        return tuple(_hashable(x, where) for x in v)
    if isinstance(v, dict):
        raise FedevoError(f"{where}: a table is not supported as a keyword argument; use numbers, strings, "
                          "booleans or arrays")
    return v


def probe_model(prob: Problem, config: SimConfig) -> None:
    """A user model: build it, run one forward pass and try one training step on a zero batch of the dataset's
    input shape (models/user_module.py `probe`), so that a missing file or function, a factory that raises or
    returns no module, an input shape the model rejects, logits that are not finite floats or a module fedevo's
    step cannot train is one line at load time, before any run directory exists."""
    from .usercode import noted_if_slow

    try:
        with noted_if_slow(f"checking problem {prob.name!r}: model factory {config.arch.factory_name!r} (the genes "
                           "at their defaults)"):
            _probe(config)
    except FedevoError as e:
        raise FedevoError(f"problem {prob.name!r}: {e}") from None


def _probe(config: SimConfig) -> None:
    from .fl.cost import data_shape
    from .models.user import try_step
    from .models.user_module import probe

    from .guards import check_model_parameters
    from .hardware import may_use_gpu

    shape, classes = data_shape(config)
    name = config.arch.factory_name
    probe(config.arch, shape, classes,
          check_size=lambda n, called: check_model_parameters(n, f"model factory {name!r} (called with {called})"),
          device_path=may_use_gpu(config.device), try_step=try_step)


def _user_data(doc: Mapping[str, Any], fixed: dict[str, Any], *, name: str, path: Optional[str], model: str,
               facts: Optional[Mapping[str, Any]] = None):
    """[data] source: read the user's data once (every mistake a FedevoError now, before any run); with
    partition = "natural", `clients` becomes the number of distinct client ids. facts: what a run recorded of it
    (its reader's: the data rebuilt from them, not read)."""
    from .data.sources import from_facts, open_source, source_from_table

    if "dataset" in doc:
        raise FedevoError(f"problem {name!r}: give either dataset = ... (a bundled dataset) or a [data] source, "
                          "not both")
    spec = source_from_table(doc["data"], base=Path(path).resolve().parent if path else None, problem=name)
    natural = fixed.get("partition") == "natural" or any(
        isinstance(g, dict) and "natural" in g.get("choices", ()) for g in doc.get("genes", {}).values())
    try:
        ud = open_source(spec, natural=natural) if facts is None else from_facts(spec, facts)
    except FedevoError as e:
        raise FedevoError(f"problem {name!r}: {e}") from None
    if model == "cnn" and len(ud.input_shape) != 3:
        raise FedevoError(f"problem {name!r}: model 'cnn' needs image features (C, H, W); the data has vectors of "
                          f"{ud.input_shape[0]} features (use model 'mlp')")
    if natural:
        fixed.setdefault("clients", ud.clients)
    return ud


def _objectives(doc: Mapping[str, Any], name: str, path: Optional[str] = None,
                registered_only: bool = True) -> tuple[str, dict, dict]:
    """(the ε objective, the constraints, the Problem's objectives fields) of a problem file, checked."""
    from .objectives import MAX_OBJECTIVES, MIN_OBJECTIVES, default_names, names as registered_names
    from .objectives.builtin import BUILTIN
    from .objectives.spec import from_table

    eps_obj = doc.get("eps_objective", "eps")
    if eps_obj not in EPS_OBJECTIVES:
        raise FedevoError(f"problem {name!r}: eps_objective must be one of {EPS_OBJECTIVES}, got {eps_obj!r}")
    tables = doc.get("objective", {})
    defs = []
    for k, table in tables.items():
        if k in BUILTIN:
            raise FedevoError(f"[objective.{k}]: {k!r} is a built-in objective; give yours another name")
        defs.append(from_table(k, table, problem_path=path))
    listed = doc.get("objectives")
    if listed is not None:
        if not all(isinstance(n, str) for n in listed):
            raise FedevoError(f"objectives: expected a list of objective names, got {listed!r}")
        if not MIN_OBJECTIVES <= len(listed) <= MAX_OBJECTIVES:
            raise FedevoError(f"objectives: a search has {MIN_OBJECTIVES} to {MAX_OBJECTIVES} objectives, got "
                              f"{len(listed)}")
        dup = next((n for n in listed if listed.count(n) > 1), None)
        if dup:
            raise FedevoError(f"objectives: {dup!r} is listed twice")
        known = list(dict.fromkeys([*registered_names(), *tables]))
        for n in listed:
            if n not in known and registered_only:
                raise schema.unknown_key("objectives: ", n, known)
        if "eps_objective" not in doc and "eps_paper" in listed and "eps" not in listed:
            eps_obj = "eps_paper"
    unused = [k for k in tables if k not in (listed or ())]
    if unused:
        raise FedevoError(f"[objective.{unused[0]}]: defined but not in the objectives list")
    names = tuple(listed) if listed is not None else default_names(eps_obj)
    own = {o.name: o for o in defs}
    constraints = dict(doc.get("constraints", {}))
    for k, v in constraints.items():
        target = "eps_paper" if k == "eps" and "eps" not in names and "eps_paper" in names else k
        if target not in names:
            raise schema.unknown_key("[constraints] ", k, list(names))
        constraints[k] = b = schema.check_value(f"[constraints] {k}", float, v)
        o = own.get(target) or _registered(target, registered_only)
        if o is None:
            continue
        if not o.maximize and o.lower is not None and b <= o.lower:  # no evaluation can meet it: an empty front
            raise FedevoError(f"[constraints] {k}: expected a bound > {o.lower:g} (every {k} is >= {o.lower:g}), "
                              f"got {v!r}")
        if o.maximize and o.upper is not None and b >= o.upper:
            raise FedevoError(f"[constraints] {k}: expected a bound < {o.upper:g} (every {k} is <= {o.upper:g}; "
                              f"{k} is maximised: the bound is a minimum), got {v!r}")
    fields_ = {"objectives": tuple(listed)} if listed is not None else {}
    if defs:
        fields_["objective_defs"] = tuple(defs)
    return eps_obj, constraints, fields_


def _registered(name: str, required: bool = True):
    from .objectives import get, registered

    return get(name) if required else registered(name)


OWN_TOP = {"name": str, "description": str, "evaluator": str, "settings": dict, "genes": dict, "standard": dict,
           "eps_objective": Literal["eps", "eps_paper"], "constraints": dict, "eval_timeout": float,
           "objectives": tuple[str, ...], "objective": dict}


def _parse_own_evaluator(doc: Mapping[str, Any], *, name: str, path: Optional[str],
                         registered_only: bool = True, reading: bool = False) -> Problem:
    """A problem trained by the user's own evaluator: free-form genes and `[settings]`, passed to it as they are."""
    from .plugins import check_evaluator_signature, load_callable, resolve_spec

    _check_top(doc, OWN_TOP)
    if "genes" not in doc or not isinstance(doc["genes"], dict) or not doc["genes"]:
        raise FedevoError(f"problem {name!r}: missing required key 'genes' (a table of at least one gene)")
    settings = doc.get("settings", {})
    if not isinstance(settings, dict):
        raise FedevoError(f"problem {name!r}: [settings] must be a table of fixed values")
    clash = sorted(set(settings) & set(doc["genes"]))
    if clash:
        raise FedevoError(f"problem {name!r}: {', '.join(clash)} is both a gene and a fixed setting")
    for key in list(settings) + list(doc["genes"]):
        if not str(key).isidentifier():
            raise FedevoError(f"problem {name!r}: {key!r} is not a valid setting or gene name (use letters, digits "
                              "and _)")
    standard = doc.get("standard", {})
    if not isinstance(standard, dict) or set(standard) - set(settings) - set(doc["genes"]):
        raise FedevoError(f"problem {name!r}: [standard] sets the retrain standard solution's settings and genes; "
                          f"unknown key(s): {', '.join(sorted(set(standard) - set(settings) - set(doc['genes'])))}"
                          if isinstance(standard, dict) else f"problem {name!r}: [standard] must be a table")
    try:
        spec = resolve_spec(doc["evaluator"], path, kind="evaluator")
        if not reading:  # a missing file or function, or one that cannot take fedevo's call: one line, now
            check_evaluator_signature(load_callable(spec, kind="evaluator"))
    except FedevoError as e:
        raise FedevoError(f"problem {name!r}: {e}") from None
    genes = tuple(_gene_from_toml(k, v) for k, v in doc["genes"].items())
    eps_obj, constraints, objectives = _objectives(doc, name, path, registered_only)
    return Problem(name=doc.get("name", name), dataset="", model="", genes=genes, fixed=dict(settings),
                   eps_objective=eps_obj, constraints=constraints, description=doc.get("description", ""), path=path,
                   evaluator=spec, standard=dict(standard), eval_timeout=_eval_timeout(doc), **objectives)


def example_files() -> list:
    """The examples the package carries (fedevo/examples/: README.md, the problem files, the code), as
    importlib.resources traversables, by name; `fedevo examples` copies them out."""
    from importlib import resources

    root = resources.files("fedevo") / "examples"
    return sorted((f for f in root.iterdir() if f.is_file() and f.name.endswith((".md", ".py", ".toml"))),
                  key=lambda f: f.name)


def load_problem(name_or_path: str) -> Problem:
    """A bundled problem by name (`digits_mlp`) or a TOML file by path."""
    p = Path(name_or_path)
    if p.suffix != ".toml" and not p.exists():
        p = problems_dir() / f"{name_or_path}.toml"
        if not p.exists():
            avail = ", ".join(list_problems()) or "none"
            raise FedevoError(f"unknown problem {name_or_path!r}; bundled problems: {avail} (or pass a .toml path)")
    try:
        st = p.stat()  # follows links: a loop or a dangling link is an OSError saying which
    except OSError as e:
        why = "does not exist" if isinstance(e, FileNotFoundError) and not p.is_symlink() else (
            f"cannot be opened: {e.strerror or e}" if e.strerror else f"cannot be opened: {e}")
        if isinstance(e, FileNotFoundError) and p.is_symlink():
            why = f"is a link to {os.readlink(p)!r}, which does not exist"
        elif isinstance(e, FileNotFoundError) and p.parent == Path(".") and p.stem in list_problems():
            why += f" (the bundled problem is {arg('problem', p.stem)}, without .toml)"
        raise FedevoError(f"problem file {str(p)!r} {why}") from None
    if stat.S_ISDIR(st.st_mode):
        raise FedevoError(f"problem file {str(p)!r} is a directory, not a TOML file")
    if not stat.S_ISREG(st.st_mode):
        raise FedevoError(f"problem file {str(p)!r} is not a regular file")
    try:
        text = p.read_text(encoding="utf-8")
        doc = _toml.loads(text)
    except UnicodeDecodeError as e:
        raise FedevoError(f"problem file {str(p)!r} is not UTF-8 text (byte {e.start}: "
                          f"{e.object[e.start:e.start + 1]!r}); TOML files must be UTF-8") from None
    except OSError as e:
        raise FedevoError(f"cannot read problem file {str(p)!r}: {e.strerror or e}") from None
    except _toml.TOMLDecodeError as e:
        raise FedevoError(f"malformed problem file {str(p)!r}: {e}") from None
    # absolute: the run directory records it, and [data] paths relative to it must resolve from any cwd later
    prob = parse_problem(doc, name=p.stem, path=str(p.resolve()))
    check_gene_bounds(prob)
    return replace(prob, text=text)


def check_gene_bounds(prob: Problem) -> None:
    """Every gene at its low and high bound (each choice of a choice gene), the others at their defaults, must
    give a valid configuration: otherwise a search would sample individuals that can only fail. (A problem with
    its own evaluator: only the user's code knows.)"""
    if not prob.simulated:
        return
    from .usercode import noted_if_slow

    for g in prob.genes:
        if g.type == "choice":
            cases = [(f"choice {c!r}", c) for c in g.choices]
        else:
            lo, hi = (math.ceil(g.low), math.floor(g.high)) if g.type == "int" else (g.low, g.high)
            cases = [(f"low bound {lo!r}", lo), (f"high bound {hi!r}", hi)]
        for which, v in cases:
            try:
                config = prob.sim_config({g.name: v})
                if prob.user_model and (g.name in prob.model_kwargs or g.name == "device"):  # device: its step
                    with noted_if_slow(f"checking problem {prob.name!r} at each gene's bounds: model factory "
                                       f"{config.arch.factory_name!r} with gene {g.name!r} at its {which}"):
                        _probe(config)
            except FedevoError as e:
                raise FedevoError(f"problem {prob.name!r}: gene {g.name!r} at its {which} gives an invalid "
                                  f"configuration ({e}); fix the gene's bounds") from None
        if prob.user_model and g.name in prob.model_kwargs and len({repr(v) for _, v in cases}) > 1:
            _warn_if_no_effect(prob, g, cases)


def _warn_if_no_effect(prob: Problem, gene: Gene, cases: list[tuple[str, Any]]) -> None:
    """One line on stderr where a user model's gene seems to change nothing the module computes as fedevo trains
    it, at initialisation: at each of its bounds or choices (the other genes at their defaults) the same parameter
    shapes, and on each probe input (a random batch, and the same ×100) the same logits and the same gradients of
    a loss (models.user_module.computed): e.g. a Dropout rate, off in eval mode (docs/models.md). A warning, not an
    error: a gene could matter between its bounds only, or only once training has moved the parameters. Each case
    is one more build of the factory, under noted_if_slow (a factory that hangs there is named)."""
    from .fl.cost import data_shape
    from .models.user_module import computed, meta_shapes, same_computation
    from .usercode import noted_if_slow

    built = []
    for _, v in cases:
        config = prob.sim_config({gene.name: v})
        built.append((config.arch, *data_shape(config)))

    def slow(which: str, b: tuple):  # each of the factory's builds here: named if it hangs
        return noted_if_slow(f"checking whether gene {gene.name!r} of problem {prob.name!r} changes what model "
                             f"factory {b[0].factory_name!r} computes (its {which})")

    shapes = []
    for (which, _), b in zip(cases, built):  # an architecture gene (the common case) differs here, at no cost
        with slow(which, b):
            shapes.append(meta_shapes(*b))
    if all(s is not None for s in shapes) and any(s != shapes[0] for s in shapes[1:]):
        return
    seen = []
    for (which, _), b, s in zip(cases, built, shapes):
        with slow(which, b):
            seen.append(computed(*b, s))  # (its meta-device shapes: not built there again)
    if all(same_computation(seen[0], s) for s in seen[1:]):
        at = ", ".join(w for w, _ in cases)
        print(f"fedevo: warning: problem {prob.name!r}: gene {gene.name!r} seems to change nothing the module "
              f"computes at initialisation (outputs and gradients on probe inputs: the same at its {at}): fedevo "
              f"trains the module in eval mode, where Dropout is off and BatchNorm uses its running statistics "
              f"(docs/models.md); a warning only: if the gene matters, e.g. once training has moved the parameters, "
              f"ignore it", file=sys.stderr)


def list_problems() -> list[str]:
    return sorted(f.stem for f in problems_dir().glob("*.toml"))


def parse_params(text: Optional[str], flag: str = "--params") -> dict[str, Any]:
    """--params (or `flag`): a JSON object, or a path to a JSON file."""
    if not text:
        return {}
    src = text
    if not text.lstrip().startswith(("{", "[")):  # a path: it must be a readable file
        path = Path(text)
        if not path.is_file():
            why = "is a directory" if path.is_dir() else "does not exist"
            raise FedevoError(f"{flag} {text!r} {why} (give a JSON object like '{{\"lr\": 0.1}}' or a JSON file)")
        try:
            src = path.read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise FedevoError(f"{flag} file {text!r} cannot be read: {e}") from None
    try:
        obj = json.loads(src)
    except json.JSONDecodeError as e:
        where = "" if src is text else f" (file {text!r})"
        raise FedevoError(f"{flag} is not valid JSON{where}: {e}") from None
    if not isinstance(obj, dict):
        raise FedevoError(f"{flag} must be a JSON object like '{{\"lr\": 0.1}}'")
    return obj
