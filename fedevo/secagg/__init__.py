"""Secure aggregation with pairwise masks (Bonawitz et al. 2017; seed 002 "基于MPC的安全聚合"), over the complete
graph or, as SecAgg+ (Bell et al. 2020), over a sparse random graph.

- `protocol.py`  the messages (MaskedUpload, encrypted shares, unmasking shares) and the per-client cost
- `prg.py`       X25519 + HKDF key agreement, AES-256-CTR mask expansion over Z_{2^k}
- `graph.py`     SecAgg+ (Bell et al. 2020): the random d-regular masking graph, its degree and abort rules
- `shamir.py`    t-out-of-n Shamir sharing of the mask keys and self-mask seeds (dropout recovery)
- `quantize.py`  fixed-point encoding so the modular sum is exact
- `masking.py`   client side (SecAggClient; Cohort simulates a round's clients together)
- `server.py`    server side: sees only masked vectors, unmasks the sum
- `aggregator.py` the simulator's drop-in for FedAvg's weighted mean

See docs/secagg_signds_adaptive.md.
"""
