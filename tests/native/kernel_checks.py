"""Checks of the native kernels against torch, run on a loaded `fedevo.native.Kernels` (the default library, or
one built with other -march flags by test_build.py)."""

import torch


def _ptr(t):
    return 0 if t is None else t.data_ptr()


def check_fwd_f32(k, c=3, M=13, K=37, N=45, relu=True, idx=True):
    g = torch.Generator().manual_seed(M * K + N)
    A = torch.randn(2 * c * M + 5, K, generator=g)
    W, b = torch.randn(c, K, N, generator=g), torch.randn(c, 1, N, generator=g)
    rows = torch.randperm(A.shape[0], generator=g)[: c * M].view(c, M) if idx else None
    Z = torch.full((c, M, N), float("nan"))
    assert k.fwd_f32(A.data_ptr(), _ptr(rows), W.data_ptr(), b.data_ptr(), Z.data_ptr(), c, M, K, N, int(relu)) == 0
    X = A[rows] if idx else A[: c * M].view(c, M, K)
    ref = torch.baddbmm(b.double(), X.double(), W.double())
    torch.testing.assert_close(Z.double(), ref.relu() if relu else ref, atol=1e-4, rtol=1e-4)


def check_dgrad_f32(k, c=2, M=11, K=29, N=40, with_gb=True):
    g = torch.Generator().manual_seed(M + K * N)
    D, W, H = torch.randn(c, M, N, generator=g), torch.randn(c, K, N, generator=g), torch.randn(c, M, K, generator=g).relu()
    out, gb = torch.full((c, M, K), float("nan")), torch.full((c, 1, K), float("nan"))
    assert k.dgrad_f32(D.data_ptr(), W.data_ptr(), H.data_ptr(), out.data_ptr(), gb.data_ptr() if with_gb else 0,
                       c, M, K, N) == 0
    ref = torch.bmm(D.double(), W.double().transpose(1, 2)) * (H > 0)
    torch.testing.assert_close(out.double(), ref, atol=1e-4, rtol=1e-4)
    if with_gb:
        torch.testing.assert_close(gb.double(), ref.sum(1, keepdim=True), atol=1e-4, rtol=1e-4)


def check_wgrad_f32(k, c=3, M=17, K=33, N=41, update=True, masked=True, idx=True):
    g = torch.Generator().manual_seed(M * N + K)
    A = torch.randn(2 * c * M + 3, K, generator=g)
    D = torch.randn(c, M, N, generator=g)
    rows = torch.randperm(A.shape[0], generator=g)[: c * M].view(c, M) if idx else None
    X = A[rows] if idx else A[: c * M].view(c, M, K)
    grad = torch.bmm(X.double().transpose(1, 2), D.double())
    if not update:
        G = torch.full((c, K, N), float("nan"))
        assert k.wgrad_f32(A.data_ptr(), _ptr(rows), D.data_ptr(), G.data_ptr(), 0, 0, c, M, K, N) == 0
        torch.testing.assert_close(G.double(), grad, atol=1e-4, rtol=1e-4)
        return
    W0 = torch.randn(c, K, N, generator=g)
    mask = (torch.rand(K, N, generator=g) < 0.7) if masked else None
    scale = torch.randn(c, generator=g)
    W, m8 = W0.clone(), None if mask is None else mask.to(torch.uint8).contiguous()  # kept alive for the call
    assert k.wgrad_f32(A.data_ptr(), _ptr(rows), D.data_ptr(), W.data_ptr(), scale.data_ptr(), _ptr(m8),
                       c, M, K, N) == 0
    ref = W0.double() + scale.double().view(c, 1, 1) * grad * (1 if mask is None else mask)
    torch.testing.assert_close(W.double(), ref, atol=1e-4, rtol=1e-4)


def check_softmax_ce_f32(k, c=2, B=9, C=10):
    g = torch.Generator().manual_seed(B * C)
    z, y, w = torch.randn(c, B, C, generator=g) * 3, torch.randint(0, C, (c, B), generator=g), torch.rand(c, B, generator=g)
    out, gb = torch.full((c, B, C), float("nan")), torch.full((c, 1, C), float("nan"))
    k.softmax_ce_f32(z.data_ptr(), y.data_ptr(), w.data_ptr(), c, B, C, out.data_ptr(), gb.data_ptr())
    ref = (torch.softmax(z.double(), -1) - torch.nn.functional.one_hot(y, C)) * w.double().unsqueeze(-1)
    torch.testing.assert_close(out.double(), ref, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(gb.double(), ref.sum(1, keepdim=True), atol=1e-6, rtol=1e-5)


def check_pool_relu_f32(k, n=3, h=8, w=6):
    """relu(2×2 max-pool) equal to torch's to the bit; the index, where the output is > 0, is torch's (ties: the
    window's first value; odd sizes: the last row / column dropped)."""
    g = torch.Generator().manual_seed(n * h * w)
    x = torch.randn(n, h, w, generator=g)
    x[0, :2, :2] = 0.5  # a tie: torch picks the window's first value
    x[-1, -2:, -2:] = -1.0  # all negative: output 0
    out = torch.full((n, h // 2, w // 2), float("nan"))
    idx = torch.full((n, h // 2, w // 2), -1, dtype=torch.int64)
    k.pool_relu_f32(x.data_ptr(), n, h, w, out.data_ptr(), idx.data_ptr())
    ref, ref_idx = torch.nn.functional.max_pool2d_with_indices(x.relu().unsqueeze(0), 2)
    assert torch.equal(out, ref[0])
    live = out > 0
    assert torch.equal(idx[live], ref_idx[0][live])
    assert bool(((idx >= 0) & (idx < h * w)).all())


def _train_ref(x, rows, ys, ws, Ws, bs, masks, lr):
    """Plain masked SGD of one client through an MLP in float64 autograd: the reference for train_f32."""
    Ws = [W.double().clone().requires_grad_() for W in Ws]
    bs = [b.double().clone().requires_grad_() for b in bs]
    for r, y, w in zip(rows, ys, ws):
        h = x[r].double()
        for i, (W, b) in enumerate(zip(Ws, bs)):
            h = h @ W + b
            if i < len(Ws) - 1:
                h = h.relu()
        loss = (torch.nn.functional.cross_entropy(h, y, reduction="none") * w.double()).sum()
        gW = torch.autograd.grad(loss, Ws + bs)
        with torch.no_grad():
            for p, g, m in zip(Ws + bs, gW, masks + [None] * len(bs)):
                p -= lr * (g if m is None else g * m)
    return [t.detach() for t in Ws], [t.detach() for t in bs]


def check_train_f32(k, dims=(23, 17, 9, 5), c=3, used=(6, 6, 4, 6), lr=0.3, masked=True):
    """A chunk's plain local training in one call equals float64 autograd SGD client by client, and its result
    does not depend on how many clients it trains at a time (group) -- bit for bit."""
    import ctypes
    g = torch.Generator().manual_seed(sum(dims) + c)
    L, n = len(dims) - 1, 4 * c * max(used)
    x = torch.randn(n, dims[0], generator=g)
    Ws0 = [torch.randn(c, a, b, generator=g) / a ** 0.5 for a, b in zip(dims[:-1], dims[1:])]
    bs0 = [torch.randn(c, 1, b, generator=g) * 0.1 for b in dims[1:]]
    masks = [(torch.rand(a, b, generator=g) < 0.6).float() if masked and i % 2 == 0 else None
             for i, (a, b) in enumerate(zip(dims[:-1], dims[1:]))]
    Ws0 = [W * m if m is not None else W for W, m in zip(Ws0, masks)]
    rows = [torch.randint(0, n, (c, b), generator=g) for b in used]
    ys = [torch.randint(0, dims[-1], (c, b), generator=g) for b in used]
    ws = [torch.rand(c, b, generator=g) / b for b in used]
    ptrs = (lambda ts: (ctypes.c_void_p * len(ts))(*[0 if t is None else t.data_ptr() for t in ts]))
    m8 = [None if m is None else m.to(torch.uint8).contiguous() for m in masks]
    dims_t, used_t, scale = torch.tensor(dims), torch.tensor(used), torch.full((c,), -lr)
    results = []
    for group in (1, 2, c):
        Ws, bs = [W.clone() for W in Ws0], [b.clone() for b in bs0]
        assert k.train_f32(L, dims_t.data_ptr(), ptrs(Ws), ptrs(bs), ptrs(m8), x.data_ptr(), len(used), ptrs(rows),
                           ptrs(ys), ptrs(ws), used_t.data_ptr(), scale.data_ptr(), c, group) == 0
        results.append(Ws + bs)
    for other in results[1:]:
        assert all(torch.equal(a, b) for a, b in zip(results[0], other))
    for j in range(c):
        rW, rb = _train_ref(x, [r[j] for r in rows], [y[j] for y in ys], [w[j] for w in ws], [W[j] for W in Ws0],
                            [b[j, 0] for b in bs0], masks, lr)
        for got, ref in zip(results[0], rW + rb):
            torch.testing.assert_close(got[j].double().reshape(ref.shape), ref, atol=1e-5, rtol=1e-4)
        for got, m in zip(results[0], masks):  # inactive weights stay 0
            if m is not None:
                assert torch.equal(got[j] * (1 - m), torch.zeros_like(m))


def check_head_bf16(k, c=2, B=13, H=37, C=10):
    g = torch.Generator().manual_seed(c * B + H)
    dt = torch.bfloat16
    h = torch.randn(c, B, H, generator=g).relu().to(dt)
    W, b = torch.randn(c, H, C, generator=g) * 0.2, torch.randn(c, 1, C, generator=g)
    y, w = torch.randint(0, C, (c, B), generator=g), torch.full((c, B), 1.0 / B)
    w[-1, B // 2:] = 0
    gw, gb = torch.full((c, H, C), float("nan")), torch.full((c, 1, C), float("nan"))
    d = torch.full((c, B, H), float("nan")).to(dt)
    assert k.head_bf16(h.data_ptr(), W.data_ptr(), b.data_ptr(), y.data_ptr(), w.data_ptr(), c, B, H, C, gw.data_ptr(),
              gb.data_ptr(), d.data_ptr()) == 0
    z = torch.baddbmm(b.double(), h.double(), W.double())
    delta = torch.softmax(z, -1).scatter_add(2, y.unsqueeze(-1), -torch.ones(c, B, 1, dtype=torch.float64))
    delta *= w.unsqueeze(-1)
    tol = dict(atol=2e-2, rtol=2e-2)
    torch.testing.assert_close(gw.double(), torch.bmm(h.double().transpose(1, 2), delta), **tol)
    torch.testing.assert_close(gb.double(), delta.sum(1, keepdim=True), **tol)
    torch.testing.assert_close(d.double(), torch.bmm(delta, W.double().transpose(1, 2)), **tol)


def check_noise(k, n=5000):
    out = torch.empty(n)
    k.fill(out.data_ptr(), n, 123, 0, 1.0)
    assert abs(float(out.mean())) < 0.06 and abs(float(out.std()) - 1) < 0.05
    return out


def check_step_bf16(k, c=3, n=2500):
    g = torch.Generator().manual_seed(n)
    p0, gr = torch.randn(c, n, generator=g), torch.randn(c, n, generator=g).bfloat16()
    scale, mask = torch.randn(c, generator=g), (torch.rand(n, generator=g) < 0.5)
    p, low = p0.clone(), torch.empty(c, n, dtype=torch.bfloat16)
    m8 = mask.to(torch.uint8)
    k.step_bf16(p.data_ptr(), gr.data_ptr(), m8.data_ptr(), scale.data_ptr(), c, n, low.data_ptr(), 0, 0, 0.0, 0)
    ref = p0 + scale.view(c, 1) * gr.float() * mask
    torch.testing.assert_close(p, ref)
    assert torch.equal(low, ref.bfloat16())



def check_randperms(k, seed=2**35 + 9, sizes=(600, 0, 1, 2, 97), repeats=3):
    """perm.c's shuffles are torch.randperm's draws from torch.Generator().manual_seed(seed), client by client and
    repeat by repeat, applied to each client's items (bit for bit); a size out of range is refused (-1)."""
    import numpy as np

    items = np.arange(sum(sizes), dtype=np.int64) * 7 + 3
    out = np.full((len(sizes), repeats, max(sizes) + 2), -1, dtype=np.int64)
    n = np.asarray(sizes, dtype=np.int64)
    assert k.randperms(seed, items.ctypes.data, n.ctypes.data, len(n), repeats, out.shape[2], out.ctypes.data) == 0
    gen, start = torch.Generator().manual_seed(seed), 0
    for i, size in enumerate(sizes):
        for r in range(repeats):
            want = items[start:start + size][torch.randperm(size, generator=gen).numpy()]
            assert np.array_equal(out[i, r, :size], want) and (out[i, r, size:] == -1).all()
        start += size
    bad = np.asarray([3, -1], dtype=np.int64)
    assert k.randperms(seed, None, bad.ctypes.data, 2, 1, 3, out.ctypes.data) == -1


def _ddg_reference(x, inv_gamma, sigma, key):
    """ddg.c's algorithm in numpy, step by step: randomised rounding from the SplitMix64 stream (key, index), then
    Canonne-Kamath-Steinke discrete Laplace proposals in blocks of 256 from the second stream, accepted in order."""
    import numpy as np

    def mix64(z):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xbf58476d1ce4e5b9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94d049bb133111eb)
        return z ^ (z >> np.uint64(31))

    def unit(key, i):
        z = mix64(np.uint64(key) + i.astype(np.uint64) * np.uint64(0x9e3779b97f4a7c15))
        return (z >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
    n = len(x)
    y = x * inv_gamma
    lo = np.floor(y)
    out = lo.astype(np.int64) + (unit(key, np.arange(n)) < y - lo)
    t = np.floor(sigma) + 1.0
    c, kk = sigma * sigma / t, -1.0 / (2.0 * sigma * sigma)
    key2 = mix64(np.array([key ^ 0xd1b54a32d192ed03], dtype=np.uint64))[0]
    ctr, filled, j = 0, 0, np.arange(256)
    while filled < n:
        base = ctr + 3 * j
        u1, u2, u3 = 1.0 - unit(key2, base), 1.0 - unit(key2, base + 1), unit(key2, base + 2)
        prop = np.floor(-t * np.log(u1)) - np.floor(-t * np.log(u2))
        d = np.abs(prop) - c
        taken = prop[u3 < np.exp(kk * d * d)][:n - filled].astype(np.int64)
        out[filled:filled + len(taken)] += taken
        filled += len(taken)
        ctr += 3 * 256
    return out


def check_ddg_encode(k, n=3000, sigma=1.5, key=2**62 + 17):
    """ddg.c's encoding is its documented algorithm, number for number (`_ddg_reference`; the vectorised log and
    exp may round differently from numpy's by an ulp, which would flip a proposal with probability ~1e-16)."""
    import numpy as np

    x = np.random.default_rng(n).normal(size=n) * 0.03
    got = np.empty(n, dtype=np.int64)
    assert k.ddg_encode(x.ctypes.data, n, 250.0, sigma, key, got.ctypes.data) == 0
    assert np.array_equal(got, _ddg_reference(x, 250.0, sigma, key))
    assert k.ddg_encode(x.ctypes.data, n, 250.0, 0.0, key, got.ctypes.data) == -1


def run_all(k) -> None:
    """Every check at several shapes (odd widths: the kernels' partial-vector edges; N=27: a strip's second vector
    partial for 4-, 8- and 16-lane builds alike)."""
    for kw in ({}, dict(M=64, K=784, N=200), dict(M=1, K=1, N=1), dict(M=24, K=200, N=200, relu=False, idx=False),
               dict(M=7, K=19, N=27)):
        check_fwd_f32(k, **kw)
    for kw in ({}, dict(M=64, K=200, N=200), dict(M=1, K=3, N=5, with_gb=False), dict(M=7, K=300, N=17)):
        check_dgrad_f32(k, **kw)
    for kw in ({}, dict(M=64, K=784, N=200, masked=False), dict(update=False), dict(M=5, K=7, N=3, idx=False),
               dict(M=24, K=200, N=10), dict(M=9, K=11, N=27)):
        check_wgrad_f32(k, **kw)
    for kw in ({}, dict(B=64, C=10), dict(B=3, C=1), dict(B=5, C=100)):
        check_softmax_ce_f32(k, **kw)
    for kw in ({}, dict(dims=(784, 200, 10), c=2, used=(64, 24)), dict(dims=(7, 3), c=1, used=(1, 2), masked=False)):
        check_train_f32(k, **kw)
    for kw in ({}, dict(B=64, H=200, C=10), dict(C=3, H=16)):
        check_head_bf16(k, **kw)
    for kw in ({}, dict(n=64 * 32, h=28, w=28), dict(n=2, h=7, w=9), dict(n=1, h=2, w=3)):
        check_pool_relu_f32(k, **kw)
    check_noise(k)
    check_step_bf16(k)
    check_randperms(k)
    check_randperms(k, seed=0, sizes=(5000,), repeats=1)  # past one Mersenne Twister state (624 draws)
    for kw in ({}, dict(n=1, sigma=300.0, key=5), dict(n=10_000, sigma=40.0, key=0)):
        check_ddg_encode(k, **kw)
    bf = torch.zeros(2, 4, 6, dtype=torch.bfloat16)  # no AVX512-BF16: -1 (the caller uses torch); with it: 0
    assert k.linear_fwd_bf16(bf.data_ptr(), bf.data_ptr(), torch.zeros(2, 6).data_ptr(), bf.data_ptr(), 2, 4, 6, 6, 1) in (0, -1)
