"""The comparison algorithms of seed 000 (ULDP-FED) Table 2, as named privacy settings.

D = clip decay (β > 0, taken from the genes/params), S/C = recall with sign/cosine similarity (eq. 11/13).
A preset overrides only the keys it names; β and τ come from the genes or --params.
"""

from __future__ import annotations

PRESETS: dict[str, dict] = {
    "fedavg": {"mechanism": "none"},
    "dp-fedavg": {"mechanism": "update", "beta": 0.0, "recall": False},
    "ddp-fedavg": {"mechanism": "update", "recall": False},
    "sdp-fedavg": {"mechanism": "update", "beta": 0.0, "recall": True, "similarity": "sign"},
    "cdp-fedavg": {"mechanism": "update", "beta": 0.0, "recall": True, "similarity": "cosine"},
    "dsdp-fedavg": {"mechanism": "update", "recall": True, "similarity": "sign"},
    "dcdp-fedavg": {"mechanism": "update", "recall": True, "similarity": "cosine"},
}
