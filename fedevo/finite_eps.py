"""Which ε objectives a problem can make finite: a search whose every evaluation has ε = ∞ (no privacy mechanism,
and no gene that picks one) or an undefined ``eps_paper`` (the paper's closed form exists for local trust only)
would search an objective that is the same worst value for everyone — its axis constant, its hypervolume factor
constant, NSGA-III's reference directions spent on it. Such an objective leaves the problem's default list with a
one-line note; named in the problem's ``objectives`` or bound by ``[constraints]``, it is refused in one line.

Only for fedevo's simulator: a problem's own evaluator (or ``--evaluator``) reports its own ε."""

from __future__ import annotations

import itertools
from typing import Any, Optional

from .errors import FedevoError

PRIVACY_GENES = ("mechanism", "preset", "trust")  # the choice genes that can change a configuration's privacy


def _reachable(problem) -> set[tuple[str, str]]:
    """(mechanism, trust) of every configuration the problem's privacy genes can give (the other genes at their
    defaults); the combinations that build no configuration are left out (they fail as evaluations)."""
    genes = [g for g in problem.genes if g.name in PRIVACY_GENES and g.type == "choice"]
    out = set()
    for values in itertools.product(*(g.choices for g in genes)):
        try:
            pc = problem.sim_config(dict(zip((g.name for g in genes), values))).privacy
        except FedevoError:
            continue
        out.add((pc.mechanism, pc.trust))
    return out


def _paper_undefined(spec, trust: str) -> bool:
    """The paper's closed form (eps_paper) is NaN: no privacy, or fedevo's own central / distributed accounting."""
    ref = spec.runtime.get(trust)
    return not spec.private or (isinstance(ref, str) and ref.split(":")[0] in ("central", "distributed"))


def never_finite(problem) -> dict[str, str]:
    """{objective: why} for ``eps`` and ``eps_paper`` where no configuration of this simulated problem gives a finite
    value; {} for a problem its own evaluator trains, or whose privacy settings build no configuration."""
    if not problem.simulated:
        return {}
    from .privacy import registry

    pairs = _reachable(problem)
    if not pairs:
        return {}
    mechs = sorted({m for m, _ in pairs})
    out = {}
    if not any(registry.mechanism(m).private for m in mechs):
        why = (f"mechanism {mechs[0]!r} gives no privacy: ε = ∞ in every evaluation" if len(mechs) == 1 else
               f"mechanisms {', '.join(map(repr, mechs))} give no privacy: ε = ∞ in every evaluation")
        return {"eps": why, "eps_paper": why}
    if all(_paper_undefined(registry.mechanism(m), t) for m, t in pairs):
        trusts = sorted({t for _, t in pairs})
        out["eps_paper"] = (f"eps_paper (the paper's closed form, for local trust) is undefined under trust "
                            f"{', '.join(map(repr, trusts))}: NaN in every evaluation")
    return out


def search_objectives(problem, objectives, *, simulator: bool) -> tuple[Any, Optional[str]]:
    """The objectives a new search of `problem` searches (an ObjectiveSet) and the note to print, or None: its
    default list without an ε it cannot make finite. FedevoError (one line) where the problem file names one (its
    ``objectives`` list, or ``eps_objective = "eps_paper"``) or ``[constraints]`` bounds one. `simulator`: fedevo's simulator evaluates (another
    evaluator reports its own ε: nothing is changed)."""
    from .objectives import ObjectiveSet

    never = never_finite(problem) if simulator else {}
    hit = [o.name for o in objectives if o.name in never]
    if not hit:
        return objectives, None
    name = hit[0]
    bound = next((k for k in problem.constraints if k == name or (k == "eps" and name == "eps_paper"
                                                                   and "eps" not in objectives.names)), None)
    fix = ("set [privacy] mechanism to one that gives privacy, or make it a gene" if name == "eps" or
           "no privacy" in never[name] else "use trust = \"local\", or eps_objective = \"eps\"")
    if bound is not None:
        raise FedevoError(f"problem {problem.name!r}: [constraints] {bound}: {never[name]}, so no evaluation could "
                          f"meet it; remove the bound, or {fix}")
    if problem.objectives or name == "eps_paper":  # named: in the list, or by eps_objective (default "eps")
        where = "objectives" if problem.objectives else "eps_objective"
        raise FedevoError(f"problem {problem.name!r}: {where} {name!r}: {never[name]}; "
                          + (f"remove it from objectives, or {fix}" if problem.objectives else fix))
    kept = ObjectiveSet(tuple(o for o in objectives if o.name not in never))
    return kept, (f"problem {problem.name!r}: {never[name]}, so the search leaves {name} out of its objectives "
                  f"(searches {', '.join(kept.names)})")


__all__ = ["PRIVACY_GENES", "never_finite", "search_objectives"]
