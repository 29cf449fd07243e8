"""A Ray cluster's nodes may run another install than the driver's machine: a node whose fedevo differs is
refused (one run would log rows of two programs), other differences in what an evaluation's numbers come from
(Python, numpy, torch, fedevo's kernels) are said in one note. Before, nothing compared them."""

from __future__ import annotations

import pytest

from fedevo.errors import FedevoError
from fedevo.searching.ray_session import local_temp_root, remove_temp_root
from fedevo.searching.versions import check_nodes, compare, node_report, source_hash

HERE = {"host": "driver", "python": "3.11.9", "fedevo": "0.1.0", "fedevo_source": "aaaa", "numpy": "2.1.0",
        "torch": "2.14.1", "fedevo_kernels": "native", "rich": "14.0"}


def test_the_same_install_everywhere_says_nothing():
    assert compare(HERE, [dict(HERE, host="n1"), dict(HERE, host="n2", rich="13.0")], "the cluster") is None


def test_another_fedevo_on_a_node_is_refused():
    with pytest.raises(FedevoError, match=r"^node n2 of the Ray cluster at h:1 runs another fedevo \(fedevo_source "
                                          r"bbbb \(here aaaa\)\): install this fedevo on every node"):
        compare(HERE, [dict(HERE, host="n1"), dict(HERE, host="n2", fedevo_source="bbbb")], "the Ray cluster at h:1")


def test_other_numerics_on_a_node_are_noted():
    note = compare(HERE, [dict(HERE, host="n1", torch="2.13.0"),
                          dict(HERE, host="n2", fedevo_kernels="torch (FEDEVO_NATIVE=0)")], "the cluster")
    assert note == ("the cluster runs other versions than this machine (node n1: torch 2.13.0 (here 2.14.1); node "
                    "n2: fedevo_kernels torch (FEDEVO_NATIVE=0) (here native)): its numbers may differ in their last "
                    "digits from this machine's, and between nodes")


def test_the_source_hash_follows_the_source(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    (tmp_path / "notes.txt").write_text("not source")
    a = source_hash(tmp_path)
    assert len(a) == 16 and a == source_hash(tmp_path)
    (tmp_path / "notes.txt").write_text("other")
    assert source_hash(tmp_path) == a  # only the Python source counts
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    b = source_hash(tmp_path)
    assert b != a
    # the native kernels' C sources count too (review17 F8: an edited noise.c was 'the same program')
    (tmp_path / "noise.c").write_text("int f(void) { return 1; }\n")
    c = source_hash(tmp_path)
    assert c != b
    (tmp_path / "noise.c").write_text("int f(void) { return 2; }\n")
    d = source_hash(tmp_path)
    assert d != c
    (tmp_path / "kernel.so").write_bytes(b"built")  # a build, not source
    assert source_hash(tmp_path) == d
    assert len(source_hash()) == 16  # fedevo's own


def test_a_node_without_the_runs_file_or_with_another_is_refused():
    here = dict(HERE, files={"/p/models.py": "a" * 64})
    roles = [("/p/models.py", "model")]
    assert compare(here, [dict(here, host="n1")], "the cluster", roles) is None
    with pytest.raises(FedevoError, match=r"^/p/models.py \(model\) is not there on node n2 of the cluster: its workers "
                                          r"read it from this path; put the same file at this path on every node"):
        compare(here, [dict(here, host="n1"), dict(here, host="n2", files={})], "the cluster", roles)
    with pytest.raises(FedevoError, match=r"^/p/models.py \(model\) differs there \(SHA-256 bbbbbbbbbbbb… against "
                                          r"aaaaaaaaaaaa… here\) on node n1"):
        compare(here, [dict(here, host="n1", files={"/p/models.py": "b" * 64})], "the cluster", roles)


@pytest.mark.timeout(120)
def test_every_node_of_a_ray_reports_what_it_runs(tmp_path):
    """A task pinned to each node (here: the one of a local Ray) returns its versions; the same install: no note."""
    import ray

    root = local_temp_root()
    try:
        ray.init(num_cpus=1, include_dashboard=False, _temp_dir=root, log_to_driver=False)
        assert check_nodes(ray, "the local Ray") is None
        note = check_nodes(ray, "the local Ray", here=dict(node_report(), torch="0.0"))  # as if the driver's differed
        assert note.startswith("the local Ray runs other versions than this machine (node ") and \
            f"torch {node_report()['torch']} (here 0.0)" in note, note
        with pytest.raises(FedevoError, match="runs another fedevo"):
            check_nodes(ray, "the local Ray", here=dict(node_report(), fedevo_source="0"))
        model = tmp_path / "models.py"
        model.write_text("def mlp(): ...\n")
        assert check_nodes(ray, "the local Ray", inputs=[("model", model)]) is None  # the same file on the node
        with pytest.raises(FedevoError, match=f"^{model} \\(model\\) differs there"):
            check_nodes(ray, "the local Ray", inputs=[("model", model)],
                        here=dict(node_report(), files={str(model): "0" * 64}))
        # the digests run.json holds are not read again on this machine: one that no longer matches the file the
        # node reads is refused (a driver that read the file again would have found the two the same)
        with pytest.raises(FedevoError, match=f"^{model} \\(model\\) differs there"):
            check_nodes(ray, "the local Ray", inputs=[("model", model)], known={str(model): "1" * 64})
        (there,) = ray.get([ray.remote(num_cpus=0)(node_report).remote()])
        assert {k: there[k] for k in ("fedevo", "fedevo_source", "torch")} == \
            {k: node_report()[k] for k in ("fedevo", "fedevo_source", "torch")}
    finally:
        ray.shutdown()
        remove_temp_root(root)


def test_the_files_a_node_needs_are_those_read_by_path(tmp_path):
    """Workers open a problem's data and its python:FILE:FUNC code by their absolute path: each node needs them
    there. A "package.module:function" is imported by name, from each node's own install (its path may differ
    from this machine's): not compared."""
    from fedevo.problem import load_problem
    from fedevo.searching.inputs import files_read_by_path, input_files

    (tmp_path / "ev.py").write_text("def evaluate(problem, params, *, seed=0, rounds=None, data_dir=None):\n"
                                    "    return (0.1, 1.0, 1.0)\n")
    genes = '[genes]\nlr = { type = "real", low = 0.1, high = 1.0, default = 0.5 }\n'
    (tmp_path / "by_path.toml").write_text('name = "a"\nevaluator = "python:ev.py:evaluate"\n' + genes)
    assert files_read_by_path(load_problem(str(tmp_path / "by_path.toml"))) == [("evaluator", tmp_path / "ev.py")]
    (tmp_path / "by_name.toml").write_text('name = "b"\nevaluator = "tests.searching.search_fakes:fake_evaluate"\n'
                                           + genes)
    by_name = load_problem(str(tmp_path / "by_name.toml"))
    assert [role for role, _ in input_files(by_name, None)] == ["evaluator"]  # run.json records it
    assert files_read_by_path(by_name) == []  # but a node imports it by name
