"""Issue 14: every bad input ends with one line on stderr and exit code 2 -- no traceback, nothing created or
changed in the output directory -- and nothing is silently wrong (ε readable, rounds reported, names whole)."""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

import pytest

from fedevo.cli import main
from fedevo.errors import FedevoError
from fedevo.searching import Runtime, SearchSettings, search
from tests.searching import search_fakes

FAKE = "tests.searching.search_fakes:fake_evaluate"
GIB = 1024**3


def digest(d: Path) -> dict:
    if not d.exists():
        return {}
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(d.rglob("*"))
            if p.is_file()}


def bad(capsys, argv, expect: str, *, watch: Path | None = None) -> str:
    """Run `fedevo ARGV`: exit 2, one `fedevo: error:` line matching `expect`, no traceback, `watch` unchanged."""
    before = digest(watch) if watch is not None else None
    existed = watch is not None and watch.exists()
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in argv])
    cap = capsys.readouterr()
    assert e.value.code == 2, cap.err
    assert cap.out == "", cap.out
    assert cap.err.count("\n") == 1 and cap.err.startswith("fedevo: error: "), cap.err
    assert "Traceback" not in cap.err
    assert re.search(expect, cap.err), cap.err
    if watch is not None:
        assert watch.exists() == existed and digest(watch) == before
    return cap.err


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fakerun") / "run"
    search(SearchSettings(problem="digits_mlp", pop=6, gen=1, seed=1), out, Runtime(workers=0),
           evaluator=search_fakes.fake_evaluate)
    return out


@pytest.fixture
def a_file(tmp_path) -> Path:
    f = tmp_path / "a_file.txt"
    f.write_text("not a directory")
    return f


# ------------------------------------------------------------------------------------------------ unwritable --out
def test_search_out_unwritable(capsys, a_file, tmp_path):
    bad(capsys, ["search", "--out", a_file / "run", "--evaluator", FAKE, "--workers", 0, "--quiet"],
        "--out .*cannot write there: .*a_file.txt is not a directory", watch=tmp_path)


def test_plot_out_unwritable(capsys, a_file, fake_run):
    bad(capsys, ["plot", fake_run, "--out", a_file / "front.html"], "--out .*cannot write there", watch=fake_run)


def test_retrain_out_unwritable_fails_before_training(capsys, a_file, fake_run, monkeypatch):
    import fedevo.retraining

    calls = []
    monkeypatch.setattr(fedevo.retraining, "retrain_evaluate", lambda *a, **k: calls.append(a))
    bad(capsys, ["retrain", fake_run, "--rounds", 1, "--workers", 0, "--quiet", "--out", a_file / "rt"],
        "--out .*cannot write there", watch=fake_run)
    assert calls == []  # checked before any work
    (fake_run.parent / "full").mkdir(exist_ok=True)
    (fake_run.parent / "full" / "mine.txt").write_text("keep")
    bad(capsys, ["retrain", fake_run, "--rounds", 1, "--workers", 0, "--quiet", "--out", fake_run.parent / "full"],
        "already exists and is not an empty directory", watch=fake_run.parent / "full")
    assert calls == []


@pytest.mark.skipif(__import__("os").geteuid() == 0, reason="root may write into a read-only directory")
def test_read_only_out(capsys, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        bad(capsys, ["search", "--out", ro / "run", "--evaluator", FAKE, "--workers", 0, "--quiet"],
            "is not writable", watch=ro)
    finally:
        ro.chmod(0o700)


# ------------------------------------------------------------------------------------------------ problem files
def test_problem_file_not_utf8(capsys, tmp_path):
    f = tmp_path / "latin1.toml"
    f.write_bytes('dataset = "digits"\nmodel = "mlp"\n# caf\xe9\n'.encode("latin-1"))
    bad(capsys, ["evaluate", "--problem", f, "--quiet"], r"latin1.toml' is not UTF-8 text \(byte \d+")
    bad(capsys, ["search", "--problem", f, "--out", tmp_path / "run", "--quiet"], "is not UTF-8", watch=tmp_path)


NEG_SIGMA = """dataset = "digits"
model = "mlp"
[privacy]
mechanism = "update"
clip = 1.0
[genes]
sigma = { type = "real", low = -0.5, high = 1.0, default = 0.3 }
"""


def test_gene_bounds_are_validated_at_load(capsys, tmp_path):
    f = tmp_path / "neg.toml"
    f.write_text(NEG_SIGMA)
    bad(capsys, ["search", "--problem", f, "--out", tmp_path / "run", "--evaluator", FAKE, "--workers", 0, "--quiet"],
        r"gene 'sigma' at its low bound -0.5 gives an invalid configuration \(sigma must be > 0", watch=tmp_path)
    bad(capsys, ["evaluate", "--problem", f, "--quiet"], "gene 'sigma' at its low bound")
    f.write_text(NEG_SIGMA.replace("low = -0.5", "low = 0.05"))
    from fedevo.problem import load_problem

    assert load_problem(str(f)).gene("sigma").low == 0.05


def test_bundled_problems_pass_the_bound_validation():
    from fedevo.problem import list_problems, load_problem

    assert all(load_problem(n).genes for n in list_problems())


def test_search_whose_every_evaluation_failed_exits_2(tmp_path):
    from tests.helpers import cli

    out = tmp_path / "run"
    r = cli("search", "--pop", 6, "--gen", 2, "--out", out, "--workers", 0, "--quiet",
            "--evaluator", "tests.searching.search_fakes:fake_always_fails")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    assert re.fullmatch(r"fedevo: error: every evaluation failed \(12\); the first: ValueError: fake failure of "
                        r"seed \d+ \(log: .*evaluations.csv\)\n", r.stderr), r.stderr
    assert "12 evaluations (12 failed" in r.stdout  # the log is kept


def test_search_with_some_failed_evaluations_says_the_first_ones_message(tmp_path):
    """The closing line counted `2 failed` and no more: why was in evaluations.csv alone. One line on stderr says
    the first failure's message (its first line); the search ends as before, exit 0."""
    from tests.helpers import cli

    r = cli("search", "--pop", 6, "--gen", 2, "--out", tmp_path / "run", "--workers", 0, "--quiet",
            "--evaluator", "tests.searching.search_fakes:fake_flaky")  # seed % 5 == 0 raises
    assert r.returncode == 0, r.stderr
    n = int(re.search(r"\((\d+) failed", r.stdout).group(1))
    assert n > 0, r.stdout
    said = [line for line in r.stderr.splitlines() if "failed; the first" in line]
    assert len(said) == 1 and re.fullmatch(rf"{n} evaluation\(s\) failed; the first: ValueError: fake failure for "
                                           r"seed \d+ \(each evaluation's message in evaluations.csv\)",
                                           said[0]), r.stderr


def test_search_whose_every_evaluation_diverged_exits_2(tmp_path):
    """No evaluation with a result (every one diverged: a learning rate that blows up, a model whose outputs are
    never finite) is a failure, as every one failed is: it ended with "Pareto front of 0" and exit 0."""
    from tests.helpers import cli

    prob = tmp_path / "boom.toml"
    prob.write_text('name = "boom"\ndataset = "digits"\nmodel = "mlp"\n[data]\nclients = 4\n[train]\nrounds = 2\n'
                    'epochs = 1\nbatch_size = 16\n[privacy]\nmechanism = "none"\n[genes]\n'
                    'lr = { type = "real", low = 1e8, high = 1e9, default = 1e8 }\n')
    r = cli("search", "--problem", prob, "--pop", 4, "--gen", 1, "--out", tmp_path / "run", "--workers", 0, "--quiet")
    assert r.returncode == 2, (r.stdout, r.stderr)
    note, error = r.stderr.splitlines()  # the note: a problem without privacy searches error and comm
    assert note.startswith("fedevo: note: problem 'boom': mechanism 'none' gives no privacy"), note
    assert error.startswith("fedevo: error: no evaluation gave a result: 4 diverged"), error
    assert "4 diverged" in r.stdout  # the summary, and the log kept


# ------------------------------------------------------------------------------------------------ seeds
@pytest.mark.parametrize("argv", [
    ["evaluate", "--seed", -1, "--quiet"],
    ["evaluate", "--seed", 2**63, "--quiet"],
    ["evaluate", "--seed", 2**32, "--quiet"],
    ["search", "--seed", -1, "--evaluator", FAKE, "--workers", 0, "--quiet"],
    ["search", "--seed", 2**64, "--evaluator", FAKE, "--workers", 0, "--quiet"],
])
def test_seed_out_of_range(capsys, tmp_path, argv):
    if argv[0] == "search":
        argv = argv + ["--out", tmp_path / "run"]
    bad(capsys, argv, r"--seed must be in 0\.\.4294967295 \(2\*\*32 - 1\), got", watch=tmp_path)


def test_retrain_seed_out_of_range(capsys, fake_run):
    bad(capsys, ["retrain", fake_run, "--seed", -1, "--rounds", 1, "--workers", 0, "--quiet"], "--seed must be in 0..",
        watch=fake_run)
    bad(capsys, ["retrain", fake_run, "--seed", 2**63, "--rounds", 1, "--workers", 0, "--quiet"], "--seed must be in",
        watch=fake_run)


def test_largest_seed_is_accepted(capsys):
    from tests.helpers import run_cli

    code, out, err = run_cli(["evaluate", "--seed", 2**32 - 1, "--rounds", 1, "--json"], capsys)
    assert code in (0, None), err
    assert json.loads(out)["seed"] == 2**32 - 1


# ------------------------------------------------------------------------------------------------ sizes
@pytest.mark.parametrize("args, expect", [
    (("--pop", 2**63), r"--pop 9223372036854775808 is too large: .* allows --pop \d+ at most"),
    (("--pop", 12, "--gen", 10**9), r"12000000000 evaluations is too many: .* at most \d+ \(e\.g\. --gen \d+ or fewer\)"),
    (("--workers", 10**9), r"--workers 1000000000 is too many: .* allows --workers \d+ at most"),
    (("--rounds", 10**7), r"--rounds 10000000 is above the limit of 1000000 rounds"),
])
def test_absurd_sizes_fail_in_seconds(capsys, tmp_path, args, expect):
    t0 = time.monotonic()
    bad(capsys, ["search", "--out", tmp_path / "run", "--evaluator", FAKE, "--quiet", *args], expect, watch=tmp_path)
    assert time.monotonic() - t0 < 10


def test_huge_epochs_refused_before_any_allocation(capsys, tmp_path):
    t0 = time.monotonic()
    bad(capsys, ["evaluate", "--params", '{"epochs": 1000000000}', "--quiet"],
        r"would need about [\d.,]+ GiB of memory per evaluation .* lower epochs=1000000000 \(at most \d+ fit")
    bad(capsys, ["evaluate", "--params", '{"clients": 1000000000}', "--quiet"],
        r"clients = 1000000000 is more than the 1437 training samples of 'digits'")
    bad(capsys, ["evaluate", "--params", '{"clients": 1000000000, "partition": "dirichlet"}', "--quiet"],
        r"partition = \"dirichlet\": clients = 1000000000 need at least 2 training samples each, more than the "
        r"1437 training samples of 'digits' \(more than 718 clients can never be met\)$")
    # shards of one sample, dealt with replacement: so many clients are a partition, refused for their memory
    bad(capsys, ["evaluate", "--params", '{"clients": 1000000000, "partition": "shards", "shard_size": 1}',
                 "--quiet"],
        r"the round's updates [\d.,]+ GiB\), more than .* lower participation=0.5 or clients=1000000000 "
        r"\(500000000 clients a round")  # a client's state is less than its round's dense update
    bad(capsys, ["evaluate", "--problem", "digits_mlp_local", "--params",  # recall: each client keeps an update
                 '{"clients": 1000000000, "partition": "shards", "shard_size": 1, "participation": 0.1}',
                 "--quiet"],
        r"per-client state [\d.,]+ GiB, .*\), more than .* lower clients=1000000000$")
    f = tmp_path / "big.toml"
    from tests.searching.search_helpers import TOY_TOML

    f.write_text(TOY_TOML.replace("epochs = 1", "epochs = 1000000000"))
    bad(capsys, ["search", "--problem", f, "--out", tmp_path / "run", "--workers", 0, "--quiet"],
        "problem 'toy' at its largest genes .* GiB of memory per evaluation", watch=tmp_path)
    assert not (tmp_path / "run").exists()  # no stub run directory
    assert time.monotonic() - t0 < 10


def test_huge_model_gene_refused(capsys, tmp_path):
    from tests.searching.search_helpers import TOY_TOML

    f = tmp_path / "wide.toml"
    f.write_text(TOY_TOML.replace("high = 256, default = 32", "high = 10000000, default = 32"))
    bad(capsys, ["search", "--problem", f, "--out", tmp_path / "run", "--workers", 0, "--quiet"],
        r"units=10000000.* lower the model", watch=tmp_path)
    # the memory check is the simulator's: a custom evaluator is not refused
    from tests.helpers import run_cli

    code, out, err = run_cli(["search", "--problem", str(f), "--out", str(tmp_path / "fake"), "--evaluator", FAKE,
                              "--workers", "0", "--pop", "6", "--gen", "1", "--quiet"], capsys)
    assert code in (0, None) and "search finished" in out, err


def test_memory_limits_are_what_the_estimates_say():
    from fedevo.guards import check_evaluation_memory, check_problem_memory, check_search_sizes, evaluation_memory
    from fedevo.problem import list_problems, load_problem

    cfg = load_problem("fashion_mlp").sim_config()
    need = sum(evaluation_memory(cfg).values())
    assert 1e6 < need < 2 * GIB  # the paper-scale default fits a laptop
    check_evaluation_memory(cfg, memory=int(need) + 1)
    with pytest.raises(FedevoError, match=r"more than the [\d.]+ GiB available"):
        check_evaluation_memory(cfg, memory=int(need) - 1)
    for name in list_problems():  # every bundled problem's largest individual fits 4 GiB
        check_problem_memory(load_problem(name), memory=4 * GIB)
    check_search_sizes(20, 20, memory=4 * GIB)  # the paper's search
    with pytest.raises(FedevoError, match=r"^pop=1000000 is too large: .* allows pop=\d+ at most"):
        check_search_sizes(10**6, 1, memory=4 * GIB)
    # the front no longer compares every pair of evaluations (n² memory): 20,000 evaluations fit 4 GiB, the memory
    # the whole log takes bounds a search, linearly
    check_search_sizes(100, 200, memory=4 * GIB)
    with pytest.raises(FedevoError, match=r"pop=100 × gen=1000 = 100000 evaluations is too many: the search "
                                          r"holds every evaluation in memory.*allows at most 65536 "
                                          r"\(e.g. gen=655 or fewer\)"):  # (called from Python: its spelling)
        check_search_sizes(100, 1000, memory=4 * GIB)


def test_the_memory_estimate_counts_every_sampled_clients_update():
    """A round holds each sampled client's dense update until its mean: fashion_mlp_dp with 3,000 clients, all
    sampled, peaked at 4.1 GB RSS (1.2 GB with 100: 2026-11-27, AMD EPYC), where the estimate said 34 MB and let
    30,000 clients (some 45 GiB) start."""
    from fedevo.guards import check_evaluation_memory, evaluation_memory
    from fedevo.problem import load_problem

    cfg = load_problem("fashion_mlp_dp").sim_config({"clients": 3000, "participation": 1.0})
    need = evaluation_memory(cfg)
    assert need["updates"] > 3 * GIB and need["updates"] == max(need.values())
    with pytest.raises(FedevoError, match=r"the round's updates 4\.\d GiB\), more than the 2\.0 GiB available; lower "
                                          r"participation=1 or clients=3000 \(3000 clients a round"):
        check_evaluation_memory(cfg, memory=2 * GIB)


def test_the_memory_message_names_the_genes_that_size_it_at_their_bound():
    """The largest individual's genes are those that change its memory need, each with the bound it was taken at:
    not lr=0.01 (the first of two bounds that need the same), nor a sign or a noise level."""
    from fedevo._toml import loads
    from fedevo.guards import check_problem_memory
    from fedevo.problem import parse_problem
    from tests.searching.search_helpers import TOY_TOML

    with pytest.raises(FedevoError) as e:
        check_problem_memory(parse_problem(loads(TOY_TOML), name="toy"), memory=1000)
    assert str(e.value).startswith("problem 'toy' at its largest genes (layers=4 (high), units=256 (high), "
                                   "partition='dirichlet') would need about "), e.value
    head, genes = TOY_TOML.split("[genes]")
    sized_by_none = head + "[genes]\n" + "".join(g for g in genes.splitlines(True) if g.startswith(("lr", "sigma")))
    with pytest.raises(FedevoError, match=r"^problem 'toy' \(at any genes: none changes the memory it needs\) would "
                                          r"need about .* lower the model"):
        check_problem_memory(parse_problem(loads(sized_by_none), name="toy"), memory=1000)


# ------------------------------------------------------------------------------------------------ resume / retrain
def test_resume_of_a_finished_run_is_refused_and_changes_nothing(capsys, fake_run):
    bad(capsys, ["resume", fake_run, "--workers", 0, "--quiet"], "holds a finished search .* nothing was changed",
        watch=fake_run)


# ------------------------------------------------------------------------------------------------ evaluate output
def test_evaluate_reports_the_rounds_it_trained_and_readable_eps(capsys):
    from tests.helpers import run_cli

    code, out, err = run_cli(["evaluate", "--rounds", 2, "--json"], capsys)
    d = json.loads(out)
    assert code in (0, None) and d["rounds"] == 2 and d["params"]["rounds"] == 2
    code, out, err = run_cli(["evaluate", "--rounds", 2, "--quiet"], capsys)
    line = next(ln for ln in out.splitlines() if "ε (accountant)" in ln)
    numbers = re.findall(r"ε \((?:accountant|paper formula)\) (\S+)", line)
    assert len(numbers) == 2
    for n in numbers:
        assert len(re.sub(r"[^0-9]", "", n.split("e")[0]).lstrip("0")) <= 4, line  # 4 significant digits
    assert float(numbers[0]) == pytest.approx(d["eps"], rel=1e-3)


def test_evaluate_without_privacy_shows_eps_paper_undefined_as_central_trust_does(capsys):
    """No privacy has no paper formula, as central trust has none: ε (paper) reads '–' for both (it read '∞' for the
    standard configuration); its ε (accountant) stays ∞ (no privacy)."""
    from tests.helpers import run_cli

    lines = {}
    for name, params in (("none", {"mechanism": "none"}), ("central", {})):
        code, out, err = run_cli(["evaluate", "--rounds", 1, "--params", json.dumps(params), "--quiet"], capsys)
        assert code in (0, None), err
        lines[name] = next(ln for ln in out.splitlines() if "ε (accountant)" in ln)
    assert "ε (paper formula) –" in lines["central"] and "ε (paper formula) –" in lines["none"], lines
    assert "ε (accountant) ∞" in lines["none"], lines


def test_problems_never_cuts_a_name(capsys, monkeypatch):
    import rich.console

    from fedevo.problem import list_problems, load_problem
    from tests.helpers import run_cli

    code, out, _ = run_cli(["problems"], capsys)
    for name in list_problems():
        assert re.search(rf"│ {name}\s", out), name
        for g in load_problem(name).gene_names:
            assert g in out, g
    assert "…" not in out
    # a narrow terminal: names still whole (long cells wrap instead)
    monkeypatch.setattr(rich.console.Console, "is_terminal", property(lambda self: True))
    monkeypatch.setenv("COLUMNS", "80")
    code, out, _ = run_cli(["problems"], capsys)
    assert code in (0, None)
    for name in list_problems():
        assert re.search(rf"│ {name}\s", out), name
    assert "…" not in out


# ------------------------------------------------------------------ issue 27: one typed schema, checked at load
def _digits_doc() -> dict:
    from fedevo import _toml
    from fedevo.problem import problems_dir

    return _toml.loads((problems_dir() / "digits_mlp.toml").read_text())


def _set(doc: dict, path: str, value) -> dict:
    *tables, key = path.split(".")
    t = doc
    for name in tables:
        t = t.setdefault(name, {})
    t[key] = value
    return doc


NAN, INF = float("nan"), float("inf")
ISSUE_27_FILES = [  # (changes to digits_mlp.toml, the message): items 2, 3, 4 and 7 of issue 27
    ({"data.partition": "shards", "data.clients": 1000},
     r'partition = "shards": clients × shards_per_client = 1000 × 2 shards is more than the 1437 training samples'),
    ({"data.dirichlet_alpha": 1e-300}, r"dirichlet_alpha must be a finite number >= 0.01 .*got 1e-300$"),
    ({"data.dirichlet_alpha": INF}, r"\[data\] dirichlet_alpha: expected a finite number, got inf$"),
    ({"train.epochs": 1.5}, r"\[train\] epochs: expected an integer, got 1.5$"),
    ({"train.batch_size": 16.5}, r"\[train\] batch_size: expected an integer, got 16.5$"),
    ({"dataset": "imagenet"}, r"dataset: unknown dataset 'imagenet'; choose one of digits, fashion, mnist, cifar10"),
    ({"data.clients": "20"}, r'\[data\] clients: expected an integer, got "20"$'),
    ({"genes.lr.low": "1"}, r'\[genes\] lr.low: expected a finite number, got "1"$'),
    ({"genes.sigma.log": "false"}, r'\[genes\] sigma.log: expected true or false, got "false"$'),
    ({"data": 5}, r"data: expected a table, got 5$"),
    ({"model": ["mlp"]}, r'model: expected a string, got \["mlp"\]$'),
    ({"genes": 5}, r"genes: expected a table, got 5$"),
    ({"train.rounds": 2.5}, r"\[train\] rounds: expected an integer, got 2.5$"),
    ({"train.epochs": "2"}, r'\[train\] epochs: expected an integer, got "2"$'),
    ({"constraints.eps": NAN}, r"\[constraints\] eps: expected a finite number, got nan$"),
    ({"privacy.recall": "false"}, r'\[privacy\] recall: expected true or false, got "false"$'),
    ({"train.epoch": 2}, r"\[train\] epoch: unknown key; did you mean 'epochs'\?"),
    ({"train.sigma": 1.0}, r"\[train\] sigma: belongs in \[privacy\]$"),
    ({"privacy.clip": 1.0}, r"\[privacy\] clip: is also a gene \(\[genes\] clip\); give it in one place$"),
]


@pytest.mark.parametrize("changes,expect", ISSUE_27_FILES, ids=[str(c) for c, _ in ISSUE_27_FILES])
def test_issue27_bad_problem_files_fail_at_load(capsys, tmp_path, changes, expect):
    import tomli_w

    doc = _digits_doc()
    for path, value in changes.items():
        _set(doc, path, value)
    f = tmp_path / "p.toml"
    f.write_text(tomli_w.dumps(doc))
    out = tmp_path / "run"
    bad(capsys, ["search", "--problem", f, "--out", out, "--pop", 4, "--gen", 1, "--workers", 0, "--quiet"], expect,
        watch=tmp_path)
    assert not out.exists()


@pytest.fixture
def fixed_sigma(tmp_path) -> Path:
    """digits_mlp with σ a fixed [privacy] setting instead of a gene."""
    import tomli_w

    doc = _digits_doc()
    del doc["genes"]["sigma"]
    doc["privacy"]["sigma"] = 1.0
    f = tmp_path / "fixed_sigma.toml"
    f.write_text(tomli_w.dumps(doc))
    return f


@pytest.mark.parametrize("cmd", ["evaluate", "audit"])
@pytest.mark.parametrize("params,expect", [
    ('{"target_eps": 1e9}', r"target_eps must be in \[0.001, 10000\] .*got 1000000000.0$"),
    ('{"clients": 20.5}', r"parameter clients: expected an integer, got 20.5$"),
    ('{"recall": "false", "tau": 0.5}', r'parameter recall: expected true or false, got "false"$'),
    ('{"sigma": "1e-300"}', r'parameter sigma: expected a finite number, got "1e-300"$'),
    ('{"sigma": NaN}', r"parameter sigma: expected a finite number, got nan$"),
])
def test_issue27_bad_params_fail_before_training(capsys, tmp_path, fixed_sigma, cmd, params, expect):
    out = tmp_path / "audit"
    bad(capsys, [cmd, "--problem", fixed_sigma, "--params", params, "--quiet"]
        + (["--out", out] if cmd == "audit" else []), expect, watch=tmp_path)
    assert not out.exists()


def test_issue27_string_boolean_gene_choice_is_refused(capsys):
    """digits_mlp_local: recall is a fixed true; a choice gene of booleans refuses "false" and 1 (not the same)."""
    bad(capsys, ["evaluate", "--problem", "digits_mlp_local", "--params", '{"recall": "false", "tau": 0.5}'],
        r'parameter recall: expected true or false, got "false"$')
    from fedevo.problem import Gene

    g = Gene(name="recall", type="choice", choices=(True, False))
    for v in ("false", 1, 0.0):
        with pytest.raises(FedevoError, match="is not one of"):
            g.check(v)
    assert g.check(False) is False


def test_issue27_data_dir_and_problem_paths(capsys, tmp_path):
    bad(capsys, ["evaluate", "--data-dir", tmp_path / "nonexistent", "--quiet"],
        r"--data-dir '.*nonexistent' does not exist \(add --download")
    (tmp_path / "x.toml").mkdir()
    bad(capsys, ["evaluate", "--problem", tmp_path / "x.toml"], r"problem file '.*x.toml' is a directory")
    (tmp_path / "loop.toml").symlink_to(tmp_path / "loop.toml")
    bad(capsys, ["evaluate", "--problem", tmp_path / "loop.toml"],
        r"problem file '.*loop.toml' cannot be opened: Too many levels of symbolic links")
    (tmp_path / "dangling.toml").symlink_to(tmp_path / "gone.toml")
    bad(capsys, ["evaluate", "--problem", tmp_path / "dangling.toml"],
        r"problem file '.*dangling.toml' is a link to '.*gone.toml', which does not exist")


def test_issue27_search_with_a_missing_data_dir_writes_nothing(capsys, tmp_path):
    out = tmp_path / "run"
    bad(capsys, ["search", "--data-dir", tmp_path / "nonexistent", "--out", out, "--pop", 4, "--gen", 1,
                 "--workers", 0, "--quiet"], r"--data-dir '.*nonexistent' does not exist", watch=tmp_path)
    assert not out.exists()


@pytest.mark.parametrize("problem, data, message", [
    ("mnist_mlp", None, "dataset 'mnist' needs --data-dir DIR"),
    ("mnist_mlp", "empty", "mnist not found in '.*empty'"),
    ("fashion_mlp", "empty", "--data-dir '.*empty' lacks train-images"),
])
def test_a_search_whose_data_is_missing_is_refused_before_its_run_directory(capsys, tmp_path, problem, data,
                                                                              message):
    """Found before any work (api._locate_data), not a search stopped at its first evaluation whose message
    sends the user to resume a run directory that was removed again (the 2026-11-27 audit)."""
    out = tmp_path / "run"
    (tmp_path / "empty").mkdir()
    argv = ["search", "--problem", problem, "--out", out, "--pop", 4, "--gen", 1, "--workers", 0, "--quiet"]
    err = bad(capsys, argv + (["--data-dir", tmp_path / data] if data else []), message, watch=tmp_path)
    assert not out.exists() and "fedevo resume" not in err and "--download (fedevo search or evaluate)" in err


def test_search_download_fetches_the_data_once_before_the_search(capsys, tmp_path, monkeypatch):
    from fedevo.data import datasets

    calls = []

    def offline(*args):
        calls.append(args)
        raise datasets.DataNotFoundError("could not fetch mnist (offline)")
    monkeypatch.setattr(datasets, "locate", offline)
    out = tmp_path / "run"
    bad(capsys, ["search", "--problem", "mnist_mlp", "--data-dir", tmp_path / "new", "--download", "--out", out,
                 "--pop", 4, "--gen", 1, "--workers", 0, "--quiet"], r"could not fetch mnist \(offline\)")
    assert calls == [("mnist", str(tmp_path / "new"), True)] and not out.exists()
    bad(capsys, ["search", "--data-dir", tmp_path, "--download", "--evaluator", "tests.searching.search_fakes:"
                 "fake_evaluate", "--out", out, "--quiet"], "--download fetches a bundled dataset")


@pytest.mark.parametrize("argv, message", [
    (["search", "--pop", "abc"], "Invalid value for '--pop'"),
    (["search", "--bogus"], "No such option: --bogus"),
    (["evaluate", "--rounds", "0"], "Invalid value for '--rounds'"),
    (["frnt"], "No such command 'frnt'"),
    (["front"], "Missing argument"),
])
def test_the_command_lines_own_option_errors_are_one_line(capsys, argv, message):
    """click's errors in fedevo's format (typer prints a boxed panel of several lines)."""
    from tests.helpers import run_cli

    code, out, err = run_cli(argv, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("fedevo: error: ") and message in err, err


@pytest.mark.parametrize("where", ["existing-empty", "nested-new"])
def test_a_search_that_cannot_start_leaves_the_folders_as_they_were(capsys, tmp_path, monkeypatch, where):
    """A setup error at the first evaluation (here a bad FEDEVO_SECAGG): the run directory no evaluation reached is
    taken back. The 2026-11-27 audit: an empty --out the user had made was deleted, the parents a nested --out
    created were left behind, and the message said to resume the deleted directory."""
    path = tmp_path / "sa.toml"
    path.write_text('dataset = "digits"\nmodel = "mlp"\n[train]\nrounds = 1\n[privacy]\ntrust = "secagg"\n'
                    'mechanism = "update"\nsigma = 1.0\nclip = 1.0\nrecall = false\n'
                    '[genes]\nlr = { type = "real", low = 0.01, high = 0.5, default = 0.2 }\n')
    monkeypatch.setenv("FEDEVO_SECAGG", "fast")
    out = tmp_path / "mine" if where == "existing-empty" else tmp_path / "a" / "b" / "run"
    if where == "existing-empty":
        out.mkdir()
    err = bad(capsys, ["search", "--problem", path, "--workers", 0, "--pop", 4, "--gen", 1, "--quiet", "--out", out],
              r"FEDEVO_SECAGG must be one of .*the search stopped before any evaluation")
    assert "fedevo resume" not in err
    if where == "existing-empty":
        assert "was emptied again" in err and out.is_dir() and not any(out.iterdir())
    else:
        assert "was removed" in err and not (tmp_path / "a").exists()


def test_the_2026_11_27_audits_messages(capsys, tmp_path, monkeypatch):
    """Each said something untrue or unhelpful: a run 'directory' that is a file 'did not exist'; a bundled name
    given with .toml; a misspelt gene had no suggestion; --evaluator named one of its two forms only."""
    (tmp_path / "afile.txt").write_text("x")
    bad(capsys, ["front", tmp_path / "afile.txt"], r"run directory .*afile.txt is a file, not a directory")
    monkeypatch.chdir(tmp_path)
    bad(capsys, ["evaluate", "-p", "digits_mlp.toml"],
        r"problem file 'digits_mlp.toml' does not exist \(the bundled problem is --problem digits_mlp, without")
    (tmp_path / "g.toml").write_text('dataset = "digits"\nmodel = "mlp"\n[genes]\n'
                                     'unitz = { type = "int", low = 1, high = 4, default = 2 }\n')
    bad(capsys, ["evaluate", "-p", tmp_path / "g.toml"], r"unknown gene 'unitz'; did you mean 'units'\?")
    bad(capsys, ["search", "--evaluator", "foo", "--out", tmp_path / "r"],
        r"expected 'package.module:function' or 'python:path/to/file.py:function'")


@pytest.mark.parametrize("kw, message, python", [
    (dict(cpus_per_task=float("nan")), "--cpus-per-task must be > 0, got nan", "cpus_per_task= must be > 0, got nan"),
    (dict(gpus_per_task=float("nan")), "--gpus-per-task must be >= 0, got nan", "gpus_per_task= must be >= 0"),
    (dict(workers=0, ray_address="h:1"), "--workers 0 evaluates in this process, --ray-address on a Ray cluster",
     "workers=0 evaluates in this process, ray_address= on a Ray cluster"),
    (dict(workers=0, ray_address="h:1", verb="trains"), "--workers 0 trains in this process, --ray-address",
     "workers=0 trains in this process, ray_address="),
])
def test_one_check_of_the_ray_options_for_search_and_retrain(kw, message, python):
    """The command line's message names its options; the Python API's (fedevo.search, fedevo.retrain) their
    keyword arguments."""
    from fedevo.errors import command_line
    from fedevo.guards import check_task_resources

    args = dict(cpus_per_task=1.0, gpus_per_task=0.0, workers=None, ray_address=None) | kw
    with command_line(), pytest.raises(FedevoError, match="^" + re.escape(message)):
        check_task_resources(**args)
    with pytest.raises(FedevoError, match="^" + re.escape(python)):
        check_task_resources(**args)
    check_task_resources(cpus_per_task=0.5, gpus_per_task=0.25, workers=0, ray_address=None)  # fine: no error


@pytest.mark.parametrize("argv", [["front", ""], ["plot", ""], ["retrain", " ", "--pick", "knee"], ["resume", ""],
                                  ["audit", ""], ["search", "--init-from", ""]])
def test_an_empty_run_directory_is_one_line_not_the_current_folder(argv, capsys):
    """`fedevo front "$run"` where `$run` held nothing read the current folder (Path("") is "."): '. is not a fedevo
    search run'."""
    from tests.helpers import run_cli

    code, out, err = run_cli(argv, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "empty: name a run directory" in err and "is not a fedevo search run" not in err, err
    assert ("'--init-from'" if "--init-from" in argv else "'RUN_DIR'") in err, err
