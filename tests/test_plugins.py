"""The user's code named as `python:FILE:FUNC` (fedevo/plugins.py): a module beside the file is found however fedevo
was started, and goes by value to another process with the file's functions."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers import REPO

MODELS = """
from torch import nn
from layers import block


def make_model(*, input_shape, num_classes, hidden=16):
    n = 1
    for d in input_shape:
        n *= d
    return nn.Sequential(nn.Flatten(), block(n, hidden), nn.Linear(hidden, num_classes))
"""
LAYERS = """
from torch import nn


def block(a, b):
    return nn.Sequential(nn.Linear(a, b), nn.ReLU())
"""
PROBLEM = """
name = "sib"
dataset = "digits"
model = "python:models.py:make_model"
eps_objective = "eps"
[data]
clients = 4
[train]
rounds = 1
epochs = 1
batch_size = 16
[privacy]
mechanism = "none"
[genes]
lr = { type = "real", low = 0.01, high = 0.3, default = 0.1 }
"""


def _files(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "models.py").write_text(MODELS)
    (project / "layers.py").write_text(LAYERS)
    (project / "p.toml").write_text(PROBLEM)
    return project


def test_the_fedevo_command_finds_a_module_beside_the_model_file_from_another_folder(tmp_path):
    project = _files(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO), "FEDEVO_DEVICE": "cpu"}
    r = subprocess.run([sys.executable, "-c", "from fedevo.cli import main; main()", "evaluate", "--problem",
                        str(project / "p.toml"), "--json"],
                       cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert '"status": "ok"' in r.stdout


def test_a_module_beside_the_file_goes_by_value_with_its_functions(tmp_path):
    """A Ray worker unpickles the factory's model without the project folder on its path."""
    project = _files(tmp_path)
    script = textwrap.dedent(f"""
        import sys, cloudpickle
        from fedevo.plugins import load_callable
        make = load_callable("python:{project / 'models.py'}:make_model")
        sys.stdout.buffer.write(cloudpickle.dumps(make))
    """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    blob = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                          timeout=300, check=True).stdout
    load = ("import sys, pickle; make = pickle.loads(sys.stdin.buffer.read()); "
            "print(type(make(input_shape=(8, 8), num_classes=10)[1]).__name__)")
    r = subprocess.run([sys.executable, "-c", load], cwd=tmp_path, input=blob, capture_output=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": ""})
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert r.stdout.decode().strip() == "Sequential"


def test_the_files_folder_is_on_the_import_path_only_while_it_is_imported(tmp_path, monkeypatch):
    """The folder goes back off sys.path once the file is imported (where fedevo put it there: one on it already
    stays); the module beside it, imported then, still serves the file's functions; a file that fails to import
    leaves sys.path as it was too."""
    from fedevo.errors import FedevoError
    from fedevo.plugins import load_callable

    helper = f"helper_{os.getpid()}_{abs(hash(str(tmp_path)))}"  # a name no other test's sys.modules holds
    project = tmp_path / "project"
    project.mkdir()
    (project / f"{helper}.py").write_text("def double(x):\n    return 2 * x\n")
    (project / "code.py").write_text(f"from {helper} import double\n\ndef f(x):\n    return double(x) + 1\n")
    (project / "bad.py").write_text(f"import {helper}\nraise ValueError('no')\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, helper, raising=False)
    before = list(sys.path)
    assert load_callable(f"python:{project / 'code.py'}:f", kind="evaluator")(20) == 41
    assert sys.path == before and helper in sys.modules
    with pytest.raises(FedevoError, match=r"failed to import: ValueError: no"):
        load_callable(f"python:{project / 'bad.py'}:f", kind="evaluator")
    assert sys.path == before
    sys.path.append(str(project))  # already there: left there
    (project / "again.py").write_text(f"from {helper} import double\n\ndef f(x):\n    return double(x)\n")
    assert load_callable(f"python:{project / 'again.py'}:f", kind="evaluator")(3) == 6
    assert sys.path == before + [str(project)]
    sys.modules.pop(helper)


def test_the_modules_a_file_imports_from_beside_it_are_named_whoever_imported_them_first(tmp_path, monkeypatch):
    """imported_beside (what run.json's `inputs` fingerprints with the file): the modules beside it that its import
    brought in, including one the user's script (or another file of theirs) imported before it, and those they
    import in turn; not a module beside it that the file does not use."""
    import importlib

    from fedevo.plugins import imported_beside, load_callable

    tag = f"{os.getpid()}_{abs(hash(str(tmp_path)))}"
    first, second, deep, unused = (f"{w}_{tag}" for w in ("first", "second", "deep", "unused"))
    project = tmp_path / "project"
    project.mkdir()
    (project / f"{deep}.py").write_text("def k():\n    return 1\n")
    (project / f"{first}.py").write_text(f"from {deep} import k\n\ndef one():\n    return k()\n")
    (project / f"{second}.py").write_text("def two():\n    return 2\n")
    (project / f"{unused}.py").write_text("")
    (project / "code.py").write_text(f"import {first}\nfrom {second} import two\n\n"
                                     f"def f():\n    return {first}.one() + two()\n")
    monkeypatch.setattr(sys, "path", [*sys.path, str(project)])
    for name in (first, second, deep, unused):
        monkeypatch.delitem(sys.modules, name, raising=False)
    importlib.import_module(first)  # the user's script imported two of them before fedevo loads the file
    importlib.import_module(unused)
    assert load_callable(f"python:{project / 'code.py'}:f", kind="evaluator")() == 3
    assert imported_beside(str(project / "code.py")) == tuple(sorted(
        (project / f"{m}.py").resolve() for m in (deep, first, second)))
    for name in (first, second, deep, unused):
        sys.modules.pop(name, None)


def _model_project(tmp_path, helper: str):
    """A problem whose model file imports `helper` from beside it (its hidden width: HIDDEN there)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / f"{helper}.py").write_text("HIDDEN = 16\n")
    (project / "models.py").write_text(MODELS.replace("from layers import block", f"from {helper} import HIDDEN")
                                       .replace("hidden=16", "hidden=None").replace(
        "return nn.Sequential(nn.Flatten(), block(n, hidden), nn.Linear(hidden, num_classes))",
        "hidden = hidden or HIDDEN\n    return nn.Sequential(nn.Flatten(), nn.Linear(n, hidden), nn.ReLU(), "
        "nn.Linear(hidden, num_classes))"))
    (project / "p.toml").write_text(PROBLEM)
    return project


def test_a_model_file_edited_after_this_process_imported_it_is_refused_not_trained_as_it_was(tmp_path):
    """A notebook edits its model file and evaluates again: Python never imports a module twice, so the process
    would train the old model (it did, silently: fedevo.evaluate gave the old Ω); the problem made before the edit
    and the problem made again both say so in one line, and the file's old text back is welcome again."""
    helper = f"width_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    project = _model_project(tmp_path, helper)
    try:
        _edit_and_evaluate(project)
    finally:
        sys.modules.pop(helper, None)


def _edit_and_evaluate(project):
    import fedevo
    from fedevo.errors import FedevoError

    problem = fedevo.Problem.from_file(str(project / "p.toml"))
    omega = fedevo.evaluate(problem, rounds=1).omega
    text = (project / "models.py").read_text()
    (project / "models.py").write_text(text.replace("hidden or HIDDEN", "hidden or 2 * HIDDEN"))
    stale = r"models\.py \(model file\) changed since this process imported it: .*start a new Python process"
    with pytest.raises(FedevoError, match=stale):
        fedevo.evaluate(problem, rounds=1)
    with pytest.raises(FedevoError, match=stale):
        fedevo.Problem.from_file(str(project / "p.toml"))
    (project / "models.py").write_text(text)
    assert fedevo.evaluate(fedevo.Problem.from_file(str(project / "p.toml")), rounds=1).omega == omega


def test_a_module_beside_the_model_file_edited_since_its_import_is_refused_by_a_search(tmp_path):
    """The module beside the model file that its import brought in is held to the text imported as the file is: a
    second search in the process ran the old module while run.json recorded the new one (a resume in a new process
    would then mix the two models); now one line, nothing written."""
    import fedevo
    from fedevo.errors import FedevoError

    helper = f"width_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    project = _model_project(tmp_path, helper)
    try:
        fedevo.search(str(project / "p.toml"), optimizer="random", pop=2, gen=1, workers=0, out=tmp_path / "A",
                      page=False)
        (project / f"{helper}.py").write_text("HIDDEN = 32\n")
        with pytest.raises(FedevoError, match=rf"{helper}\.py \(imported by model file .*models\.py'\) changed "
                                              "since this process imported it"):
            fedevo.search(str(project / "p.toml"), optimizer="random", pop=2, gen=1, workers=0,
                          out=tmp_path / "B", page=False)
        assert not (tmp_path / "B").exists()
    finally:
        sys.modules.pop(helper, None)


def test_a_module_beside_the_model_file_reloaded_after_its_edit_is_what_a_new_run_trains(tmp_path, monkeypatch):
    """A notebook edits the module its model file imports from beside it and `importlib.reload`s it, then
    evaluates or starts a new search: refused ('changed since this process imported it ... restart the kernel')
    though the process holds the new text. The reload is taken now: the model file is imported anew (the names it
    took from the module are the reloaded ones), the evaluation trains and the new run records the new text; an
    edit not reloaded is refused as before, and so is a resume of the run made before the edit."""
    import hashlib
    import importlib
    import json

    import fedevo
    from fedevo.errors import FedevoError

    helper = f"width_{os.getpid()}_{abs(hash(str(tmp_path)))}"
    project = _model_project(tmp_path, helper)
    monkeypatch.syspath_prepend(str(project))  # the notebook's folder, where the reload finds the module
    stale = rf"{helper}\.py \(imported by model file .*models\.py'\) changed since this process imported it"
    try:
        problem = fedevo.Problem.from_file(str(project / "p.toml"))
        omega = fedevo.evaluate(problem, rounds=1).omega
        fedevo.search(str(project / "p.toml"), optimizer="random", pop=2, gen=1, workers=0, out=tmp_path / "A",
                      page=False)
        (project / f"{helper}.py").write_text("HIDDEN = 128\n")
        with pytest.raises(FedevoError, match=stale + rf": this process would run the old code; importlib.reload\("
                                                      rf"{helper}\) it, or start a new Python process"):
            fedevo.evaluate(problem, rounds=1)
        importlib.reload(sys.modules[helper])
        assert fedevo.evaluate(fedevo.Problem.from_file(str(project / "p.toml")), rounds=1).omega > omega
        assert fedevo.evaluate(problem, rounds=1).omega > omega  # (made before: it names the file, as it is now)
        fedevo.search(str(project / "p.toml"), optimizer="random", pop=2, gen=1, workers=0, out=tmp_path / "B",
                      page=False)
        (entry,) = [e for e in json.loads((tmp_path / "B" / "run.json").read_text())["inputs"]
                    if e["path"].endswith(f"{helper}.py")]
        assert entry["sha256"] == hashlib.sha256(b"HIDDEN = 128\n").hexdigest()
        with pytest.raises(FedevoError, match=rf"{helper}\.py \(imported by model\) changed since run"):
            fedevo.resume(tmp_path / "A", gen=2, workers=0, page=False)
        (project / f"{helper}.py").write_text("HIDDEN = 8\n")  # edited again, not reloaded: refused
        with pytest.raises(FedevoError, match=stale):
            fedevo.search(str(project / "p.toml"), optimizer="random", pop=2, gen=1, workers=0,
                          out=tmp_path / "C", page=False)
        assert not (tmp_path / "C").exists()
        # a Ray worker that imported the module before (a session the caller keeps across searches; it was not
        # reloaded there) in a search whose run.json records the new text: the search stops, resumable, rather than
        # run the old code beside the new; a worker holding the recorded text goes on (the file saved since or not)
        import torch

        from fedevo.searching.evaluator import SIMULATOR
        from fedevo.searching.runner import _ray_task

        task = (problem, SIMULATOR, {"lr": 0.1}, 0, {"rounds": 1}, torch.get_num_threads())
        path = str(project / f"{helper}.py")
        kind, msg, _ = _ray_task(*task, code={path: hashlib.sha256(b"HIDDEN = 8\n").hexdigest()})
        assert kind == "abort" and msg == (f"{path} changed since a worker of the Ray session imported it: it would "
                                           "run the old code beside the text the run records; shut that Ray session "
                                           "down (ray.shutdown()) so that its workers import it anew, and go on "
                                           "(where the session is fedevo's own, the file was saved while the search "
                                           "ran and a worker started since imported it: put its text back and "
                                           "resume)")
        kind, _, _ = _ray_task(*task, code={path: entry["sha256"]})  # (B's record: the text this process holds)
        assert kind == "ok"
    finally:
        sys.modules.pop(helper, None)


def test_a_module_reloaded_that_the_model_file_imports_through_another_is_what_a_new_run_trains(tmp_path,
                                                                                                monkeypatch):
    """models.py takes `block` from a layers module beside it, which takes HIDDEN from a widths module; the notebook
    edits widths and reloads it. The model file was imported anew, but layers, still in sys.modules, kept the old
    HIDDEN: the evaluation trained the old model while the new run's run.json recorded the new widths (review17
    F3). Every module beside the file that its import brought in runs again now, in place, at its new import."""
    import hashlib
    import importlib
    import json

    import fedevo

    tag = f"{os.getpid()}_{abs(hash(str(tmp_path)))}"
    layers, widths = f"layers_{tag}", f"widths_{tag}"
    project = tmp_path / "project"
    project.mkdir()
    (project / f"{widths}.py").write_text("HIDDEN = 16\n")
    (project / f"{layers}.py").write_text(f"from torch import nn\nfrom {widths} import HIDDEN\n\n\n"
                                          "def block(a, b):\n    return nn.Sequential(nn.Linear(a, HIDDEN), nn.ReLU(), "
                                          "nn.Linear(HIDDEN, b))\n")
    (project / "models.py").write_text(MODELS.replace("from layers import block", f"from {layers} import block")
                                       .replace("block(n, hidden), nn.Linear(hidden, num_classes)",
                                                "block(n, num_classes)"))
    (project / "p.toml").write_text(PROBLEM)
    monkeypatch.syspath_prepend(str(project))  # the notebook's folder, where the reload finds the module
    try:
        problem = fedevo.Problem.from_file(str(project / "p.toml"))
        omega = fedevo.evaluate(problem, rounds=1).omega
        notebooks_layers = importlib.import_module(layers)
        (project / f"{widths}.py").write_text("HIDDEN = 128\n")
        importlib.reload(sys.modules[widths])
        wider = fedevo.evaluate(problem, rounds=1).omega
        assert wider > 4 * omega  # (the first Linear is most of the model: 64 inputs x 16 -> x 128)
        b = fedevo.search(str(project / "p.toml"), optimizer="random", pop=2, gen=1, workers=0,
                          out=tmp_path / "B", page=False)
        assert {r["omega"] for r in b.evaluations} == {wider}
        (entry,) = [e for e in json.loads((tmp_path / "B" / "run.json").read_text())["inputs"]
                    if e["path"].endswith(f"{widths}.py")]
        assert entry["sha256"] == hashlib.sha256(b"HIDDEN = 128\n").hexdigest()
        assert sys.modules[layers] is notebooks_layers and notebooks_layers.HIDDEN == 128  # run again in place
    finally:
        for name in (layers, widths):
            sys.modules.pop(name, None)


def test_a_module_that_runs_again_at_the_files_new_import_is_refused_where_edited_and_not_reloaded(tmp_path,
                                                                                                   monkeypatch):
    """A reload taken (amod's) has the file's other modules beside it run again at its next import (zmod takes K from
    amod): one edited but not reloaded is refused there, as any edit not reloaded is, rather than run and held
    silently; reloaded, it runs. (The reloaded module sorts first: `changed_since_import` takes its reload before
    it looks at zmod.)"""
    import importlib

    from fedevo.errors import FedevoError
    from fedevo.plugins import changed_since_import, load_callable

    tag = f"{os.getpid()}_{abs(hash(str(tmp_path)))}"
    amod, zmod = f"a_{tag}", f"z_{tag}"
    (tmp_path / f"{amod}.py").write_text("K = 1\n")
    (tmp_path / f"{zmod}.py").write_text(f"from {amod} import K\n\n\ndef get():\n    return K\n")
    (tmp_path / "fn.py").write_text(f"from {zmod} import get\n\n\ndef f():\n    return get()\n")
    spec = f"python:{tmp_path / 'fn.py'}:f"
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert load_callable(spec)() == 1
        (tmp_path / f"{amod}.py").write_text("K = 22\n")
        importlib.reload(sys.modules[amod])
        assert changed_since_import(spec) is None  # (taken)
        (tmp_path / f"{zmod}.py").write_text(f"from {amod} import K\n\n\ndef get():\n    return K + 1000\n")
        with pytest.raises(FedevoError, match=rf"{zmod}\.py \(imported by model file .*fn\.py'\) changed since this "
                                              rf"process imported it: .*importlib\.reload\({zmod}\) it"):
            load_callable(spec)
        importlib.reload(sys.modules[zmod])
        assert load_callable(spec)() == 1022
    finally:
        for name in (amod, zmod):
            sys.modules.pop(name, None)


def test_a_functions_code_digest_follows_its_body_not_its_place():
    """plugins.code_digest (run.json's `code`): the same body defined twice (a notebook cell run again, at other
    lines) digests the same; another body, a nested function's or a constant's change, does not; no code, None."""
    from fedevo.plugins import code_digest

    a = lambda r: abs(r.error - 1.0)  # noqa: E731
    b = lambda r: abs(r.error - 1.0)  # noqa: E731

    def nested(r):
        return (lambda v: v + 1)(r) if r in {"a", "b"} else 0

    def nested_other(r):
        return (lambda v: v + 2)(r) if r in {"a", "b"} else 0

    assert code_digest(a) == code_digest(b) != code_digest(lambda r: abs(r.error - 2.0))
    assert code_digest(nested) != code_digest(nested_other)
    assert code_digest(len) is None and code_digest(object()) is None


def test_a_file_touched_keeps_loading_and_one_edited_to_the_same_size_is_refused(tmp_path):
    """The check reads a file again only once its stat changed (each evaluate and load asks it): touched with the
    same text it loads on; edited to a text of the same length, it is refused."""
    from fedevo.errors import FedevoError
    from fedevo.plugins import load_callable

    f = tmp_path / f"same_{os.getpid()}.py"
    f.write_text("def f():\n    return 1\n")
    spec = f"python:{f}:f"
    assert load_callable(spec, kind="evaluator")() == 1
    st = f.stat()
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert load_callable(spec, kind="evaluator")() == 1
    f.write_text("def f():\n    return 2\n")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 2 * 10**9))
    with pytest.raises(FedevoError, match=r"same_\d+\.py \(evaluator file\) changed since this process imported it"):
        load_callable(spec, kind="evaluator")


def test_a_file_whose_import_failed_imports_anew_once_fixed(tmp_path):
    """A model file with a typo fails to import; nothing of it ran. Fixed, it was refused as 'changed since this
    process imported it ... restart the kernel' (its text had been held before it ran): the notebook case the check
    is for. It imports anew."""
    from fedevo.errors import FedevoError
    from fedevo.plugins import check_current, load_callable

    name = f"fixed_{os.getpid()}_{abs(hash(str(tmp_path)))}.py"
    f = tmp_path / name
    f.write_text("def make(input_shape, num_classes:\n    pass\n")
    with pytest.raises(FedevoError, match="failed to import: SyntaxError"):
        load_callable(f"python:{f}:make")
    f.write_text("def make(input_shape, num_classes):\n    return 7\n")
    check_current(f"python:{f}:make", kind="model")  # what a problem's load and fedevo.evaluate ask first
    assert load_callable(f"python:{f}:make")((1,), 2) == 7
    f.write_text("def make(input_shape, num_classes):\n    return 8\n")  # once imported: held, as before
    with pytest.raises(FedevoError, match="changed since this process imported it"):
        load_callable(f"python:{f}:make")


def test_python_s_library_and_fedevo_s_own_source_are_never_beside_a_users_file(tmp_path):
    """review18 F2: a module was 'beside' a python: file wherever its file lay below the file's folder outside
    site-packages, so a Python installed below it (pyenv or conda in $HOME, the file in $HOME) or an editable fedevo
    checkout with the file at its root made enum, abc, json or fedevo.result the user's modules: recorded in
    run.json's inputs, and run again in place after a reload was taken (every later evaluation then failed)."""
    import enum
    import json as json_mod
    from pathlib import Path

    import fedevo.result
    from fedevo.plugins import _beside

    for mod in (enum, json_mod, fedevo.result):
        f = Path(mod.__file__).resolve()
        assert not _beside(str(f), str(f.parents[2])), f
    mine = tmp_path / "helper.py"
    mine.write_text("K = 1\n")
    assert _beside(str(mine), str(tmp_path))
