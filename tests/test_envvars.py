"""The FEDEVO_* environment variables are read strictly (fedevo/envvars.py, docs/engine.md): unset or empty is the
default, the values a variable takes work as before, and anything else (a typo) is a one-line SetupError naming the
variable -- never a silent 'on' or a silent default."""

import os

import pytest

from fedevo import hardware, native
from fedevo.envvars import env_auto_flag, env_choice, env_count, env_flag
from fedevo.errors import SetupError
from fedevo.fl import lockstep, sparse, stacked_cnn, stacked_settings
from fedevo.models import lowering

VAR = "FEDEVO_TEST_VARIABLE"


# ------------------------------------------------------------------------------------------------ the readers

def test_env_choice(monkeypatch):
    monkeypatch.delenv(VAR, raising=False)
    assert env_choice(VAR, ("a", "b"), "a") == "a"
    assert env_choice(VAR, ("a", "b"), None) is None
    monkeypatch.setenv(VAR, "  ")
    assert env_choice(VAR, ("a", "b"), "b") == "b"
    monkeypatch.setenv(VAR, " B ")
    assert env_choice(VAR, ("a", "b"), "a") == "b"
    monkeypatch.setenv(VAR, " Cee")
    with pytest.raises(SetupError, match=rf"^{VAR} must be one of a, b, got 'Cee'$"):
        env_choice(VAR, ("a", "b"), "a")
    with pytest.raises(SetupError, match=rf"^{VAR} must be 'a' or 'b', got 'Cee'$"):
        env_choice(VAR, ("a", "b"), "a", expected="'a' or 'b'")


def test_env_flag_and_its_default(monkeypatch):
    monkeypatch.delenv(VAR, raising=False)
    assert env_flag(VAR) is None and env_flag(VAR, True) is True and env_flag(VAR, False) is False
    for raw, value in (("1", True), ("On", True), ("yes", True), ("TRUE", True),
                       ("0", False), ("off", False), (" No ", False), ("false", False)):
        monkeypatch.setenv(VAR, raw)
        assert env_flag(VAR, not value) is value, raw
    monkeypatch.setenv(VAR, "ture")
    with pytest.raises(SetupError, match=rf"^{VAR} must be 1 or 0 \(on/off, yes/no, true/false\), got 'ture'$"):
        env_flag(VAR, True)


def test_env_auto_flag(monkeypatch):
    for raw, value in (("", None), ("auto", None), ("AUTO", None), ("1", True), ("on", True), ("0", False),
                       ("false", False)):
        monkeypatch.setenv(VAR, raw)
        assert env_auto_flag(VAR) is value, raw
    monkeypatch.setenv(VAR, "automatic")
    with pytest.raises(SetupError, match=rf"^{VAR} must be auto or 1 or 0 .*, got 'automatic'$"):
        env_auto_flag(VAR)


def test_env_count(monkeypatch):
    monkeypatch.delenv(VAR, raising=False)
    assert env_count(VAR) is None
    monkeypatch.setenv(VAR, "3")
    assert env_count(VAR) == 3
    monkeypatch.setenv(VAR, "0")
    assert env_count(VAR) == 1
    monkeypatch.setenv(VAR, "three")
    with pytest.raises(SetupError, match=rf"^{VAR} must be an integer \(a count\), got 'three'$"):
        env_count(VAR)


def test_env_share(monkeypatch):
    from fedevo.envvars import env_share

    monkeypatch.delenv(VAR, raising=False)
    assert env_share(VAR) is None
    for raw, value in (("0.25", 0.25), (" 1 ", 1.0), ("1e-3", 0.001)):
        monkeypatch.setenv(VAR, raw)
        assert env_share(VAR) == value, raw
    for raw in ("0", "-0.5", "1.5", "nan", "inf", "quarter"):
        monkeypatch.setenv(VAR, raw)
        with pytest.raises(SetupError, match=rf"^{VAR} must be a share, a number in \(0, 1\], got '{raw}'$"):
            env_share(VAR)


def test_gpu_share_sets_and_restores_the_variable(monkeypatch):
    from types import SimpleNamespace

    import torch

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: SimpleNamespace(total_memory=1000))
    monkeypatch.setenv("FEDEVO_GPU_SHARE", "0.5")
    assert hardware.gpu_total("cuda") == 500
    with hardware.gpu_share(0.25):
        assert hardware.gpu_total("cuda") == 250
    assert hardware.gpu_total("cuda") == 500
    monkeypatch.delenv("FEDEVO_GPU_SHARE")
    with hardware.gpu_share(1.0):
        assert hardware.gpu_total("cuda") == 1000
    assert "FEDEVO_GPU_SHARE" not in os.environ
    with pytest.raises(ValueError, match="in \\(0, 1\\]"):
        with hardware.gpu_share(0):
            pass
    monkeypatch.setenv("FEDEVO_GPU_SHARE", "half")
    with pytest.raises(SetupError, match="^FEDEVO_GPU_SHARE must be a share"):
        hardware.gpu_total("cuda")


# ------------------------------------------------------------------ the escape hatches that read any value as on

ON_BY_DEFAULT = [("FEDEVO_STACKED", stacked_settings.enabled), ("FEDEVO_CUDA_GRAPHS", stacked_settings.graphs_enabled),
                 ("FEDEVO_LOWER", lowering.lowering_enabled), ("FEDEVO_STACKED_CNN", stacked_cnn.enabled)]


@pytest.mark.parametrize("name,read", ON_BY_DEFAULT, ids=[n for n, _ in ON_BY_DEFAULT])
def test_on_by_default_flags_are_strict(monkeypatch, name, read):
    monkeypatch.delenv(name, raising=False)
    assert read() is True
    for raw, value in (("", True), ("1", True), ("0", False), ("off", False), ("No", False), ("yes", True)):
        monkeypatch.setenv(name, raw)
        assert read() is value, raw
    monkeypatch.setenv(name, "ture")
    with pytest.raises(SetupError, match=rf"^{name} must be .*, got 'ture'$"):
        read()


def test_fedevo_lower_takes_auto(monkeypatch):
    monkeypatch.setenv("FEDEVO_LOWER", "auto")  # its documented default
    assert lowering.lowering_enabled() is True
    monkeypatch.setenv("FEDEVO_LOWER", "Auto")
    assert lowering.lowering_enabled() is True


def test_fedevo_sparse_is_strict(monkeypatch):
    for raw, mode in (("", "auto"), ("auto", "auto"), ("1", "1"), ("on", "1"), ("0", "0"), ("false", "0")):
        monkeypatch.setenv("FEDEVO_SPARSE", raw)
        assert sparse.sparse_mode() == mode, raw
    monkeypatch.delenv("FEDEVO_SPARSE")
    assert sparse.sparse_mode() == "auto"
    monkeypatch.setenv("FEDEVO_SPARSE", "always")
    with pytest.raises(SetupError, match=r"^FEDEVO_SPARSE must be auto or 1 or 0 .*, got 'always'$"):
        sparse.sparse_mode()


@pytest.fixture
def fresh_native():
    """native.load() reads FEDEVO_NATIVE on its first call in a process: forget what this one loaded, and put it
    back after."""
    saved = dict(native._state)
    native._state.clear()
    yield
    native._state.clear()
    native._state.update(saved)


def test_fedevo_native_is_strict(monkeypatch, fresh_native):
    monkeypatch.setenv("FEDEVO_NATIVE", "ture")
    for _ in range(2):  # nothing cached: every call says so
        with pytest.raises(SetupError, match=r"^FEDEVO_NATIVE must be 1 or 0 .*, got 'ture'$"):
            native.load()
    with pytest.raises(SetupError, match="FEDEVO_NATIVE"):
        native.status()
    for off in ("0", "off", "False"):
        native._state.clear()
        monkeypatch.setenv("FEDEVO_NATIVE", off)
        assert native.load() is None and native.status() == "torch (FEDEVO_NATIVE=0)"


def test_fedevo_native_unset_or_on_builds_as_before(monkeypatch, fresh_native):
    monkeypatch.setenv("CC", "false")  # a "compiler" that always fails: the variable let it try, quickly
    for raw in (None, "", "1", "on"):
        native._state.clear()
        if raw is None:
            monkeypatch.delenv("FEDEVO_NATIVE", raising=False)
        else:
            monkeypatch.setenv("FEDEVO_NATIVE", raw)
        assert native.load() is None and native.status().startswith("torch (build failed"), raw


def test_a_search_with_a_bad_fedevo_native_stops_before_its_run_directory(capsys, tmp_path, monkeypatch,
                                                                          fresh_native):
    from tests.cli.test_bad_input import bad

    monkeypatch.setenv("FEDEVO_NATIVE", "ture")
    out = tmp_path / "run"
    bad(capsys, ["search", "--problem", "digits_mlp", "--workers", 0, "--pop", 4, "--gen", 1, "--quiet", "--out",
                 out], r"FEDEVO_NATIVE must be 1 or 0 \(on/off, yes/no, true/false\), got 'ture'")
    assert not out.exists()


# ------------------------------------------------------------------------------ the choices (env_choice's users)

def test_the_choices_keep_their_messages(monkeypatch):
    from fedevo.secagg.aggregator import simulation_from_env

    monkeypatch.setenv("FEDEVO_SECAGG", "fast")
    with pytest.raises(SetupError, match=r"^FEDEVO_SECAGG must be one of sum, protocol, got 'fast'$"):
        simulation_from_env()
    monkeypatch.setenv("FEDEVO_SCHEDULE", "gpu")
    with pytest.raises(SetupError, match=r"^FEDEVO_SCHEDULE must be 'engine' or 'device', got 'gpu'$"):
        stacked_settings.schedule_setting()
    monkeypatch.setenv("FEDEVO_DEVICE", "tpu")
    with pytest.raises(SetupError, match=r"^FEDEVO_DEVICE must be 'cpu' or 'cuda' \(or unset\), got 'tpu'$"):
        hardware.device_choice("auto")
    monkeypatch.setenv("FEDEVO_DEVICE", " CPU ")  # any case, stripped, like the other choices
    assert hardware.device_choice("auto")[1] == "auto: FEDEVO_DEVICE=cpu"


def test_schedule_setting_names_a_bad_setting_as_itself(monkeypatch):
    monkeypatch.delenv("FEDEVO_SCHEDULE", raising=False)
    assert stacked_settings.schedule_setting("device") == "device"
    monkeypatch.setenv("FEDEVO_SCHEDULE", "Engine")
    assert stacked_settings.schedule_setting("device") == "engine"
    monkeypatch.delenv("FEDEVO_SCHEDULE")
    with pytest.raises(Exception, match=r"^batch_schedule must be 'engine' or 'device', got 'gpu'$") as e:
        stacked_settings.schedule_setting("gpu")
    assert not isinstance(e.value, SetupError)


# ------------------------------------------------------------------------------------------- population threads

def test_population_threads_follow_the_variable_else_the_cores(monkeypatch):
    monkeypatch.setattr(hardware, "cores", lambda: 7)
    monkeypatch.delenv("FEDEVO_POPULATION_THREADS", raising=False)
    assert lockstep.cpu_threads() == 7
    monkeypatch.setenv("FEDEVO_POPULATION_THREADS", "3")
    assert lockstep.cpu_threads() == 3
    monkeypatch.setenv("FEDEVO_POPULATION_THREADS", "lots")
    with pytest.raises(SetupError, match="FEDEVO_POPULATION_THREADS"):
        lockstep.cpu_threads()
    monkeypatch.undo()
    monkeypatch.delenv("FEDEVO_POPULATION_THREADS", raising=False)
    assert lockstep.cpu_threads() == hardware.cores()


def test_the_docs_table_lists_exactly_the_variables_fedevo_reads():
    """docs/engine.md's table of FEDEVO_* variables against the names fedevo's code spells ("FEDEVO_…" literals):
    none undocumented, none documented that nothing reads."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    read = {m for p in (root / "fedevo").rglob("*.py") for m in re.findall(r"[\"'](FEDEVO_[A-Z0-9_]+)[\"']",
                                                                             p.read_text())}
    table = set(re.findall(r"^\| `(FEDEVO_[A-Z0-9_]+)` \|", (root / "docs" / "engine.md").read_text(), re.M))
    assert len(read) > 15 and read == table, (sorted(read - table), sorted(table - read))
