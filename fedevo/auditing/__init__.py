"""Privacy auditing: an empirical lower bound on ε beside the accountant's upper bound (`fedevo audit`).

canaries.py (canary users: directions, inclusion, exposure), estimate.py (Steinke et al.'s one-run lower bound,
Andrew et al.'s Gaussian estimate), run.py (one configuration trained with canaries where its trust model's
observer looks), targets.py (a run's picks or a problem's configuration), report.py (audit.json, audit.html).
"""

from .run import AuditResult, audit_config

__all__ = ["AuditResult", "audit_config"]
