"""The user's own data (issue 26): .npz, Parquet and `datasets` directories with client ids load with a natural
partition whose clients and sizes are the file's; tabular features; test sets; arrays from Python."""

from __future__ import annotations

import numpy as np
import pytest

from fedevo.data.sources import ArraySource, open_source
from fedevo.fl.simulate import prepare
from fedevo.problem import load_problem, parse_problem

from .user_data import SIZES, holdout_sizes, problem, rows, write_hf, write_npz, write_parquet


def _partition(prob, seed=0):
    su = prepare(prob.sim_config(), seed=seed)
    su.noise.close()
    return su.data, su.part


def _assert_natural(prob, expect: dict[str, tuple[int, int]]):
    data, part = _partition(prob)
    assert prob.sim_config().data.clients == len(expect) == len(part.train)
    assert [(len(tr), len(te)) for tr, te in zip(part.train, part.test)] == list(expect.values())  # sorted ids
    # every row once: train indices cover the train set, test indices the test set
    assert sorted(np.concatenate(part.train).tolist()) == list(range(len(data.y_train)))
    assert sorted(np.concatenate(part.test).tolist()) == list(range(len(data.y_test)))
    return data, part


def test_npz_natural_clients_and_sizes_as_in_the_file(tmp_path):
    write_npz(tmp_path / "d.npz")
    prob = load_problem(str(problem(tmp_path / "p.toml", 'source = "npz"\npath = "d.npz"\npartition = "natural"')))
    data, part = _assert_natural(prob, holdout_sizes())
    assert prob.data_source.clients == len(SIZES) and prob.data_source.input_shape == (1, 8, 8)
    assert data.num_classes == 4 and data.x_train.shape[1:] == (1, 8, 8)
    # each client's test rows are its LAST rows in file order, and the labels travel with their rows
    x, y, ids = rows()
    b = np.flatnonzero(ids == "b")
    n_test = holdout_sizes()["b"][1]
    assert (data.y_test[part.test[1]].numpy() == y[b[-n_test:]]).all()
    assert (data.y_train[part.train[1]].numpy() == y[b[:-n_test]]).all()


def test_parquet_tabular_columns_natural(tmp_path):
    pytest.importorskip("pyarrow")
    write_parquet(tmp_path / "d.parquet")
    data_keys = ('source = "parquet"\npath = "d.parquet"\nx = ["f0", "f1", "f2", "f3", "f4", "f5"]\ny = "label"\n'
                 'client_id = "user"\npartition = "natural"\nholdout = 0.25')
    prob = load_problem(str(problem(tmp_path / "p.toml", data_keys)))
    data, _ = _assert_natural(prob, holdout_sizes(frac=0.25))
    assert prob.data_source.input_shape == (6,) and data.x_train.shape[1:] == (6,)
    # normalised per feature with the train set's statistics
    assert np.allclose(data.x_train.mean(0).numpy(), 0, atol=1e-5)
    assert np.allclose(data.x_train.std(0, unbiased=False).numpy(), 1, atol=1e-4)


def test_parquet_list_column_as_one_feature_vector(tmp_path):
    pytest.importorskip("pyarrow")
    write_parquet(tmp_path / "d.parquet", tabular=False)
    prob = load_problem(str(problem(tmp_path / "p.toml", 'source = "parquet"\npath = "d.parquet"\nx = "pixels"\n'
                                    'y = "label"\nclient_id = "user"\npartition = "natural"')))
    _assert_natural(prob, holdout_sizes())
    assert prob.data_source.input_shape == (6,)


def test_hf_save_to_disk_directory_natural(tmp_path):
    pytest.importorskip("datasets")
    write_hf(tmp_path / "hfdir")
    prob = load_problem(str(problem(tmp_path / "p.toml", 'source = "hf"\npath = "hfdir"\npartition = "natural"')))
    _assert_natural(prob, holdout_sizes())
    assert prob.data_source.input_shape == (1, 8, 8)


def test_hf_dataset_dict_uses_its_test_split_by_client(tmp_path):
    pytest.importorskip("datasets")
    write_hf(tmp_path / "hfdir", with_test=True)
    prob = load_problem(str(problem(tmp_path / "p.toml", 'source = "hf"\npath = "hfdir"\npartition = "natural"')))
    test_sizes = {"a": 2, "b": 5, "c": 4, "d": 1, "e": 3}
    _assert_natural(prob, {k: (SIZES[k], test_sizes[k]) for k in SIZES})


def test_npz_test_path_gives_each_client_its_test_rows(tmp_path):
    write_npz(tmp_path / "train.npz")
    xt, yt, it = rows(seed=2, sizes={"b": 4, "a": 1, "zz": 7, "e": 2})  # zz: no train rows, left out
    np.savez(tmp_path / "test.npz", x=xt, y=yt, client_id=it)
    prob = load_problem(str(problem(tmp_path / "p.toml", 'source = "npz"\npath = "train.npz"\n'
                                    'test_path = "test.npz"\npartition = "natural"')))
    data, part = _partition(prob)
    assert [len(t) for t in part.train] == list(SIZES.values())
    assert [len(t) for t in part.test] == [1, 4, 0, 0, 2]
    assert len(data.y_test) == 7


def test_no_client_ids_synthetic_partitions_still_apply(tmp_path):
    x, y, _ = rows()
    np.savez(tmp_path / "d.npz", x=x, y=y)
    prob = load_problem(str(problem(tmp_path / "p.toml", 'source = "npz"\npath = "d.npz"\npartition = "dirichlet"\n'
                                    'clients = 4\ndirichlet_alpha = 1.0')))
    data, part = _partition(prob)
    n = len(y)
    assert len(part.train) == 4 and len(data.y_train) + len(data.y_test) == n
    assert len(data.y_test) == round(0.2 * n)
    assert prob.data_source.clients is None


def test_array_source_from_python_matches_the_npz_file(tmp_path):
    x, y, ids = rows()
    doc = {"model": "mlp", "genes": {"lr": {"type": "real", "low": 0.01, "high": 0.3, "default": 0.1}},
           "data": {"source": ArraySource(x=x, y=y, client_id=ids), "partition": "natural"},
           "train": {"rounds": 1, "epochs": 1, "layers": 1, "units": 8}}
    prob = parse_problem(doc, name="mine")
    assert prob.dataset == "arrays"
    data, part = _assert_natural(prob, holdout_sizes())
    write_npz(tmp_path / "d.npz")
    from_file = load_problem(str(problem(tmp_path / "p.toml", 'source = "npz"\npath = "d.npz"\npartition = "natural"')))
    fdata, _ = _partition(from_file)
    assert torch_equal(data.x_train, fdata.x_train) and torch_equal(data.y_test, fdata.y_test)
    # equal by content: a worker's cache recognises the same arrays
    assert ArraySource(x=x, y=y, client_id=ids) == ArraySource(x=x.copy(), y=y, client_id=ids)
    assert ArraySource(x=x, y=y, client_id=ids) != ArraySource(x=x + 1, y=y, client_id=ids)


def torch_equal(a, b) -> bool:
    return a.shape == b.shape and bool((a == b).all())


def test_float_labels_with_integer_values_are_classes(tmp_path):
    x, y, ids = rows()
    ud = open_source(ArraySource(x=x, y=y.astype(np.float64), client_id=ids), natural=True)
    assert ud.num_classes == 4 and ud.clients == 5


def test_a_changed_file_is_read_again(tmp_path):
    write_npz(tmp_path / "d.npz")
    p = problem(tmp_path / "p.toml", 'source = "npz"\npath = "d.npz"\npartition = "natural"')
    assert load_problem(str(p)).data_source.clients == 5
    x, y, ids = rows()
    np.savez(tmp_path / "d.npz", x=x, y=y, client_id=np.where(ids == "a", "b", ids))
    assert load_problem(str(p)).data_source.clients == 4


def test_hf_reads_a_local_csv_file_with_load_dataset(tmp_path, capsys):
    pytest.importorskip("datasets")
    x, y, ids = rows(shape=(3,))
    lines = ["a,b,c,label,uid"] + [f"{r[0]},{r[1]},{r[2]},{lab},{i}" for r, lab, i in zip(x, y, ids)]
    (tmp_path / "t.csv").write_text("\n".join(lines) + "\n")
    prob = load_problem(str(problem(tmp_path / "p.toml", 'source = "hf"\npath = "t.csv"\nx = ["a", "b", "c"]\n'
                                    'y = "label"\nclient_id = "uid"\npartition = "natural"')))
    _assert_natural(prob, holdout_sizes())
    assert prob.data_source.input_shape == (3,)
    assert "examples" not in capsys.readouterr().err  # no progress bars


def test_cost_and_memory_estimates_use_the_datas_shape_and_clients(tmp_path):
    from fedevo.fl.cost import macs_and_params, relative_cost
    from fedevo.guards import evaluation_memory

    pytest.importorskip("pyarrow")
    write_parquet(tmp_path / "d.parquet")
    prob = load_problem(str(problem(tmp_path / "p.toml", 'source = "parquet"\npath = "d.parquet"\n'
                                    'x = ["f0", "f1", "f2", "f3", "f4", "f5"]\ny = "label"\nclient_id = "user"\n'
                                    'partition = "natural"')))
    cfg = prob.sim_config()
    _, params = macs_and_params(cfg)
    assert params == 6 * 16 + 16 + 16 * 4 + 4  # 6 features -> 16 units -> 4 classes
    su = prepare(cfg, seed=0)
    su.noise.close()
    assert sum(p.numel() for p in su.model.init(__import__("torch").Generator().manual_seed(0))) == params
    assert relative_cost(cfg) > 0
    biggest = holdout_sizes()["b"][0]
    mem = evaluation_memory(cfg)
    assert mem["schedule"] == pytest.approx(min(cfg.chunk_clients, cfg.sampled_per_round) * cfg.epochs
                                            * (biggest + cfg.batch_size) * 64)


def test_hf_image_feature_becomes_channels_first(tmp_path):
    datasets = pytest.importorskip("datasets")
    from PIL import Image

    rng = np.random.default_rng(0)
    ids = np.repeat(["u1", "u2", "u3"], [4, 9, 6])
    rgb = rng.integers(0, 256, size=(len(ids), 5, 7, 3), dtype=np.uint8)
    feats = datasets.Features({"img": datasets.Image(), "label": datasets.Value("int64"),
                               "client_id": datasets.Value("string")})
    ds = datasets.Dataset.from_dict({"img": [Image.fromarray(a) for a in rgb], "label": rng.integers(0, 3, len(ids)),
                                     "client_id": ids.tolist()}, features=feats)
    ds.save_to_disk(str(tmp_path / "imgs"))
    prob = load_problem(str(problem(tmp_path / "p.toml", 'source = "hf"\npath = "imgs"\nx = "img"\ny = "label"\n'
                                    'partition = "natural"\nnormalise = false')))
    data, part = _partition(prob)
    assert prob.data_source.input_shape == (3, 5, 7) and prob.data_source.clients == 3
    assert [len(t) for t in part.train] == [3, 7, 5]  # 4, 9, 6 rows less one, two, one held out
    first = data.x_train[part.train[0][0]].numpy()
    assert np.array_equal(first, rgb[0].transpose(2, 0, 1).astype(np.float32))  # (H, W, C) -> (C, H, W)


def test_a_holdout_near_one_leaves_a_training_row():
    """Without client ids or a test set, a holdout above 1 − 0.5/N rounded to every row and left none to train on:
    numpy's 'zero-size array to reduction operation maximum' at load. At least one row trains (docs/data.md)."""
    import numpy as np

    from fedevo.data.sources import ArraySource
    from fedevo.errors import FedevoError
    from fedevo.problem import parse_problem

    x = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    y = np.arange(10) % 2

    def load(clients):
        return parse_problem({"model": "mlp", "data": {"source": ArraySource(x=x, y=y, holdout=0.97),
                                                       "clients": clients},
                              "train": {"rounds": 1, "layers": 1, "units": 4},
                              "genes": {"lr": {"type": "real", "low": 0.01, "high": 0.5, "default": 0.1}}},
                             name="mine")

    load(1)
    with pytest.raises(FedevoError, match="more than the 1 training samples"):
        load(2)


def test_channels_last_images_are_warned_of_once(capfd):
    """(N, H, W, C) images — what PIL, TensorFlow and most image arrays give — were read as (N, C, H, W) without a
    word: a CNN trained on 8 "channels" of 8×3 images. One warning line now, when the data is read; (N, C, H, W)
    images, and a small last axis after small spatial ones (16 feature maps of 4×4), read without one."""
    rng = np.random.default_rng(0)
    ids = np.repeat(np.arange(4), 10)
    y = rng.integers(0, 2, 40)
    last = ArraySource(x=rng.normal(size=(40, 8, 8, 3)).astype(np.float32), y=y, client_id=ids)
    ud = open_source(last, natural=True)
    assert ud.input_shape == (8, 8, 3)  # read as it is: a warning, not a refusal
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedevo: warning: ArraySource: images of shape (40, 8, 8, 3) look "
                                                   "channels-last (N, H, W, C)")
    open_source(last, natural=True)
    assert capfd.readouterr().err == ""  # the read is cached: said once
    for shape in ((40, 3, 8, 8), (40, 16, 4, 4), (40, 8, 8)):
        open_source(ArraySource(x=rng.normal(size=shape).astype(np.float32), y=y, client_id=ids), natural=True)
        assert capfd.readouterr().err == ""


def test_the_channels_last_warning_is_a_python_warning_its_filters_silence(capfd):
    """A user whose model takes (N, H, W, C) images saw the warning at every run, with no way to say so: it is a
    fedevo.ChannelsLastWarning under Python's warning filters now (ignore: nothing said; error: raised), shown as
    the one line it was otherwise."""
    import warnings

    import fedevo

    rng = np.random.default_rng(1)
    ids = np.repeat(np.arange(4), 10)

    def source():  # (a new source each time: a read is cached)
        return ArraySource(x=rng.normal(size=(40, 8, 8, 3)).astype(np.float32), y=rng.integers(0, 2, 40),
                           client_id=ids)

    assert issubclass(fedevo.ChannelsLastWarning, UserWarning)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=fedevo.ChannelsLastWarning)
        open_source(source(), natural=True)
    assert capfd.readouterr().err == ""
    with warnings.catch_warnings():
        warnings.simplefilter("error", fedevo.ChannelsLastWarning)
        with pytest.raises(fedevo.ChannelsLastWarning, match="look channels-last"):
            open_source(source(), natural=True)
    open_source(source(), natural=True)
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedevo: warning: ArraySource: images of shape (40, 8, 8, 3)")
    assert err.rstrip().endswith("unless that is what they are (then filter fedevo.ChannelsLastWarning)")


def test_labels_most_of_whose_classes_no_row_holds_are_warned_of(capfd):
    """Labels 3 and 7 made a model of 8 outputs without a word: its output layer, counted by Ω and the communication
    cost, 4× what the data needs. One warning line (most outputs without a row); labels 1..10 (1-based: one unused
    class) read without one."""
    rng = np.random.default_rng(0)
    x, ids = rng.normal(size=(40, 5)).astype(np.float32), np.repeat(np.arange(4), 10)
    ud = open_source(ArraySource(x=x, y=rng.choice([3, 7], 40), client_id=ids), natural=True)
    assert ud.num_classes == 8  # read as it is: a warning, not a refusal
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("fedevo: warning: ArraySource: labels are class indices 0..K-1: the "
                                                   "largest is 7 (a model of 8 outputs") and "(3, 7)" in err
    open_source(ArraySource(x=x, y=np.arange(40) % 10 + 1, client_id=ids), natural=True)
    assert capfd.readouterr().err == ""


def test_arrays_changed_in_place_after_the_source_was_made_are_refused():
    """A notebook that changed y in place (label noise) and made the problem again from the same ArraySource trained
    on the old labels without a word: the source equals itself as it was (its digest, the read cache's key), so the
    cache answered. One line now, from making the problem again and from evaluating the one made before; a new
    ArraySource of the arrays trains on the new data."""
    import fedevo
    from fedevo.errors import FedevoError

    rng = np.random.default_rng(0)
    x = rng.normal(size=(120, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    ids = np.repeat(np.arange(4), 30)
    src = ArraySource(x=x, y=y, client_id=ids)

    def doc(source):
        return {"name": "inplace", "model": "mlp", "data": {"source": source, "partition": "natural"},
                "train": {"rounds": 1, "layers": 1, "units": 8},
                "genes": {"lr": {"type": "real", "low": 0.01, "high": 0.5, "default": 0.1}}}

    before = fedevo.Problem.from_dict(doc(src))
    y[:] = 1 - y  # in place
    said = r"ArraySource: its arrays changed in place since it was made; make a new ArraySource"
    with pytest.raises(FedevoError, match=said):
        fedevo.Problem.from_dict(doc(src))
    with pytest.raises(FedevoError, match=said):
        fedevo.evaluate(before, rounds=1)
    fresh = fedevo.Problem.from_dict(doc(ArraySource(x=x, y=y, client_id=ids)))
    assert fedevo.evaluate(fresh, rounds=1).status == "ok"
