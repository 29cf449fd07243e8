"""The masking graph of SecAgg+ (Bell, Bogdanov, Ghosh, Kairouz & Raykova, CCS 2020): each client masks with,
and Shamir-shares its secrets to, only its k neighbours instead of all n − 1 other clients.

The graph is a Harary graph H_{k,n} (k even: client at ring position i is joined to positions i ± 1 … i ± k/2
mod n) over a random permutation of the clients, drawn from a seed the server announces with the round's
public parameters (`RoundParams.graph_seed`), so every party derives the same graph and the server cannot
choose it adversarially after seeing keys. k ≥ n − 1 gives the complete graph, i.e. Bonawitz et al.'s protocol.

`auto_neighbours(n)` is the default degree for `neighbours="auto"`: k = 2·⌈log2 n⌉ (even), capped at n − 1.
`failure_bound` is the union bound on a round aborting because some neighbourhood kept fewer than t
survivors, with independent dropouts; docs/secagg_signds_adaptive.md discusses the choice.
"""

from __future__ import annotations

import math
import numbers
import random
from collections.abc import Sequence


def auto_neighbours(n: int) -> int:
    """k = 2·⌈log2 n⌉ (even), at least 2, capped at n − 1 (the complete graph)."""
    if n < 2:
        return max(0, n - 1)
    return min(n - 1, max(2, 2 * math.ceil(math.log2(n))))


def neighbourhood_threshold(theta: float, n: int, d: int | None) -> int:
    """Shamir threshold t for fraction θ: ⌈θ·n⌉ over the complete graph (d None), ⌈θ·(d + 1)⌉ capped at d
    over a neighbourhood (a dropped client's mask key must come from its d neighbours)."""
    if d is None:
        return min(n, max(1, math.ceil(theta * n - 1e-9)))
    return min(d, max(1, math.ceil(theta * (d + 1) - 1e-9)))


def min_degree(n: int, theta: float, dropout: float, target: float = 1e-3) -> int | None:
    """The smallest even degree d ≥ auto_neighbours(n) whose abort bound `failure_bound(n, d, t, dropout)` is at
    most `target` with t = neighbourhood_threshold(θ, n, d); None when only the complete graph meets it."""
    for d in range(auto_neighbours(n) + auto_neighbours(n) % 2, n - 1, 2):
        if failure_bound(n, d, neighbourhood_threshold(theta, n, d), dropout) <= target:
            return d
    return None


def check_neighbours(value) -> None:
    """Raise ValueError unless `value` is None (complete graph), "auto", or an even int ≥ 2."""
    if value is None or value == "auto":
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 2 or value % 2:
        raise ValueError(f"neighbours must be None, 'auto' or an even integer >= 2, got {value!r}")


def degree(neighbours, n: int) -> int:
    """The degree used for a cohort of n: None → n − 1; "auto" → auto_neighbours(n); k → min(k, n − 1)."""
    if neighbours is None:
        return max(0, n - 1)
    if neighbours == "auto":
        return auto_neighbours(n)
    return min(int(neighbours), max(0, n - 1))


def harary(clients: Sequence[int], k: int, seed: int) -> dict[int, frozenset[int]]:
    """Neighbour sets of a random k-regular Harary graph on `clients` (k even and < n − 1; k ≥ n − 1 gives
    the complete graph). The same (clients, k, seed) always gives the same graph."""
    ids = sorted(clients)
    n = len(ids)
    if k >= n - 1:
        return {c: frozenset(ids) - {c} for c in ids}
    if k < 2 or k % 2:
        raise ValueError(f"a Harary graph below the complete graph needs an even degree >= 2, got {k}")
    ring = random.Random(int(seed)).sample(ids, n)
    out = {}
    for i, c in enumerate(ring):
        out[c] = frozenset(ring[(i + j) % n] for j in range(-k // 2, k // 2 + 1) if j)
    return out


def shortfalls(graph: dict[int, frozenset[int]], survivors, dropped, t: int) -> list[tuple[int, int]]:
    """(client, survivors left) for every neighbourhood below the threshold t: a survivor whose closed
    neighbourhood (itself and its neighbours) keeps < t survivors, or a dropped client with at least one but
    fewer than t surviving neighbours (with none, no survivor masked with it and nothing must be recovered)."""
    surv = set(survivors)
    out = []
    for u in list(survivors) + list(dropped):
        near = len(graph[u] & surv) + (u in surv)
        if 0 < near < t:
            out.append((u, near))
    return out


def connected(nodes, graph: dict[int, frozenset[int]]) -> bool:
    """Whether the subgraph of `graph` induced on `nodes` is connected (True for no or one node). If the
    surviving clients split into components, unmasking would reveal each component's sum separately."""
    nodes = set(nodes)
    if len(nodes) <= 1:
        return True
    start = next(iter(nodes))
    seen, todo = {start}, [start]
    while todo:
        for v in graph[todo.pop()]:
            if v in nodes and v not in seen:
                seen.add(v)
                todo.append(v)
    return len(seen) == len(nodes)


def failure_bound(n: int, k: int, t: int, dropout: float) -> float:
    """Union bound on P[the round aborts because some neighbourhood kept fewer than t survivors] when each
    client drops independently with probability `dropout`. A dropped client's mask key needs t surviving
    neighbours among its k; a survivor's self-mask seed needs t among its k neighbours and itself, which is
    at least as likely. So P[abort] ≤ n · P[Binomial(k, 1 − dropout) < t]."""
    from scipy import stats

    if not 0 <= dropout <= 1:
        raise ValueError("dropout must be in [0, 1]")
    return min(1.0, n * float(stats.binom.cdf(t - 1, k, 1 - dropout)))


__all__ = ["auto_neighbours", "neighbourhood_threshold", "min_degree", "check_neighbours", "degree", "harary",
           "shortfalls", "connected", "failure_bound"]
