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
