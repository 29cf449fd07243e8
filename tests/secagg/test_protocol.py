"""The Bonawitz protocol end to end: exact sums under dropouts, uniformity of a masked upload, and a server
that never sees an unmasked update."""

import ast
import random
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import fedevo.secagg.server as server_mod
from fedevo.secagg.masking import Cohort
from fedevo.secagg.protocol import MaskedUpload, RoundParams, SecAggAbort
from fedevo.secagg.quantize import dequantize, fixed_point, quantize
from fedevo.secagg.server import SecAggServer


def setup_round(n=10, length=500, threshold=5, bits=32, seed=0, keep=False, ids=None):
    ids = tuple(ids or range(3, 3 + 2 * n, 2))  # non-contiguous client ids
    p = RoundParams(round=7, clients=ids, threshold=threshold, length=length, bits=bits)
    cohort, server = Cohort(p, random.Random(seed)), SecAggServer(p, keep_uploads=keep)
    cohort.setup(server)
    return p, cohort, server


@pytest.mark.parametrize("bits", [32, 64])
@pytest.mark.parametrize("lost_fraction", [0.0, 0.3, 0.5])
def test_sum_is_exact_under_dropouts(lost_fraction, bits):
    n, length = 10, 500
    p, cohort, server = setup_round(n=n, length=length, threshold=5, bits=bits)
    rng = np.random.default_rng(1)
    lost = set(rng.choice(p.clients, size=int(lost_fraction * n), replace=False).tolist())
    survivors = [c for c in p.clients if c not in lost]
    fp = fixed_point(bits=bits, bound=2.0, clients=n)
    x = {c: rng.uniform(-2, 2, size=length) for c in p.clients}
    cohort.prepare(survivors)
    for c in survivors:
        server.receive(cohort.mask(c, quantize(x[c], fp)[0]))
    surv, dropped = server.unmask_request()
    assert list(surv) == survivors and set(dropped) == lost
    total = dequantize(server.finish(cohort.unmask(surv, dropped)), fp)
    plain = sum(x[c] for c in survivors)
    assert np.abs(total - plain).max() <= len(survivors) * fp.step / 2 + 1e-9
    assert server.reconstructed == {"self_mask": len(survivors), "mask_key": len(lost)}


def test_cohort_matches_clients_run_one_by_one():
    p, cohort, _ = setup_round(n=5, length=64, threshold=3)
    cohort.prepare(p.clients[:4])
    enc = np.arange(64, dtype=np.uint32)
    for c in p.clients[:4]:
        assert np.array_equal(cohort.clients[c].mask(enc).data, cohort.mask(c, enc).data)


def test_masked_upload_is_uniform_and_independent_of_the_update():
    """Two very different updates (all zeros vs. the largest encodable values) masked in two rounds: each
    masked vector is uniform over Z_2^32 (KS and χ² on the top byte) and the two are indistinguishable."""
    length = 20000
    fp = fixed_point(bits=32, bound=1.0, clients=3)
    ups = []
    for seed, x in ((11, np.zeros(length)), (12, np.full(length, 1.0))):
        p, cohort, _ = setup_round(n=3, length=length, threshold=2, seed=seed)
        cohort.prepare(p.clients)
        ups.append(cohort.mask(p.clients[0], quantize(x, fp)[0]).data.astype(np.float64) / 2**32)
    for u in ups:
        assert stats.kstest(u, "uniform").pvalue > 1e-3
        counts = np.bincount((u * 256).astype(int), minlength=256)
        assert stats.chisquare(counts).pvalue > 1e-3
    assert stats.ks_2samp(ups[0], ups[1]).pvalue > 1e-3
    # ... while the unmasked encodings are trivially told apart
    assert quantize(np.zeros(3), fp)[0].tolist() != quantize(np.ones(3), fp)[0].tolist()


def test_one_coordinate_across_fresh_rounds_is_uniform():
    """The same coordinate of client 0's upload over 300 independent rounds, for x = 0 and x = 2^31."""
    tops = {0: [], 2**31: []}
    for r in range(300):
        for val in tops:
            p, cohort, _ = setup_round(n=2, length=1, threshold=1, seed=1000 * r + (val > 0))
            cohort.prepare(p.clients)
            tops[val].append(int(cohort.mask(p.clients[0], np.array([val], dtype=np.uint32)).data[0]) >> 28)
    for v in tops.values():
        assert stats.chisquare(np.bincount(v, minlength=16)).pvalue > 1e-3


def test_too_few_survivors_abort():
    p, cohort, server = setup_round(n=6, length=8, threshold=4)
    cohort.prepare(p.clients[:3])
    for c in p.clients[:3]:
        server.receive(cohort.mask(c, np.zeros(8, dtype=np.uint32)))
    with pytest.raises(SecAggAbort):
        server.unmask_request()


def test_client_never_reveals_both_shares_of_one_client():
    p, cohort, _ = setup_round(n=4, length=8, threshold=2)
    c0 = cohort.clients[p.clients[0]]
    with pytest.raises(ValueError, match="disjoint"):
        c0.unmask(p.clients[:3], p.clients[2:])
    c0.unmask(p.clients[:3], p.clients[3:])
    with pytest.raises(ValueError, match="already answered"):
        c0.unmask(p.clients[:2], p.clients[2:])


def test_filtered_subset_is_unmasked_like_dropouts():
    p, cohort, server = setup_round(n=6, length=50, threshold=3, keep=True)
    fp = fixed_point(bits=32, bound=1.0, clients=6)
    x = {c: np.full(50, 0.01 * (i + 1)) for i, c in enumerate(p.clients)}
    cohort.prepare(p.clients)
    for c in p.clients:
        server.receive(cohort.mask(c, quantize(x[c], fp)[0]))
    chosen = p.clients[1:5]
    surv, dropped = server.unmask_request(chosen)
    total = dequantize(server.finish(cohort.unmask(surv, dropped)), fp)
    assert np.allclose(total, sum(x[c] for c in chosen), atol=4 * fp.step)


# ---------------------------------------------------------------- the server cannot see unmasked updates
def test_server_module_imports_no_client_side_and_no_torch():
    tree = ast.parse(Path(server_mod.__file__).read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names.add(("." * node.level) + (node.module or ""))
    assert names <= {"__future__", "collections.abc", "numpy", "cryptography.hazmat.primitives.asymmetric.x25519",
                     ".", ".graph", ".prg", ".protocol"}, names
    assert not any("torch" in n or "masking" in n or "quantize" in n for n in names)


def test_server_accepts_only_masked_uploads():
    torch = pytest.importorskip("torch")
    p, cohort, server = setup_round(n=3, length=4, threshold=2)
    for bad in (np.zeros(4), torch.zeros(4), np.zeros(4, dtype=np.int64), [0, 0, 0, 0]):
        with pytest.raises(TypeError):
            server.receive(bad)
        with pytest.raises(TypeError):
            MaskedUpload(p.clients[0], bad)
    cohort.prepare(p.clients)
    up = cohort.mask(p.clients[0], np.zeros(4, dtype=np.uint32))
    with pytest.raises(ValueError):
        up.data[0] = 1  # read-only once handed over
    server.receive(up)
    arrays = [v for v in vars(server).values() if isinstance(v, np.ndarray)]
    arrays += [v for d in vars(server).values() if isinstance(d, dict) for v in d.values() if isinstance(v, np.ndarray)]
    assert arrays and all(a.dtype.kind == "u" for a in arrays)
