"""A reload a notebook takes (importlib.reload of a module beside a user's file, fedevo.plugins) reaches the process
that runs evaluations under a time limit (containment's child, started once and kept): it held the old module."""

from __future__ import annotations

import importlib
import os
import sys

from tests.test_plugins import _model_project


def test_a_reload_taken_reaches_the_time_limits_child(tmp_path, monkeypatch):
    """review17 F11: with eval_timeout, evaluate and search ran the child that had imported the model file and its
    helper before the edit: Ω stayed the old model's after importlib.reload while the run recorded the new text."""
    import fedevo
    from fedevo.searching.containment import close_child

    helper = f"width_child_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    project = _model_project(tmp_path, helper)
    monkeypatch.syspath_prepend(str(project))
    try:
        omega = fedevo.evaluate(fedevo.Problem.from_file(str(project / "p.toml")), rounds=1, eval_timeout=120).omega
        (project / f"{helper}.py").write_text("HIDDEN = 128\n")
        importlib.reload(sys.modules[helper])
        problem = fedevo.Problem.from_file(str(project / "p.toml"))
        bigger = fedevo.evaluate(problem, rounds=1).omega
        assert bigger > omega
        assert fedevo.evaluate(problem, rounds=1, eval_timeout=120).omega == bigger
    finally:
        close_child()
        sys.modules.pop(helper, None)
