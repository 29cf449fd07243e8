"""front.html's data model (fedevo/viz/front.py): a run's ok rows with every drawn column (fedevo.viz.axes), their
marks (the knee, the lowest errors), hover texts and the run's objectives, and the labels and colours every view of
the page shares. Built once a page; the figures (fedevo.viz.front_figures) and the page's script data read it."""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Mapping, Optional, Sequence

from ..searching.rundata import RunData
from .axes import EPS_FLOOR, Column, finite, make_column
from .numfmt import num

FRONT_COLOR = "#d62728"
DOMINATED_OPACITY = 0.3
CHOSEN_COLOR = "#2ca02c"  # the solution chosen within the caps (knee or lowest NAME)
LOWER_COLOR = "#9a9a9a"  # a multi-fidelity search's lower-rung evaluations: grey, never in the front
SCALE = "Viridis"
SHORT = {"error": "error", "comm": "comm", "eps": "ε", "eps_paper": "ε (paper)", "accuracy_global": "global acc",
         "generation": "generation"}
COMM_UNIT = "params/round/client slot"  # comm's unit, written the same in the header, hover, axes and colour bars
COMM_LABEL = f"comm ({COMM_UNIT})"
OBJECTIVE_LABELS = {"error": "error (1 − mean client accuracy)", "comm": COMM_LABEL,
                    "eps": "ε (accountant)", "eps_paper": "ε (paper formula)"}
EPS_NAME = {"eps": "ε (accountant)", "eps_paper": "ε (paper)"}
AXIS_TITLE = {"error": "error", "comm": COMM_LABEL, "eps": "ε", "eps_paper": "ε (paper)"}
# the unit words a typed cap or range may end with ("1000 params"): what the page writes, and the objective's unit
UNIT_WORDS = {"comm": (COMM_UNIT, "params", "parameters", "parameters per round per client slot")}
ERROR_MAX = 1.0  # the largest error there can be (1 − accuracy): an error axis ends there at most


def unit_words(name: str, unit: str = "") -> list[str]:
    """What a typed number of objective `name` may end with (fedevoParseNum's `units`)."""
    return list(dict.fromkeys([*UNIT_WORDS.get(name, ()), *([unit] if unit else [])]))


def value_unit(name: str, unit: str = "") -> str:
    """What the page writes after a value of objective `name` ("12 ms", comm's "624 params/round/client slot")."""
    return COMM_UNIT if name == "comm" else unit


def axis_title(objectives, key: str, label: str) -> str:
    """The title of an axis of `key`: error, comm (with its unit) and ε as every page writes them, a run's other
    objective with its unit ("latency (ms)", "model size Ω (parameters)"), anything else its column label."""
    if key in AXIS_TITLE:
        return AXIS_TITLE[key]
    return objectives.by_name(key).heading if key in objectives else label


def objective_label(name: str, label: str, maximize: bool = False) -> str:
    """An objective as a table header or list entry: its short label, "(maximised)" for a maximised one."""
    return SHORT.get(name, label) + (" (maximised)" if maximize else "")
# keys of a per-evaluation privacy summary worth showing on hover (those present are shown)
PRIVACY_SHOW = ("mechanism", "trust", "population", "cohort", "sampling", "neighbouring", "accountant", "delta",
                "unit", "eps_conditional", "sigma")
# settings shown once in the header as privacy / deployment (besides fedevo.problem.PRIVACY_KEYS)
DEPLOYMENT_KEYS = ("trust", "population", "cohort", "sampling", "accountant", "noise_cohort", "delta")


def _fmt_any(v: Any) -> str:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, int) and abs(v) < 1000:
        return str(v)
    return num(v)


def _unit(unit: str) -> str:
    """ " ms" after a value of an objective in ms (nothing for one without a unit)."""
    return f" {unit}" if unit else ""


HOVER_LINE = 64  # characters per hover line at most (a long line widens the label beyond a 1,000 px scene)


def _wrap(items: Sequence[str], first: str = "", width: int = HOVER_LINE) -> list[str]:
    """Items joined by " · " into lines of at most `width` characters (an item longer than that: its own line)."""
    lines, cur = [], first
    for it in items:
        if cur not in ("", first) and len(cur) + 3 + len(it) > width:
            lines.append(cur)
            cur = ""
        cur += (" · " if cur not in ("", first) else "") + it
    if cur not in ("", first):
        lines.append(cur)
    return lines


class Model:
    """The ok rows of a run with every drawn column, marks and hover texts (shared by all views)."""

    def __init__(self, data: RunData):
        self.data = data
        self.rows = data.ok_rows
        self.marks = data.marks()
        self.chance = data.knee_bar  # chance minus the test-set margin: at or above it, never the knee
        self.eps_log = data.meta.get("search_objectives", {}).get("eps_scale") == "log10"
        self.on_front = [r["id"] in data.front_ids for r in self.rows]
        # ok evaluations outside the problem's [constraints]: never on the front, whether dominated or not
        self.outside = {r["id"] for r in self.rows if data.constraints
                        and not data.objectives.feasible(r, data.constraints)}
        self.constraints_text = ", ".join(f"{k} {'≥' if floor else '≤'} {num(v)}"
                                          for k, floor, v in data.objectives.constraint_terms(data.constraints))
        cols: dict[str, Column] = {}
        cols["generation"] = make_column(self.rows, "generation", "generation", kind="int", log=False)
        for k in ("error", "comm", "eps", "eps_paper"):
            cols[k] = make_column(self.rows, k, SHORT[k], eps_log=self.eps_log)
        # the run's objectives (RunData.objectives, 2 to 5 of them) in order: the 3D view shows the first three,
        # the projections every pair, the parallel coordinates and the caps every one
        self.objective_names = [o.name for o in data.objectives if any(o.name in r for r in self.rows)] or \
            ["error", "comm", data.eps_key]
        for o in data.objectives:
            if o.name in self.objective_names and o.name not in cols:
                pos = all(finite(r.get(o.name)) and r[o.name] > 0 for r in self.rows)
                cols[o.name] = make_column(self.rows, o.name, o.label, log=True if (o.log and pos) else None)
        self.keys = tuple((self.objective_names + ["generation"])[:3]) if len(self.objective_names) < 3 else \
            tuple(self.objective_names[:3])
        self.pairs = list(combinations(self.objective_names, 2))
        cols["accuracy_global"] = make_column(self.rows, "accuracy_global", "global acc", log=False)
        for g in data.gene_names:
            gene = data.problem.gene(g)
            if gene.type == "choice":
                cols[g] = make_column(self.rows, g, g, kind="choice", choices=gene.choices)
            else:
                cols[g] = make_column(self.rows, g, g, kind=gene.type, log=bool(gene.log))
        self.cols = cols
        # an ε that is not the search's objective and has no finite value anywhere (ε paper under central or
        # distributed trust or without privacy: NaN, the paper's formula covers local trust only; the accountant's
        # ε with no privacy: ∞) says nothing: it is left out of the hover, the parallel axes, the colour choices
        # and the table
        self.undefined = tuple(k for k in ("eps", "eps_paper") if k != data.eps_key
                               and not any(finite(r.get(k)) for r in self.rows))
        self.text = [self.hover(r, f) for r, f in zip(self.rows, self.on_front)]
        self.excluded = [r["id"] for r in self.rows if self.chance is not None and finite(r["error"])
                         and r["error"] >= self.chance]
        # a multi-fidelity search's lower rungs (finite objectives): drawn grey beneath, not evaluations of the
        # front (no selection, no colour, no knee); their values are those measured after the rung's rounds
        self.lower = [r for r in data.lower_rows if all(finite(r.get(k)) for k in self.keys)]

    def lower_col(self, key: str) -> list[float]:
        """A lower-rung column in the data space of the same axis (ε floored as the column floors it)."""
        floor = self.cols[key].log and key.startswith("eps")
        return [max(float(r[key]), EPS_FLOOR) if floor else float(r[key]) for r in self.lower]

    def lower_hover(self, r: Mapping[str, Any]) -> str:
        planned = planned_rounds(self.data) if "rounds" not in self.data.gene_names else None
        of = f"of the {planned} planned rounds" if planned is not None else "of the planned rounds"
        return "<br>".join([
            f"<b>id {r['id']}</b> · generation {r['generation']} · rung {r['rung']}: "
            f"{r['rounds_trained']} {of}",
            "a lower-fidelity evaluation: not in the front (measured after these rounds)",
            f"error {num(r['error'])} · comm {num(r['comm'])} · {EPS_NAME[self.data.eps_key]} "
            f"{num(r[self.data.eps_key])}"])

    @property
    def off_front_name(self) -> str:
        """What the points off the front are (the legend's and the Pareto axis' words)."""
        return "dominated or outside the constraints" if self.outside else "dominated"

    def idx(self, front: bool) -> list[int]:
        return [i for i, f in enumerate(self.on_front) if f == front]

    def col(self, key: str, idx: Sequence[int]) -> list[float]:
        vals = self.cols[key].data
        return [vals[i] for i in idx]

    def capped(self, idx: Sequence[int], keys: Optional[Sequence[str]] = None) -> list[bool]:
        """Whether each point is drawn at a cap (∞ or missing) on one of `keys`' axes (default: the 3D view's)."""
        return [any(self.cols[k].capped[i] for k in (keys or self.keys)) for i in idx]

    def hover(self, r: Mapping[str, Any], on_front: bool) -> str:
        data = self.data
        where = ("Pareto front" if on_front else f"outside the constraints ({self.constraints_text})"
                 if r["id"] in self.outside else "dominated")
        head = [f"<b>id {r['id']}</b>", f"generation {r['generation']}", where]
        ms = self.marks.get(r["id"], ())
        if ms:
            head.append(", ".join(ms))
        if self.chance is not None and finite(r["error"]) and r["error"] >= self.chance:
            head.append("no better than chance")
        acc = num(1 - r["error"]) if finite(r["error"]) else "–"
        lines = [*_wrap(head, width=HOVER_LINE + 7),  # + 7: <b></b>
                 f"error {num(r['error'])} (mean client accuracy {acc}, global accuracy {num(r['accuracy_global'])})",
                 f"comm {num(r['comm'])} {COMM_UNIT} · Ω {num(r['omega'])}",
                 *_wrap([f"{EPS_NAME[k]} {num(r[k])}" + (" (no privacy)" if r[k] == math.inf else "")
                         for k in ("eps", "eps_paper") if k not in self.undefined])]
        lines += _wrap([f"{self.cols[k].label} {num(r.get(k))}" + _unit(data.objectives.by_name(k).unit)
                        for k in self.objective_names if k not in ("error", "comm", "eps", "eps_paper")])
        priv = r.get("privacy") or {}
        shown = [f"{k} {_fmt_any(priv[k])}" for k in PRIVACY_SHOW
                 if k in priv and not isinstance(priv[k], (dict, list))]
        lines += _wrap(shown, "privacy: ")
        lines += _wrap([f"{g} = {_fmt_any(r[g])}" for g in data.gene_names])
        return "<br>".join(lines)

    def objectives(self) -> list[dict]:
        """The run's objectives (RunData.objectives, in order) that the rows hold and that say something: what the
        caps inputs, the "lowest NAME" choices and the knee (fedevo.viz.knee_js) work on; `unit` is what the page
        writes after a value (value_unit), `units` what a typed number may end with (unit_words)."""
        out = []
        for o in self.data.objectives:
            if o.name in self.undefined or not any(o.name in r for r in self.rows):
                continue
            if o.name not in self.objective_names:
                continue
            out.append({"name": o.name, "label": SHORT.get(o.name, o.label), "unit": value_unit(o.name, o.unit),
                        "units": unit_words(o.name, o.unit), "worst": o.worst, "maximize": o.maximize,
                        "log": bool(o.log)})
        return out

    def other_objectives(self) -> list[tuple[str, str]]:
        """The run's objectives beyond error, comm and the two ε (which every table has), in order, with their
        headers: the Pareto table's and the selection's further columns."""
        return [(o["name"], objective_label(o["name"], o["label"], o["maximize"])) for o in self.objectives()
                if o["name"] not in ("error", "comm", "eps", "eps_paper")]

    # ---------------------------------------------------------------- the page's data (for its script)
    def colour_options(self) -> list[tuple[str, str]]:
        opts = [("generation", "generation"), ("error", "error"), ("comm", COMM_LABEL), ("eps", "ε (accountant)"),
                ("eps_paper", "ε (paper)"), ("accuracy_global", "global accuracy")]
        opts += [(k, self.cols[k].label) for k in self.objective_names if k not in dict(opts)]
        return [o for o in opts if o[0] not in self.undefined] + [(g, f"gene {g}") for g in self.data.gene_names]


def planned_rounds(data: RunData) -> Optional[int]:
    """The rounds a full evaluation trains: --rounds (which overrides the problem file's), else the problem's."""
    s, p = data.settings, data.problem
    planned = s.rounds if s.rounds is not None else p.fixed.get("rounds")
    if planned is None and p.simulated:
        planned = p.sim_config(None).rounds
    return planned


def hv_space(data: RunData) -> tuple[str, str]:
    """(the space the run's hypervolume is measured in, its reference point) in words, as the search measures it
    (fedevo.searching.front_math): every objective of the run in order, log10 of a log one (ε when the search saw
    log ε), a maximised one negated — "(error, comm, log10 ε)", "(1.1, 1.1, 1.1)"."""
    from ..searching.front_math import HV_REF

    eps_log = data.meta.get("search_objectives", {}).get("eps_scale") == "log10"
    parts = []
    for o in data.objectives:
        lab = SHORT.get(o.name, o.label)
        log = eps_log if o.name in ("eps", "eps_paper") else bool(o.log)
        parts.append(("−" if o.maximize else "") + (f"log10 {lab}" if log else lab))
    ref = data.meta.get("hypervolume", {}).get("ref_point") if isinstance(data.meta.get("hypervolume"), dict) else None
    if not (isinstance(ref, list) and len(ref) == len(parts)):
        ref = [HV_REF] * len(parts)
    return "(" + ", ".join(parts) + ")", "(" + ", ".join(num(float(v)) for v in ref) + ")"
