"""fedevo retrain: picked solutions + the standard solution, report.csv / report.md / curves.html."""

import json
import math
import re
import shutil

import pytest

from fedevo.errors import FedevoError
from fedevo.picking import pick
from fedevo.problem import load_problem
from fedevo.retraining import REPORT_COLUMNS, STANDARD, MD_MAIN, retrain, standard_problem
from fedevo.searching.rundata import load_run
from tests.helpers import read_csv, run_cli as cli
from tests.viz.fedevo_runs import digits_run


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return digits_run(tmp_path_factory)




def md_main_table(text):
    """The first Markdown table of report.md as a list of {header: cell}."""
    lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for ln in lines[2:]:
        if ln.startswith("| Solution |"):  # the second table starts
            break
        cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", ln.strip().strip("|"))]
        rows.append(dict(zip(head, cells)))
    return rows


def test_retrain_cli_writes_report(run_dir, tmp_path, capsys):
    out = tmp_path / "rt"
    code, stdout, err = cli(["retrain", str(run_dir), "--pick", "knee,lowest-error:2", "--rounds", "20",
                             "--workers", "0", "--quiet", "--out", str(out)], capsys)
    assert code in (0, None), err
    data = load_run(run_dir)
    expected = [p.id for p in pick("knee,lowest-error:2", data.rows, data.front, eps_key=data.eps_key)]
    rows = read_csv(out / "report.csv")
    assert list(rows[0])[:len(REPORT_COLUMNS)] == list(REPORT_COLUMNS)
    assert list(rows[0])[len(REPORT_COLUMNS):] == list(data.gene_names)
    assert [r["solution"] for r in rows] == [str(i) for i in range(1, len(expected) + 1)] + [STANDARD]
    assert [int(r["id"]) for r in rows[:-1]] == expected
    assert all(r["status"] == "ok" and r["rounds"] == "20" for r in rows)
    std = rows[-1]
    assert std["comm_pct_of_standard"] == "100.00" and std["accuracy_pct_of_standard"] == "100.00"
    assert std["eps"] == "inf" and std["alpha"] == "dense" and std["xi"] == "0" and std["sigma"] == ""
    for r in rows[:-1]:  # the picks are private, sparse and compared with the standard
        assert math.isfinite(float(r["eps"])) and float(r["comm"]) > 0
        assert float(r["comm_pct_of_standard"]) == pytest.approx(100 * float(r["comm"]) / float(std["comm"]), abs=0.01)
        assert 0 < float(r["accuracy"]) <= 1
    # report.md shows exactly the numbers of report.csv
    md = (out / "report.md").read_text()
    table = md_main_table(md)
    assert len(table) == len(rows)
    # no privacy has no paper formula: the standard's ε (paper) is undefined ('–', as a central pick's), not 'inf'
    # (its ε, the accountant's, is: no privacy); the local-trust picks have theirs
    assert std["eps_paper"] == "" and table[-1]["ε (paper)"] == "–"
    assert all(math.isfinite(float(r["eps_paper"])) for r in rows[:-1])
    for m, c in zip(table, rows):
        for key, head in MD_MAIN:
            assert m[head] == (c[key] or "–"), (key, m[head], c[key])
    # curves: one per solution, every round
    res = json.loads((out / "results.json").read_text())
    assert [len(s["result"]["accuracy_curve"]) for s in res["solutions"]] == [20] * len(rows)
    html = (out / "curves.html").read_text()
    assert 'id="curves"' in html and "<script src=" not in html and len(html) > 1_000_000


def test_retrain_on_ray_matches_in_process(run_dir, tmp_path, capsys):
    """--workers 2 (Ray) gives the numbers --workers 0 gives: every solution has its own seeded training."""
    a = retrain(run_dir, "lowest-error:1", rounds=3, workers=0, write=False)
    code, _, err = cli(["retrain", str(run_dir), "--pick", "lowest-error:1", "--rounds", "3", "--workers", "2",
                        "--quiet", "--out", str(tmp_path / "ray")], capsys)
    assert code in (0, None), err
    rows = read_csv(tmp_path / "ray" / "report.csv")
    for s, r in zip(a.solutions, rows):
        assert a.cells(s)["accuracy"] == r["accuracy"] and a.cells(s)["eps"] == r["eps"]


def _numbers(report):
    out = {}
    for k, r in report.results.items():
        d = r.to_dict()
        d.pop("wall_s")
        out[k] = d
    return out


def test_retrain_is_deterministic(run_dir):
    a = retrain(run_dir, "knee,2", rounds=3, workers=0, write=False)
    b = retrain(run_dir, "knee,2", rounds=3, workers=0, write=False)
    assert _numbers(a) == _numbers(b)
    c = retrain(run_dir, "knee,2", rounds=3, workers=0, seed=12345, write=False)
    assert _numbers(c) != _numbers(a)
    assert a.seed == load_run(run_dir).settings.seed  # default: the run's seed


def test_standard_solution_is_dense_without_privacy():
    p = load_problem("digits_mlp")
    cfg = standard_problem(p).sim_config()
    d = p.defaults()
    assert cfg.alpha is None and cfg.xi == 0.0 and cfg.privacy.mechanism == "none"
    assert cfg.participation == d["participation"] and cfg.lr == d["lr"]
    assert (cfg.arch.layers, cfg.arch.units) == (d["layers"], d["units"])
    assert cfg.rounds == p.sim_config().rounds and cfg.data == p.sim_config().data


def test_retrain_bad_inputs(run_dir, tmp_path, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (["retrain", str(run_dir), "--pick", "9999", "--rounds", "2"], "no evaluation with id 9999"),
        (["retrain", str(run_dir), "--pick", "eps<=0.000001", "--rounds", "2"], "no Pareto solution satisfies"),
        (["retrain", str(run_dir), "--pick", "best", "--rounds", "2"], "cannot understand pick term"),
        (["retrain", str(run_dir), "--rounds", "0"], "--rounds must be >= 1"),
        (["retrain", str(run_dir), "--rounds", "2", "--workers", "-1"], "--workers must be >= 0"),
        (["retrain", str(run_dir), "--rounds", "2", "--workers", "many"], "--workers must be"),
        (["retrain", str(empty), "--rounds", "2"], "is not a fedevo search run"),
        (["retrain", str(tmp_path / "missing"), "--rounds", "2"], "does not exist"),
    ]
    for argv, msg in cases:
        code, out, err = cli(argv + ["--quiet"], capsys)
        assert code == 2, (argv, err)
        assert msg in err and err.count("\n") == 1, (argv, err)
    with pytest.raises(FedevoError, match="^rounds= must be >= 1, got 0$"):  # from Python: its keyword argument
        retrain(run_dir, "knee", rounds=0)


def test_retrain_on_a_ray_cluster(run_dir, tmp_path, capsys, monkeypatch):
    """`fedevo retrain` had no --ray-address (nor --cpus-per-task): the trainings a user would most want on a
    cluster (150 rounds each) ran on the driver machine only (the 2026-11-27 Ray audit). A cluster that is not there
    is one line, before anything is written; the address and resources reach the runner."""
    import socket

    import fedevo
    import fedevo.searching.runner as runner

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    code, out, err = cli(["retrain", str(run_dir), "--pick", "knee", "--rounds", "1", "--ray-address",
                          f"127.0.0.1:{port}", "--out", tmp_path / "rt", "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert f"cannot reach a Ray cluster at 127.0.0.1:{port}" in err and not (tmp_path / "rt").exists()
    code, out, err = cli(["retrain", str(run_dir), "--rounds", "1", "--workers", "0", "--ray-address",
                          f"127.0.0.1:{port}", "--quiet"], capsys)
    assert code == 2 and "--workers 0 trains in this process, --ray-address on a Ray cluster" in err
    asked = {}

    def make_runner(evaluator, problem, eval_kwargs, **kwargs):
        asked.update(kwargs)
        raise FedevoError("stop here")

    monkeypatch.setattr(runner, "_check_reachable", lambda address, timeout: None)
    monkeypatch.setattr(runner, "make_runner", make_runner)
    with pytest.raises(FedevoError, match="stop here"):
        fedevo.retrain(run_dir, "knee", rounds=1, ray_address="10.0.0.1:6379", cpus_per_task=2, out=tmp_path / "r2")
    assert (asked["address"], asked["cpus_per_task"], asked["workers"]) == ("10.0.0.1:6379", 2, 1)


def test_retrain_workers_auto_decides_as_the_search_does(run_dir, tmp_path, capsys, monkeypatch):
    """`--workers auto` (the default) was refused ('Input should be a valid integer'), and the default trained on a
    local Ray of a worker per core even where the search, on 2 cores, evaluates in-process (the 2026-11-27 audit)."""
    import fedevo.searching.runner as runner

    monkeypatch.setattr(runner, "cores", lambda: 2)
    code, out, err = cli(["retrain", str(run_dir), "--pick", "knee", "--rounds", "1", "--workers", "auto",
                          "--out", tmp_path / "rt", "--quiet"], capsys)
    assert code == 0, err
    assert "fedevo: --workers auto: in-process: this machine has 2 cores" in err
    assert not (tmp_path / "rt" / "ray.log").exists()


def test_retrain_run_without_evaluations(tmp_path, capsys):
    from fedevo.searching.run import SearchRun, SearchSettings

    SearchRun.create(SearchSettings(problem="digits_mlp", pop=8, gen=1, seed=0), tmp_path / "fresh")
    code, out, err = cli(["retrain", str(tmp_path / "fresh"), "--rounds", "2", "--quiet"], capsys)
    assert code == 2 and "holds no evaluations yet" in err and err.count("\n") == 1


def test_standard_overrides_are_validated_and_used():
    from fedevo.retraining import standard_problem
    from fedevo.problem import load_problem

    p = standard_problem(load_problem("digits_mlp"))
    cfg = p.sim_config({"participation": 1.0})
    assert cfg.participation == 1.0 and cfg.alpha is None and cfg.privacy.mechanism == "none"
    import pytest
    from fedevo.errors import FedevoError
    with pytest.raises(FedevoError):
        p.sim_config({"participation": 3.0})


@pytest.mark.parametrize("standard", ['{"sigma": 1.0}', '{"mechanism": "update", "trust": "central"}',
                                      '{"alpha": 8}', '{"participation": 1.0, "xi": 0.2}'])
def test_standard_refuses_privacy_and_sparsity_keys(run_dir, tmp_path, capsys, standard):
    """The standard is dense, non-private FedAvg by name and in the report: a privacy or sparsity override trained
    another baseline under that label (a central σ = 1, SET α = 8 standard was reported as "dense, no privacy"),
    and sigma alone changed nothing. Refused in one line, nothing trained or written."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    code, out, err = cli(["retrain", str(run), "--pick", "knee", "--rounds", "1", "--workers", "0", "--quiet",
                          "--standard", standard], capsys)
    assert code == 2 and err.count("\n") == 1 and "cannot be set: the standard solution is dense and non-private" in err
    assert not (run / "retrain").exists()


def test_retrain_never_overwrites_an_earlier_report(run_dir, tmp_path, capsys):
    """Issue 14: a second retrain writes retrain-2/ (then retrain-3/...); the first report stays byte for byte."""
    import hashlib
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    argv = ["retrain", str(run), "--pick", "knee", "--rounds", "1", "--workers", "0", "--quiet"]
    code, out, err = cli(argv, capsys)
    assert code in (0, None), err
    assert f"wrote {run / 'retrain'}/" in out
    first = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (run / "retrain").iterdir()}
    assert "report.csv" in first
    code, out, err = cli(argv, capsys)
    assert code in (0, None), err
    assert f"wrote {run / 'retrain-2'}/" in out and (run / "retrain-2" / "report.csv").is_file()
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (run / "retrain").iterdir()} == first
    code, out, err = cli(argv, capsys)
    assert f"wrote {run / 'retrain-3'}/" in out


# ---------------------------------------------------------------- issue 25: the standard is the default privacy object
def _variant(tmp_path, base: str, privacy: dict, name: str):
    """A copy of a bundled problem with `[privacy]` keys set (None: removed)."""
    import tomllib

    from fedevo.problem import problems_dir

    doc = tomllib.loads((problems_dir() / f"{base}.toml").read_text())
    for k, v in privacy.items():
        if v is None:
            doc["privacy"].pop(k, None)
        else:
            doc["privacy"][k] = v
    if "mechanism" in doc["privacy"]:  # genes the new mechanism does not take are refused at load: dropped
        from fedevo.privacy import registry

        own = set(registry.mechanism(doc["privacy"]["mechanism"]).keys)
        doc["genes"] = {g: t for g, t in doc["genes"].items() if g not in registry.mechanism_keys() or g in own}

    def val(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(val(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{ " + ", ".join(f"{k} = {val(x)}" for k, x in v.items()) + " }"
        return repr(v)

    lines = [f"{k} = {val(v)}" for k, v in doc.items() if not isinstance(v, dict)]
    for section, table in doc.items():
        if isinstance(table, dict):
            lines += ["", f"[{section}]"] + [f"{k} = {val(v)}" for k, v in table.items()]
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return load_problem(str(path))


def test_standard_of_every_bundled_problem_is_the_default_privacy_object():
    from fedevo.config import PrivacyConfig
    from fedevo.problem import list_problems

    for name in list_problems():
        p = load_problem(name)
        cfg = standard_problem(p).sim_config()
        assert cfg.privacy == PrivacyConfig(), name
        assert cfg.alpha is None and cfg.xi == 0.0 and cfg.data == p.sim_config().data, name


VARIANTS = {
    "target_eps": ("digits_mlp", {"target_eps": 2.0}),
    "preset": ("digits_mlp_local", {"mechanism": None, "preset": "dp-fedavg", "recall": None}),
    "trust_secagg": ("digits_mlp", {"trust": "secagg", "sampling": None}),
    "eps_budget": ("digits_mlp_local", {"eps_budget": 40.0}),
    "clip_rule_median": ("digits_mlp_local", {"mechanism": "step", "clip_rule": "median", "recall": None}),
}


@pytest.mark.parametrize("case", sorted(VARIANTS))
def test_retrain_works_whatever_the_problem_fixes(case, tmp_path):
    """Issue 25: retrain (standard included) of a problem that fixes target_eps, a preset, trust = "secagg",
    eps_budget or clip_rule = "median" (the standard used to be refused or mis-built)."""
    from fedevo.config import PrivacyConfig
    from fedevo.searching.run import Runtime, SearchSettings, search

    base, privacy = VARIANTS[case]
    prob = _variant(tmp_path, base, privacy, f"v_{case}")
    assert standard_problem(prob).sim_config().privacy == PrivacyConfig()
    run = tmp_path / "run"
    search(SearchSettings(problem=prob.path, pop=8, gen=1, seed=0, rounds=1), run, Runtime(workers=0))
    rep = retrain(run, "lowest-error:1", rounds=2, workers=0, write=False, eval_every=0)
    std = rep.standard
    assert std.status == "ok" and std.eps == math.inf and std.privacy["mechanism"] == PrivacyConfig().mechanism
    picked = [rep.results[s.key] for s in rep.solutions if not s.is_standard]
    assert picked and all(r.status == "ok" and math.isfinite(r.eps) for r in picked)


def signal_in_training(monkeypatch, n: int, sig: str = "SIGINT") -> list:
    """fedevo.retraining's trainings hooked: the n-th sends this process `sig` as it starts (a real Ctrl-C or
    SIGTERM, which user-code containment does not take for the code's own); the list counts the trainings."""
    import os
    import signal

    import fedevo.retraining as rt

    calls, real = [], rt.retrain_evaluate

    def evaluate(*a, **kw):
        calls.append(1)
        if len(calls) == n:
            os.kill(os.getpid(), getattr(signal, sig))
        return real(*a, **kw)

    monkeypatch.setattr(rt, "retrain_evaluate", evaluate)
    return calls


@pytest.mark.parametrize("sig,code,how", [("SIGINT", 130, "interrupted"), ("SIGTERM", 143, "stopped by SIGTERM")])
def test_retrain_stopped_says_so_and_the_same_command_continues(run_dir, tmp_path, capsys, monkeypatch, sig, code,
                                                                 how):
    # Ctrl-C / SIGTERM during the second training: one line saying that the finished trainings are kept and how to
    # go on, exit 130 / 143 as `fedevo search` (it used to exit 130 for both, silently, and lose every finished
    # training); the same command then trains only what is missing, and its report equals an uninterrupted one's
    from fedevo.errors import Terminated

    calls = signal_in_training(monkeypatch, 2, sig)
    monkeypatch.setattr(Terminated, "received", False)  # a SIGTERM marks the process; this test is one process
    before = sorted(p.name for p in run_dir.iterdir())
    argv = ["retrain", str(run_dir), "--pick", "knee,lowest-error:1", "--rounds", "2", "--workers", "0", "--quiet",
            "--out", str(tmp_path / "rt")]
    code_, out, err = cli(argv, capsys)
    assert code_ == code and len(calls) == 2
    assert err.strip().splitlines()[-1] == (f"fedevo: {how}; any training that finished is kept (the report is "
                                            "written once every training has finished); run the same command "
                                            "again to continue")
    assert sorted(p.name for p in run_dir.iterdir()) == before and not (tmp_path / "rt" / "report.csv").exists()
    monkeypatch.setattr(Terminated, "received", False)
    code_, out, err = cli(argv, capsys)
    assert code_ in (0, None), err
    n = len(read_csv(tmp_path / "rt" / "report.csv"))
    assert len(calls) == 2 + (n - 1)  # the first training was not done again
    assert "continuing" in err and f"1 of {n} trainings were kept" in err
    assert sorted(p.name for p in (tmp_path / "rt").iterdir()) == ["curves.html", "report.csv", "report.md",
                                                                  "results.json"]
    retrain(run_dir, "knee,lowest-error:1", rounds=2, workers=0, out=tmp_path / "whole")  # uninterrupted

    def numbers(out):
        res = json.loads((out / "results.json").read_text())
        rows = [{k: v for k, v in r.items() if k != "wall_s"} for r in read_csv(out / "report.csv")]
        return rows, [{k: v for k, v in x["result"].items() if k != "wall_s"} for x in res["solutions"]]

    assert numbers(tmp_path / "rt") == numbers(tmp_path / "whole")


def test_a_retrain_stopped_before_any_training_finished_is_continued_and_says_so(run_dir, tmp_path, capsys,
                                                                                 monkeypatch):
    """The same command continues a retrain stopped in its first training (nothing kept) and says so, as the docs
    say of any stopped retrain: it printed no 'continuing' line there."""
    from fedevo.errors import Terminated

    calls = signal_in_training(monkeypatch, 1, "SIGINT")
    argv = ["retrain", str(run_dir), "--pick", "knee", "--rounds", "2", "--workers", "0", "--quiet", "--out",
            str(tmp_path / "rt")]
    code_, out, err = cli(argv, capsys)
    assert code_ == 130 and len(calls) == 1
    monkeypatch.setattr(Terminated, "received", False)
    code_, out, err = cli(argv, capsys)
    assert code_ in (0, None), err
    n = len(read_csv(tmp_path / "rt" / "report.csv"))
    assert f"fedevo: continuing {tmp_path / 'rt'}: 0 of {n} trainings were kept" in err, err


def test_a_different_retrain_never_continues_kept_trainings(run_dir, tmp_path, capsys, monkeypatch):
    # trainings kept by a stopped retrain are continued only by the same plan (run, picks, rounds, seed,
    # standard); another plan takes a new report directory and the kept ones stay
    import fedevo.retraining as rt

    real = rt.retrain_evaluate
    signal_in_training(monkeypatch, 2)  # Ctrl-C during the second training
    with pytest.raises(KeyboardInterrupt):
        retrain(run_dir, "knee", rounds=2, workers=0, out=tmp_path / "rt")
    assert sorted(p.name for p in (tmp_path / "rt").iterdir()) == [".kept"]
    monkeypatch.setattr(rt, "retrain_evaluate", real)
    with pytest.raises(FedevoError, match=r"holds the kept trainings of a stopped retrain of another plan \(rounds 2, "
                                          r"seed \d+, device cpu, precision (fp32|bf16), picked ids \d+\): run that retrain again to continue "
                                          "it, or remove"):
        retrain(run_dir, "knee", rounds=3, workers=0, out=tmp_path / "rt")
    with pytest.raises(FedevoError, match="holds the kept trainings of a stopped retrain of another plan"):
        retrain(run_dir, "knee", rounds=2, seed=7, workers=0, out=tmp_path / "rt")
    rep = retrain(run_dir, "knee", rounds=2, workers=0, out=tmp_path / "rt")  # the same plan: continued
    assert rep.out_dir == tmp_path / "rt" and not (tmp_path / "rt" / ".kept").exists()


def test_report_gives_each_picks_search_seed_and_rounds_which_reproduce_the_search(run_dir, tmp_path):
    # the search evaluated each pick with its own seed, retraining every solution with one (the run's): the report
    # names the search's seed and rounds per pick (it did not, so retrained numbers at the search's rounds looked
    # unlike the search's), and a pick retrained with them gives the search's numbers exactly
    data = load_run(run_dir)
    report = retrain(run_dir, "knee,lowest-error:2", rounds=2, workers=0, out=tmp_path / "rt")
    rows = read_csv(tmp_path / "rt" / "report.csv")
    md = (tmp_path / "rt" / "report.md").read_text()
    for s, row in zip(report.solutions, rows):
        if s.is_standard:
            assert row["search_seed"] == row["search_rounds"] == ""
            continue
        ev = next(r for r in data.rows if r["id"] == s.id)
        assert row["search_seed"] == str(ev["seed"]) and row["search_rounds"] == str(ev["rounds_trained"])
        assert f"| {ev['rounds_trained']} | {ev['seed']} |" in md
        again = retrain(run_dir, str(s.id), rounds=int(row["search_rounds"]), seed=int(row["search_seed"]),
                        workers=0, write=False).results["1"]
        assert (again.error, again.comm, again.eps) == (ev["error"], ev["comm"], ev["eps"])


def test_report_says_what_each_eps_holds_under(run_dir, tmp_path, capsys):
    # report.md and the terminal state the picked solutions' trust model, neighbouring relation and accountant as
    # their trainings recorded them (report.md said only "ε at the problem's δ"; curves.html trust, δ, N, M)
    code, out, err = cli(["retrain", str(run_dir), "--pick", "knee,lowest-error:2", "--rounds", "2", "--workers", "0",
                          "--out", str(tmp_path / "rt")], capsys)
    assert code in (0, None), err
    priv = json.loads((tmp_path / "rt" / "results.json").read_text())["solutions"][0]["result"]["privacy"]
    assert priv["neighbouring"] and priv["accountant"]
    md = (tmp_path / "rt" / "report.md").read_text()
    for text in (md, out):
        line = next(ln for ln in text.splitlines() if "holds under" in ln)
        for k in ("trust", "neighbouring", "accountant"):
            assert f"{k} {priv[k]}" in line, (k, line)


def test_eps_cells_keep_small_eps_readable(run_dir):
    # 3 decimals turned a search ε of 0.00336 into "0.003" beside the front's 0.0034, and any ε < 0.0005 into
    # "0.000": small ε keep 3 significant digits (report.csv, report.md and the terminal print these cells)
    from dataclasses import replace

    report = retrain(run_dir, "knee", rounds=1, workers=0, write=False)
    sol = replace(report.solutions[0], search={**report.solutions[0].search, load_run(run_dir).eps_key: 0.003360092})
    for eps, cell in ((0.00034, "0.000340"), (0.052236, "0.0522"), (8.3191, "8.319"), (56267.5431, "56267.543")):
        report.results[sol.key] = replace(report.results[sol.key], eps=eps)
        assert (report.cells(sol)["eps"], report.cells(sol)["search_eps"]) == (cell, "0.00336")


def test_bad_gpus_per_task_is_one_line_before_any_work(run_dir, tmp_path, capsys):
    # it was checked after the workers were decided and the progress bar had started: three lines on stderr
    code, out, err = cli(["retrain", str(run_dir), "--pick", "knee", "--rounds", "1", "--gpus-per-task", "-1",
                          "--out", str(tmp_path / "rt")], capsys)
    assert code == 2 and out == "" and not (tmp_path / "rt").exists()
    assert err.strip() == "fedevo: error: --gpus-per-task must be >= 0, got -1.0"


def test_own_evaluators_eps_is_not_called_no_privacy(tmp_path):
    # a problem's own evaluator reports its ε without fedevo's mechanism names: the report says its ε is the
    # evaluator's and that fedevo does not know its trust model (the claims line said "no privacy (ε = ∞)")
    import fedevo

    (tmp_path / "ev.py").write_text(
        "def evaluate(problem, params, *, seed, rounds=None, data_dir=None):\n"
        "    w = params['width']\n"
        "    return {'error': 1 / (1 + w), 'comm': w, 'eps': 10 / w, 'privacy': {'note': 'own'}}\n")
    (tmp_path / "own.toml").write_text('name = "own"\nevaluator = "python:ev.py:evaluate"\n[genes]\n'
                                       'width = { type = "int", low = 1, high = 16, default = 4 }\n')
    run = fedevo.search(str(tmp_path / "own.toml"), pop=4, gen=1, workers=0, seed=1, out=tmp_path / "r", page=False)
    report = fedevo.retrain(run, "lowest-error", rounds=2, workers=0)
    assert math.isfinite(report.results["1"].eps)
    assert report.privacy_claims() == ["every picked solution's ε is as the problem's own evaluator computes it "
                                       "(fedevo does not know its trust model or accountant)"]
    assert "Every picked solution's ε is as the problem's own evaluator" in (report.out_dir / "report.md").read_text()


def test_a_continuation_on_another_device_or_dataset_directory_takes_a_report_directory_of_its_own(
        run_dir, tmp_path, monkeypatch):
    """A stopped retrain's plan holds the device its trainings ran on and the dataset directory they read: a
    continuation on another device (CUDA's numbers equal the CPU's within a tolerance only) or with another
    --data-dir of a dataset read from files takes a new retrain-N, as another --seed does (it mixed trainings of
    both in one report); another --data-dir of a dataset made in memory (digits) still continues."""
    import fedevo.hardware as hw
    from fedevo import retrain_kept
    from fedevo.retraining import data_read, report_dir

    run = shutil.copytree(run_dir, tmp_path / "run")
    calls = signal_in_training(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        retrain(run, "knee", rounds=2, workers=0)
    assert json.loads((run / "retrain" / ".kept" / "plan.json").read_text())["device"] == "cpu"
    real = hw.training_device
    monkeypatch.setattr(hw, "training_device", lambda *a, **kw: "cuda")  # (it still trains on the CPU here)
    with pytest.raises(FedevoError, match=r"retrain holds the kept trainings of this retrain made with device cpu "
                                          r"\(here cuda\)"):
        retrain(run, "knee", rounds=2, workers=0, out=run / "retrain")
    monkeypatch.setattr(hw, "training_device", real)
    (tmp_path / "elsewhere").mkdir()
    rep = retrain(run, "knee", rounds=2, workers=0, data_dir=str(tmp_path / "elsewhere"))  # digits: no files read
    assert rep.out_dir == run / "retrain" and len(calls) == 3 and not (run / "retrain-2").exists()
    # a dataset read from files: another directory is another plan, the same one (however written) the same
    fashion = load_problem("fashion_mlp")
    assert data_read(fashion, str(tmp_path / "a")) != data_read(fashion, str(tmp_path / "b"))
    assert data_read(fashion, str(tmp_path / "a")) == data_read(fashion, str(tmp_path / "x" / ".." / "a"))
    assert data_read(load_problem("digits_mlp"), str(tmp_path / "a")) is None
    sols = rep.solutions
    plans = [retrain_kept.plan_of(run_dir=run, solutions=sols, rounds=2, seed=0, eval_every=1, standard=None,
                                  data=data_read(fashion, str(tmp_path / d))) for d in "ab"]
    retrain_kept.start(run / "retrain-2", plans[0]).close()
    assert report_dir(run, None, plans[0]) == run / "retrain-2"
    assert report_dir(run, None, plans[1]) == run / "retrain-3"


def test_a_stopped_retrain_into_the_run_is_continued_there(run_dir, tmp_path, monkeypatch):
    # without --out: the stopped retrain's RUN/retrain holds the kept trainings; the same command continues it
    # there (not in a new retrain-2)
    import shutil

    run = shutil.copytree(run_dir, tmp_path / "run")
    calls = signal_in_training(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        retrain(run, "knee", rounds=2, workers=0)
    rep = retrain(run, "knee", rounds=2, workers=0)
    assert rep.out_dir == run / "retrain" and len(calls) == 3 and not (run / "retrain-2").exists()
    assert (run / "retrain" / "report.csv").exists() and not (run / "retrain" / ".kept").exists()


def test_a_sigterm_of_an_earlier_command_does_not_name_a_later_ctrl_c(run_dir, tmp_path, capsys, monkeypatch):
    # fedevo.cli.main run twice in one process (a notebook, a test): the first stopped by SIGTERM marks the
    # process; a Ctrl-C of the second is still a Ctrl-C (exit 130, "interrupted"), not "stopped by SIGTERM", 143
    from fedevo.errors import Terminated

    signal_in_training(monkeypatch, 1)
    monkeypatch.setattr(Terminated, "received", True)  # as an earlier command's SIGTERM leaves it
    code, _, err = cli(["retrain", str(run_dir), "--pick", "knee", "--rounds", "2", "--workers", "0", "--quiet",
                        "--out", str(tmp_path / "rt")], capsys)
    assert code == 130 and err.strip().splitlines()[-1].startswith("fedevo: interrupted; ")


def test_a_retrain_running_keeps_its_directory_to_itself(run_dir, tmp_path, monkeypatch):
    # while a retrain writes its report directory (its .kept/ locked), another of the same plan neither continues
    # it nor trains into it: without --out it takes a directory of its own, with --out naming it it is one line
    import fcntl
    import shutil

    from fedevo import dirlock, retrain_kept

    run = shutil.copytree(run_dir, tmp_path / "run")
    signal_in_training(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        retrain(run, "knee", rounds=2, workers=0)  # run/retrain holds the first training, kept
    import fedevo.retraining as rt

    monkeypatch.undo()
    assert rt.retrain_evaluate.__name__ == "retrain_evaluate"
    with open(run / "retrain" / retrain_kept.KEPT / dirlock.LOCK, "a+") as held:  # as a running retrain holds it
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        rep = retrain(run, "knee", rounds=2, workers=0)
        assert rep.out_dir == run / "retrain-2"
        with pytest.raises(FedevoError, match="another fedevo retrain is writing"):
            retrain(run, "knee", rounds=2, workers=0, out=run / "retrain")
    rep = retrain(run, "knee", rounds=2, workers=0)  # let go: the stopped one is continued
    assert rep.out_dir == run / "retrain" and not (run / "retrain" / ".kept").exists()


def test_two_retrains_starting_at_once_do_not_share_a_directory(tmp_path):
    # the race the check above cannot see (both found the same new directory): the second to lock it is one line
    from fedevo import retrain_kept

    plan = {"rounds": 2}
    with retrain_kept.start(tmp_path / "rt", plan):
        with pytest.raises(FedevoError, match="another fedevo retrain is writing"):
            retrain_kept.start(tmp_path / "rt", plan)
    with retrain_kept.start(tmp_path / "rt", plan):  # released: it can be taken again
        pass


def test_what_cannot_be_kept_is_trained_again(run_dir, tmp_path, monkeypatch, capsys):
    # a failed training is not kept (a Ray worker stopped by the Ctrl-C comes back failed: kept, it was never
    # trained again), and a result that does not pickle is one warning line, not a traceback that ends the retrain
    import threading

    from dataclasses import replace

    from fedevo import retrain_kept
    from fedevo.result import EvaluationResult

    d = tmp_path / "rt"
    (d / retrain_kept.KEPT).mkdir(parents=True)
    ok = EvaluationResult(error=0.1, comm=1.0, eps=1.0, eps_paper=1.0, accuracy_global=0.9, omega=1)
    retrain_kept.keep(d, "1", ok)
    retrain_kept.keep(d, "2", replace(ok, status="failed"))
    retrain_kept.keep(d, "3", replace(ok, privacy={"lock": threading.Lock()}))
    assert set(retrain_kept.load(d)) == {"1"}
    assert "training 3's result cannot be kept for a continuation (TypeError" in capsys.readouterr().err


def test_the_progress_names_each_training_and_counts_the_kept_ones(run_dir, tmp_path, monkeypatch):
    # the progress (rounds done of all, which training) of a fresh retrain, round by round in-process, and of one
    # continued after a stop in its second training: the kept training counts as done, the next named is the
    # first missing one (the index arithmetic over kept and missing trainings, checked 2026-11-27)
    import fedevo.retraining as rt

    def recorded(**kw):
        seen = []
        retrain(run_dir, "knee,lowest-error:1", rounds=2, workers=0, progress=lambda *a: seen.append(a), **kw)
        return seen

    fresh = recorded(out=tmp_path / "fresh")
    names = [n for _, _, n in fresh if n.endswith(" done")]
    n = len(names)
    assert n >= 2 and fresh[0] == (0, 2 * n, f"{n} trainings")
    assert [d for d, _, _ in fresh[1:]] == [d for k in range(n) for d in (2 * k + 1, 2 * k + 2, 2 * k + 2)]
    assert [x for _, _, x in fresh[1:]] == [x for done in names for x in (done[:-5],) * 2 + (done,)]
    real = rt.retrain_evaluate
    signal_in_training(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        recorded(out=tmp_path / "cont")
    monkeypatch.setattr(rt, "retrain_evaluate", real)
    assert recorded(out=tmp_path / "cont") == [(2, 2 * n, f"{n} trainings")] + fresh[4:]


def test_a_diverged_retraining_never_reads_as_a_result(tmp_path, capsys):
    """A pick whose retraining diverges: the terminal table names its status, its ε line says it is not measured,
    results.json holds null (not the stand-ins error 1 and ε "inf", which read as a model and as no privacy), and a
    retrain whose every pick gave no result exits 2 (it exited 0)."""
    import fedevo

    prob = tmp_path / "boom.toml"
    prob.write_text('name = "boom"\ndataset = "digits"\nmodel = "mlp"\n[data]\nclients = 4\n[train]\nrounds = 2\n'
                    'epochs = 1\nbatch_size = 16\n[privacy]\nmechanism = "update"\nsigma = 1.0\nclip = 1.0\n'
                    '[genes]\nlr = { type = "real", low = 1e8, high = 1e9, default = 1e8 }\n')
    with pytest.raises(FedevoError, match="no evaluation gave a result"):
        fedevo.search(str(prob), pop=3, gen=1, workers=0, out=tmp_path / "run", page=False, progress=False)
    code, out, err = cli(["retrain", str(tmp_path / "run"), "--pick", "0", "--rounds", "1", "--workers", "0"], capsys)
    assert code == 2 and "no picked solution's retraining gave a result (1 (id 0) diverged)" in err, err
    assert "diverged" in out and "is not measured: its retraining diverged" in out
    got = json.loads((tmp_path / "run" / "retrain" / "results.json").read_text())["solutions"][0]["result"]
    assert got["status"] == "diverged" and got["error"] is None and got["eps"] is None and got["comm"] is None
    # the Python API decides it, as a search's: RetrainFailedError (a FedevoError) carrying the written report
    from fedevo.errors import RetrainFailedError

    with pytest.raises(RetrainFailedError, match=r"^no picked solution's retraining gave a result \(1 \(id 0\) "
                                                 r"diverged\); see .*retrain-2/report.md$") as e:
        fedevo.retrain(tmp_path / "run", "0", rounds=1, workers=0)
    assert e.value.report.out_dir == tmp_path / "run" / "retrain-2" and (e.value.report.out_dir / "report.md").exists()


def test_the_claim_names_what_the_eps_does_not_cover_and_a_conditional_eps(run_dir):
    """A local ε counts the most exposed simulated client's uploads, not the rounds retrained, and a median clip
    makes it conditional (not a DP guarantee alone): the claim line said neither."""
    from dataclasses import replace

    report = retrain(run_dir, "knee", rounds=1, workers=0, write=False)
    key = report.solutions[0].key
    r = report.results[key]
    from fedevo.privacy.local import NOT_COVERED

    report.results[key] = replace(r, privacy={**r.privacy, "trust": "local", "eps_conditional": True,
                                              "not_covered": NOT_COVERED})
    (line,) = report.privacy_claims()
    assert f"not covered: {NOT_COVERED}" in line and "most exposed simulated client" in NOT_COVERED
    assert "conditional: it holds given the data-dependent clip values" in line


def test_eps_comparison_names_the_recorded_reason_when_the_rounds_differ():
    """ε fell from 1.78k at 5 rounds to 931 at 8 (the most exposed client joined fewer rounds): the page said "ε
    grows with the rounds a user can join"."""
    from fedevo.viz.curves import eps_comparison

    got = eps_comparison(931.0, 8, 1780.0, 5, changed=["participations_max 1 here, 2 in the search"])
    assert "participations_max 1 here, 2 in the search" in got and "grows" not in got
    assert "its accounting differs" in eps_comparison(931.0, 8, 1780.0, 5)


@pytest.mark.parametrize("standard", ['{"clients": 10}', '{"rounds": 3}', '{"upload_loss": 0.0}'])
def test_standard_refuses_what_every_solution_shares(run_dir, tmp_path, capsys, standard):
    """--standard '{"upload_loss": 0.0, "clients": 10, "rounds": 3}' trained the standard on a 10-client split
    without upload loss (its accuracy 0.9500 → 0.9694, the picks' '% of standard' moved) while report.md said every
    solution trained on the same data; `rounds` was ignored and recorded as 3. Refused in one line."""
    run = tmp_path / "run"
    shutil.copytree(run_dir, run)
    code, out, err = cli(["retrain", str(run), "--pick", "knee", "--rounds", "1", "--workers", "0", "--quiet",
                          "--standard", standard], capsys)
    assert code == 2 and err.count("\n") == 1 and "trains on the same data for the same rounds" in err, err
    assert not (run / "retrain").exists()


def test_the_report_says_what_the_standard_was_given_and_what_the_search_measured(run_dir, tmp_path):
    """report.md names the --standard settings (a participation of 1 read as the problem's default); results.json
    holds the search's numbers report.md shows (error, comm, ε, rounds, seed), the pick and fedevo's version."""
    report = retrain(run_dir, "knee", rounds=1, workers=0, standard={"participation": 1.0}, out=tmp_path / "rt")
    md = (tmp_path / "rt" / "report.md").read_text()
    assert "except participation = 1.0 (set by standard=)" in md
    js = json.loads((tmp_path / "rt" / "results.json").read_text())
    assert js["pick"] == "knee" and js["standard_overrides"] == {"participation": 1.0} and js["fedevo"]
    sol, std = js["solutions"]
    row = report.solutions[0].search
    assert sol["search"]["error"] == row["error"] and sol["search"]["eps"] == row["eps"]
    assert sol["search"]["seed"] == int(row["seed"]) and sol["search"]["rounds"] == int(row["rounds_trained"])
    assert std["search"] is None


def test_the_search_eps_beside_the_retrained_one_is_the_accountants(run_dir):
    """A search that minimised the paper's ε (eps_objective = "eps_paper") put its paper ε beside the retrained
    accountant ε (report's search ε 18.4 against ε 174 and curves.html blaming participations; the search's
    accountant ε was 136.9). Like for like now."""
    from dataclasses import replace

    report = retrain(run_dir, "knee", rounds=1, workers=0, write=False)
    report.eps_key = "eps_paper"
    sol = replace(report.solutions[0], search={**report.solutions[0].search, "eps": 136.9, "eps_paper": 18.4})
    assert report.cells(sol)["search_eps"] == "136.900"


def test_a_target_eps_recalibration_is_said_not_blamed_on_the_rounds(run_dir):
    """With target_eps the noise is calibrated for the rounds trained: retrained for 40 rounds, σ 0.933 against the
    search's 0.872 at 10, ε 1 both times; curves.html said 'ε grows with the rounds a user can join' and no report
    showed σ. Now both say the σ of each and why."""
    from dataclasses import replace

    report = retrain(run_dir, "knee", rounds=1, workers=0, write=False)
    s = report.solutions[0]
    priv = dict(s.search.get("privacy") or {})
    sol = replace(s, search={**s.search, "privacy": {**priv, "sigma": 0.872}, "eps": 1.0, "rounds_trained": 10})
    report.solutions[0] = sol
    r = report.results[sol.key]
    report.results[sol.key] = replace(r, privacy={**(r.privacy or {}), "sigma": 0.933}, eps=0.9995)
    want = "σ 0.933 here, 0.872 in the search: the target ε sets the noise for the rounds trained"
    assert want in report.markdown()
    text = report.privacy_rows()[0]["eps_text"]
    assert want in text and "grows" not in text, text
    report.results[sol.key] = replace(r, privacy={**(r.privacy or {}), "sigma": 0.872})
    assert "σ" not in report.markdown() and "σ" not in report.privacy_rows()[0]["eps_text"]


def test_a_run_searched_with_another_evaluator_is_retrained_with_a_warning(tmp_path, capsys):
    """`fedevo search --evaluator` replaces the evaluator for one search; retrain trains with the problem's own
    (docs/api.md). It did so without a word, and report.md said the search's rounds and seed give the search's
    numbers again (an evaluator adding 0.1 to the error: 0.1278 retrained against the search's 0.2278)."""
    import fedevo
    from tests.searching.search_helpers import FAKE, toy_problem_file

    fedevo.search(toy_problem_file(tmp_path), out=tmp_path / "R", workers=0, seed=1, evaluator=FAKE, page=False,
                  optimizer="random", pop=2, budget=2, progress=False)
    capsys.readouterr()
    retrain(tmp_path / "R", "knee", rounds=1, workers=0, out=tmp_path / "rt")
    err = capsys.readouterr().err
    assert f"fedevo: warning: the search evaluated with {FAKE} (evaluator=)" in err, err
    md = (tmp_path / "rt" / "report.md").read_text()
    assert "so its numbers are not the search's" in md and "gives the search's numbers again" not in md
    assert json.loads((tmp_path / "rt" / "results.json").read_text())["search_evaluator"] == FAKE


def test_where_a_training_runs_is_said_before_it_runs(monkeypatch):
    """hardware.training_device (a retrain's plan): a Ray task of 'auto' trains on the GPU it reserved, else on
    the CPU (the runner hides the GPUs), whatever the driver sees; FEDEVO_DEVICE and 'cpu' / 'cuda' decide."""
    import torch

    from fedevo.hardware import training_device

    monkeypatch.delenv("FEDEVO_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert training_device("auto", in_process=False, gpus_per_task=0) == "cpu"
    assert training_device("auto", in_process=False, gpus_per_task=0.5) == "cuda"
    assert training_device("auto", in_process=True) == "cuda"
    assert training_device("cpu", in_process=True) == training_device("cpu", in_process=False, gpus_per_task=1) == "cpu"
    assert training_device("cuda", in_process=False) == "cuda"
    monkeypatch.setenv("FEDEVO_DEVICE", "cpu")
    assert training_device("auto", in_process=True) == training_device("auto", in_process=False,
                                                                        gpus_per_task=1) == "cpu"


def test_report_md_says_why_a_recalling_solutions_comm_differs_from_the_searchs(tmp_path):
    """Under local trust with recall, comm is measured per run: a recalled update costs one index instead of Ω
    parameters and a client's first upload has nothing to recall, so the share recalled grows with the rounds and
    comm per round falls (676.7 at 10 rounds, 433.9 at 30 in a user's retrain, unexplained). report.md says so in
    one sentence with both comms and both recall counts; a run whose comm is planned says nothing."""
    from fedevo.problem import problems_dir
    from fedevo.searching.run import Runtime, SearchSettings, search

    text = (problems_dir() / "digits_mlp_local.toml").read_text()
    text = text.replace('tau = { type = "real", low = 0.0, high = 0.5, default = 0.3 }',
                        'tau = { type = "real", low = 0.49, high = 0.5, default = 0.5 }')  # recalls from round 2
    (tmp_path / "recall.toml").write_text(text.replace('name = "digits_mlp_local"', 'name = "recall"', 1))
    run = tmp_path / "run"
    search(SearchSettings(problem=str(tmp_path / "recall.toml"), pop=4, gen=1, seed=0, rounds=2), run,
           Runtime(workers=0))
    rep = retrain(run, "lowest-error:1", rounds=6, workers=0, out=tmp_path / "rt", eval_every=0)
    s = next(s for s in rep.solutions if not s.is_standard)
    r, srch = rep.results[s.key], s.search
    assert r.privacy["recalls"] > srch["privacy"]["recalls"] and r.comm < srch["comm"]  # the share recalled grew
    md = (tmp_path / "rt" / "report.md").read_text()
    line = next(ln for ln in md.splitlines() if ln.startswith("Comm is measured per run"))
    cells = rep.cells(s)
    assert f"(solution {s.key}: {cells['comm']} at 6 rounds, {cells['search_comm']} in the search at 2 rounds" in line
    assert f"updates recalled {r.privacy['recalls']} of " in line and "costs one index instead of Ω" in line
    assert "solution standard" not in line  # no privacy: comm as planned, the search's had none


def test_report_md_says_nothing_of_comm_where_it_is_planned(run_dir, tmp_path):
    rep = retrain(run_dir, "knee", rounds=3, workers=0, out=tmp_path / "rt", eval_every=0)
    assert rep.comm_note() == "" and "Comm is measured" not in (tmp_path / "rt" / "report.md").read_text()


def test_a_continuation_in_another_precision_or_by_another_fedevo_is_not_continued_and_says_why(
        run_dir, tmp_path, monkeypatch, capsys):
    """plan.json records the compute precision the trainings run in ('auto': bf16 where the CPU has native bf16)
    and fedevo's source hash: the same command on a CPU of the other precision, or by another fedevo, continued the
    kept trainings and mixed bf16 and fp32 (or two programs') numbers in one report. Now it takes a report directory
    of its own with one note saying why (with --out: refused in one line naming the difference)."""
    import fedevo.hardware as hw
    import fedevo.searching.versions as versions

    run = shutil.copytree(run_dir, tmp_path / "run")
    calls = signal_in_training(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        retrain(run, "knee", rounds=2, workers=0)
    plan = json.loads((run / "retrain" / ".kept" / "plan.json").read_text())
    here = hw.precision("auto", "cpu").name
    assert plan["precision"] == here and plan["fedevo_source"] == versions.source_hash()
    other = "fp32" if here == "bf16" else "bf16"
    real = hw.precision
    monkeypatch.setattr(hw, "precision", lambda setting, device="cpu": hw.Precision(other, "a CPU of the other kind"))
    with pytest.raises(FedevoError, match=rf"retrain holds the kept trainings of this retrain made with precision "
                                          rf"{here} \(here {other}\): continued here they would mix numbers of both"):
        retrain(run, "knee", rounds=2, workers=0, out=run / "retrain")
    capsys.readouterr()
    rep = retrain(run, "knee", rounds=2, workers=0)
    assert rep.out_dir == run / "retrain-2" and (run / "retrain" / ".kept").is_dir()
    assert (f"fedevo: note: {run / 'retrain'} holds the kept trainings of this retrain made with precision {here} "
            f"(here {other}): not continued (its numbers would not be this machine's and fedevo's); training anew in "
            f"{run / 'retrain-2'}") in capsys.readouterr().err
    monkeypatch.setattr(hw, "precision", real)
    program = versions.program  # (plan_of asks it at each retrain)
    monkeypatch.setattr(versions, "program", lambda: {"fedevo": plan["fedevo"], "fedevo_source": "0" * 16})
    with pytest.raises(FedevoError, match=rf"made with fedevo source {plan['fedevo_source']} \(here 0000000000000000\)"):
        retrain(run, "knee", rounds=2, workers=0, out=run / "retrain")
    monkeypatch.setattr(versions, "program", program)
    n = len(calls)
    rep = retrain(run, "knee", rounds=2, workers=0)  # this CPU and fedevo again: the kept trainings continue
    assert rep.out_dir == run / "retrain" and len(calls) == n + len(rep.solutions) - 1


def test_a_retrain_stopped_before_plans_recorded_data_device_precision_and_source_still_continues(run_dir, tmp_path, monkeypatch):
    """plan.json gained `data` and `device` (then `precision` and `fedevo_source`); a retrain stopped by the version before (its plan lacks them) never
    matched again: the same command restarted from zero in retrain-2 (with --out: refused as another plan). A kept
    plan lacking them is taken as the plan it was."""
    run = shutil.copytree(run_dir, tmp_path / "run")
    calls = signal_in_training(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        retrain(run, "knee", rounds=2, workers=0)
    plan_file = run / "retrain" / ".kept" / "plan.json"
    old = {k: v for k, v in json.loads(plan_file.read_text()).items()
           if k not in ("data", "device", "precision", "fedevo_source")}  # (the last two: recorded since)
    plan_file.write_text(json.dumps(old, sort_keys=True))
    rep = retrain(run, "knee", rounds=2, workers=0)
    assert rep.out_dir == run / "retrain" and not (run / "retrain-2").exists() and len(calls) == 3


def test_standard_may_set_a_data_key_the_problem_makes_a_gene(tmp_path):
    """review16 F6: a [data] key that is a gene (clients) is each pick's own and the standard's is the gene's
    default (docs/plots.md); --standard '{"clients": 26}', the one way to give the standard a pick's data, was
    refused as 'every solution trains on the same data'. A fixed [data] key still is."""
    from types import SimpleNamespace

    from fedevo.errors import FedevoError
    from fedevo.problem import load_problem
    from fedevo.retraining import plan

    f = tmp_path / "dgene.toml"
    f.write_text('name = "dgene"\ndataset = "digits"\nmodel = "mlp"\n[data]\npartition = "iid"\n[genes]\n'
                 'lr = { type = "real", low = 0.01, high = 0.3, default = 0.1 }\n'
                 'clients = { type = "int", low = 10, high = 40, default = 20 }\n')
    data = SimpleNamespace(problem=load_problem(str(f)), pick=lambda spec: [])
    (std,) = plan(data, "knee", {"clients": 26})
    assert std.is_standard and std.params == {"clients": 26}
    with pytest.raises(FedevoError, match="partition cannot be set: every solution"):
        plan(data, "knee", {"partition": "shards"})


def _fake_fashion(root, seed):
    """Fashion-MNIST's four IDX files, small (40 train, 20 test images), their pixels drawn with `seed`."""
    import gzip

    import numpy as np

    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", 40), ("t10k", 20)):
        for stem, arr in (("images-idx3-ubyte", rng.integers(0, 255, (n, 28, 28))),
                          ("labels-idx1-ubyte", rng.integers(0, 10, n))):
            header = bytes([0, 0, 8, arr.ndim]) + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
            with gzip.GzipFile(root / f"{split}-{stem}.gz", "wb", mtime=0) as f:  # the same bytes for a seed
                f.write(header + arr.astype(np.uint8).tobytes())


def test_a_continuation_on_other_data_under_the_same_directory_is_not_continued_and_says_why(
        tmp_path, monkeypatch, capsys):
    """plan.json compared the dataset directory by path only: the same command after the dataset was re-downloaded
    or edited there continued the kept trainings and mixed trainings on two datasets in one report. It records the
    SHA-256 of the files the trainings read (retraining.data_content): other content takes a new retrain-N with one
    note naming it (with --out: refused in one line); the same content continues; a plan without the key (a
    retrain stopped before it was recorded) continues as before."""
    import fedevo
    from fedevo.retraining import data_content

    data = tmp_path / "fashion"
    _fake_fashion(data, 0)
    prob = tmp_path / "tinyfashion.toml"
    prob.write_text('name = "tinyfashion"\ndataset = "fashion"\nmodel = "mlp"\n[data]\npartition = "iid"\n'
                    'clients = 4\n[train]\nrounds = 1\nepochs = 1\nbatch_size = 8\n[genes]\n'
                    'units = { type = "int", low = 4, high = 8, default = 4 }\n'
                    'lr = { type = "real", low = 0.01, high = 0.2, default = 0.1 }\n')
    run = tmp_path / "run"
    fedevo.search(str(prob), out=run, workers=0, seed=0, page=False, optimizer="random", pop=2, budget=2,
                  progress=False, data_dir=str(data))
    calls = signal_in_training(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        retrain(run, "knee", rounds=1, workers=0, data_dir=str(data))
    plan_file = run / "retrain" / ".kept" / "plan.json"
    plan = json.loads(plan_file.read_text())
    then = plan["data_sha256"]
    assert then == data_content(load_problem(str(prob)), str(data)) and len(then) == 64
    assert data_content(load_problem("digits_mlp"), str(data)) is None  # made in memory: no files read
    _fake_fashion(data, 1)  # re-downloaded: the same path, other files
    now = data_content(load_problem(str(prob)), str(data))
    assert now != then
    with pytest.raises(FedevoError, match=rf"made with data content SHA-256 {then[:12]}… \(here {now[:12]}…\): "
                                          r"continued here they would mix numbers of both"):
        retrain(run, "knee", rounds=1, workers=0, data_dir=str(data), out=run / "retrain")
    capsys.readouterr()
    rep = retrain(run, "knee", rounds=1, workers=0, data_dir=str(data))
    assert rep.out_dir == run / "retrain-2" and (run / "retrain" / ".kept").is_dir()
    err = capsys.readouterr().err
    assert (f"fedevo: note: {run / 'retrain'} holds the kept trainings of this retrain made with data content "
            f"SHA-256 {then[:12]}… (here {now[:12]}…): not continued (the dataset's files changed since); training "
            f"anew in {run / 'retrain-2'}") in err, err
    assert err.count("fedevo: note:") == 1
    _fake_fashion(data, 0)  # the data it was made on again: the kept trainings continue
    n = len(calls)
    rep = retrain(run, "knee", rounds=1, workers=0, data_dir=str(data))
    assert rep.out_dir == run / "retrain" and len(calls) == n + len(rep.solutions) - 1


def test_a_plan_without_the_data_content_continues_as_before(run_dir, tmp_path, monkeypatch):
    """A retrain stopped before plan.json recorded data_sha256 (its plan lacks the key) is continued by the same
    command, whatever the content (there is nothing to compare)."""
    run = shutil.copytree(run_dir, tmp_path / "run")
    calls = signal_in_training(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        retrain(run, "knee", rounds=2, workers=0)
    plan_file = run / "retrain" / ".kept" / "plan.json"
    plan = json.loads(plan_file.read_text())
    assert "data_sha256" in plan and plan["data_sha256"] is None  # digits: made in memory
    plan_file.write_text(json.dumps({k: v for k, v in plan.items() if k != "data_sha256"}, sort_keys=True))
    rep = retrain(run, "knee", rounds=2, workers=0)
    assert rep.out_dir == run / "retrain" and not (run / "retrain-2").exists() and len(calls) == 3
