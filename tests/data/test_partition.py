import numpy as np
import pytest

from fedevo.data.partition import partition
from fedevo.errors import FedevoError

LABELS = np.repeat(np.arange(10), 300)  # 3000 samples, sorted
TEST = np.repeat(np.arange(10), 50)


def test_iid_sizes_disjoint_cover():
    p = partition(LABELS, TEST, scheme="iid", clients=7, num_classes=10, seed=0)
    sizes = p.sizes
    assert sizes.sum() == len(LABELS) and sizes.max() - sizes.min() <= 1
    allidx = np.concatenate(p.train)
    assert len(np.unique(allidx)) == len(LABELS)
    assert sum(len(t) for t in p.test) == len(TEST)


def test_shards_at_most_s_labels():
    p = partition(LABELS, TEST, scheme="shards", clients=10, num_classes=10, seed=1, shards_per_client=2)
    for tr, te in zip(p.train, p.test):
        assert len(tr) == 300  # 20 shards of 150, 2 each
        labels = set(LABELS[tr])
        assert len(labels) <= 2
        assert set(TEST[te]) <= labels  # test split drawn from the client's own labels
    assert len(np.unique(np.concatenate(p.train))) == len(LABELS)  # dealt without replacement


def test_shards_shared_when_more_clients_than_shards():
    # seed-000 layout: many users drawing 2 of a fixed set of shards
    p = partition(LABELS, TEST, scheme="shards", clients=50, num_classes=10, seed=2, shards_per_client=2,
                  shard_size=300)
    assert all(len(t) == 600 and len(set(LABELS[t])) <= 2 for t in p.train)


def test_dirichlet_skew_and_cover():
    p = partition(LABELS, TEST, scheme="dirichlet", clients=5, num_classes=10, seed=0, dirichlet_alpha=0.1)
    assert p.sizes.sum() == len(LABELS) and p.sizes.min() >= 2
    # small alpha: most clients dominated by few labels
    top = [np.bincount(LABELS[t], minlength=10).max() / len(t) for t in p.train]
    assert np.mean(top) > 0.3


def test_same_seed_same_partition():
    a = partition(LABELS, TEST, scheme="dirichlet", clients=5, num_classes=10, seed=3)
    b = partition(LABELS, TEST, scheme="dirichlet", clients=5, num_classes=10, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a.train, b.train))


def test_too_many_clients():
    with pytest.raises(FedevoError):
        partition(LABELS[:5], TEST, scheme="iid", clients=10, num_classes=10, seed=0)


def test_dirichlet_with_too_few_samples_per_client_refused_before_any_data(tmp_path):
    """Dirichlet clients each need DIRICHLET_MIN_SAMPLES training samples: more clients than that allows are a
    load-time error (one line, no run directory), not a search whose every evaluation fails after 100 redraws."""
    import fedevo
    from fedevo.config import DataConfig
    from fedevo.data.catalog import DIRICHLET_MIN_SAMPLES, N_TRAIN

    most = N_TRAIN["digits"] // DIRICHLET_MIN_SAMPLES
    DataConfig(dataset="digits", partition="dirichlet", clients=most).check_partition()
    with pytest.raises(FedevoError, match=rf'partition = "dirichlet": clients = {most + 1} need at least 2 training '
                                          rf"samples each, .* \(more than {most} clients can never be met"):
        DataConfig(dataset="digits", partition="dirichlet", clients=most + 1).check_partition()
    doc = {"name": "dir", "dataset": "digits", "model": "mlp",
           "data": {"partition": "dirichlet", "clients": 5000}, "train": {"rounds": 1},
           "genes": {"lr": {"type": "real", "low": 0.01, "high": 0.3, "default": 0.1}}}
    with pytest.raises(FedevoError, match="clients = 5000 need at least 2"):
        fedevo.search(doc, pop=4, gen=1, workers=0, out=tmp_path / "run", page=False)
    assert not (tmp_path / "run").exists()
    gene = {**doc, "data": {"partition": "dirichlet"},  # a clients gene: refused at its high bound
            "genes": {"clients": {"type": "int", "low": 10, "high": 5000, "default": 10}}}
    with pytest.raises(FedevoError, match="gene 'clients' at its high bound 5000 .* clients = 5000 need"):
        fedevo.Problem.from_dict(gene)


def _digest(p) -> str:
    import hashlib

    h = hashlib.sha256()
    for part in (*p.train, *p.test):
        h.update(np.asarray(part, dtype=np.int64).tobytes() + b"|")
    return h.hexdigest()[:16]


@pytest.mark.parametrize("clients, alpha, seed, digest", [
    (5, 0.1, 0, "1b619daa67652e01"),  # drawn at the first try
    (200, 0.5, 0, "e200cb6a03be0f57"),  # at the 4th
    (400, 1.0, 2, "050d71b30a2d6467"),  # at the 8th
])
def test_a_dirichlet_partition_drawn_before_is_drawn_the_same(clients, alpha, seed, digest):
    """The partitions the redraws found before the top-up came (digests made with that code): the same seeds give
    the same clients, train and test, so runs made before keep their fronts."""
    p = partition(LABELS, TEST, scheme="dirichlet", clients=clients, num_classes=10, seed=seed, dirichlet_alpha=alpha)
    assert _digest(p) == digest


@pytest.mark.parametrize("clients, alpha", [(700, 0.5), (1000, 0.5), (1500, 0.1), (1200, 5.0)])
def test_clients_no_dirichlet_redraw_gives_enough_samples_are_topped_up(clients, alpha):
    """Between the clients a draw practically gives every one 2 samples (here ~300 of 3000 samples) and the hard
    bound (1500), all 100 redraws failed, and so every evaluation: now the draw that missed by the fewest samples is
    topped up from the largest clients, seeded."""
    p = partition(LABELS, TEST, scheme="dirichlet", clients=clients, num_classes=10, seed=0, dirichlet_alpha=alpha)
    assert len(p.train) == clients and p.sizes.min() >= 2 and p.sizes.sum() == len(LABELS)
    assert np.array_equal(np.sort(np.concatenate(p.train)), np.arange(len(LABELS)))  # disjoint, all of them
    again = partition(LABELS, TEST, scheme="dirichlet", clients=clients, num_classes=10, seed=0, dirichlet_alpha=alpha)
    assert _digest(again) == _digest(p)
    other = partition(LABELS, TEST, scheme="dirichlet", clients=clients, num_classes=10, seed=1, dirichlet_alpha=alpha)
    assert _digest(other) != _digest(p)
    if alpha <= 0.5:  # still skewed: a client's labels more often one than an IID split's of the same clients
        iid = partition(LABELS, TEST, scheme="iid", clients=clients, num_classes=10, seed=0)
        top = [np.mean([np.bincount(LABELS[t], minlength=10).max() / len(t) for t in q.train]) for q in (p, iid)]
        assert top[0] > top[1], top


def test_a_dirichlet_client_topped_up_gets_the_labels_its_draw_meant_for_it():
    """A client short of samples receives them from the largest client, of the class its own Dirichlet proportions
    favour most (proportion × the class's samples) among those the giver holds."""
    from fedevo.data.partition import _topped_up

    # client 0 holds everything: class 0's 6 samples (0..5) and class 1's 4 (6..9); clients 1 and 2 none
    draw = [(np.arange(6), np.array([0.6, 0.1, 0.3]), np.array([6, 6])),  # meant: 0.6 of a sample for 1, 1.8 for 2
            (np.arange(6, 10), np.array([0.5, 0.45, 0.05]), np.array([4, 4]))]  # 1.8 for client 1, 0.2 for 2
    out = _topped_up(draw, 3, 2, np.random.default_rng(0))
    assert [len(o) for o in out] == [6, 2, 2]
    assert set(out[1]) <= set(range(6, 10)) and set(out[2]) <= set(range(6))
    assert np.array_equal(np.sort(np.concatenate(out)), np.arange(10))


def test_an_evaluation_with_clients_near_the_hard_bound_trains(tmp_path):
    """digits (1437 training samples) over 700 Dirichlet clients: the load check accepts it (at most 718), and the
    evaluation trained instead of failing on 'left a client with < 2 samples after 100 tries'."""
    import fedevo

    doc = {"name": "dir", "dataset": "digits", "model": "mlp",
           "data": {"partition": "dirichlet", "clients": 700, "dirichlet_alpha": 0.5},
           "train": {"rounds": 1, "participation": 0.02},
           "genes": {"lr": {"type": "real", "low": 0.01, "high": 0.3, "default": 0.1}}}
    assert fedevo.evaluate(fedevo.Problem.from_dict(doc), seed=0).status == "ok"


@pytest.mark.parametrize("scheme", ["shards", "dirichlet"])
def test_a_test_split_lacking_a_class_the_clients_train_on(scheme):
    """A user's test split may lack a class (docs/data.md): the clients' matched test samples follow their train
    histograms over the classes it holds; a client training on none of those gets none (the error objectives
    leave it out). It raised numpy's 'a cannot be empty unless no samples are taken'."""
    ytr = np.repeat(np.arange(3), 20)
    yte = np.array([0, 0, 1, 1, 0, 1])  # no class 2
    p = partition(ytr, yte, scheme=scheme, clients=4, num_classes=3, seed=0, dirichlet_alpha=0.5)
    for train, test in zip(p.train, p.test):
        assert set(yte[test]) <= set(ytr[train]) - {2}
        assert len(test) == 0 or set(ytr[train]) - {2}
    if scheme == "shards":  # shards of one class each: a client of class 2 alone has no test samples
        only2 = [len(t) for tr, t in zip(p.train, p.test) if set(ytr[tr]) == {2}]
        assert all(n == 0 for n in only2)
    full = partition(ytr, np.array([0, 0, 1, 1, 0, 1, 2, 2]), scheme=scheme, clients=4, num_classes=3, seed=0,
                     dirichlet_alpha=0.5)  # with every class: as before
    assert all(len(t) for t in full.test)
