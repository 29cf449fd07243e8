"""What a process runs: Python, the packages an evaluation's numbers come from, fedevo's own source (a hash) and
its kernels. run.json records the driver's (:func:`versions`, its ``fedevo_source`` too: a resume by another
source says so, provenance.py); on a Ray cluster, each node's are compared with
the driver's before anything is evaluated (:func:`check_nodes`): a node whose fedevo differs is refused (a search
would log rows of two programs under one run), other differences are said in one note (numbers may then differ
in their last digits between nodes: the same seed no longer gives the same rows), and a node that lacks a data
or code file of the run's (which workers read by path) or holds another version of it is refused."""

from __future__ import annotations

import functools
import hashlib
import platform
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..errors import FedevoError

PACKAGES = ("fedevo", "numpy", "pymoo", "ray", "torch", "rich", "typer")
REFUSED = ("fedevo", "fedevo_source")  # another fedevo on a node: refused
NOTED = ("python", "numpy", "torch", "fedevo_kernels")  # the rest of what an evaluation's numbers come from


def versions() -> dict[str, str]:
    """Python's and the packages' versions, fedevo's source hash (`source_hash`) and fedevo's kernels ('native'
    or 'torch (why)': the noise values depend on it), as run.json records them."""
    out = {"python": platform.python_version(), "fedevo": _fedevo_version()}
    for pkg in PACKAGES[1:]:
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    from .. import native

    out["fedevo_source"] = source_hash()
    out["fedevo_kernels"] = native.status()
    return out


def program() -> dict[str, str]:
    """fedevo's version and source hash: what tells two programs apart (provenance.py)."""
    return {"fedevo": _fedevo_version(), "fedevo_source": source_hash()}


def _fedevo_version() -> str:
    try:
        return metadata.version("fedevo")
    except metadata.PackageNotFoundError:
        from .. import __version__

        return __version__


def source_hash(root: Optional[Path] = None) -> str:
    """SHA-256 (first 16 hex digits) of fedevo's source (or that below `root`): its Python files and the C sources
    of its native kernels (SOURCE_SUFFIXES; the kernels draw the noise), file by file in path order: two installs
    of one version string can differ (a checkout, an edit). fedevo's own is hashed once per
    process (168 files, 1.7 MB: 4-7 ms on a 2-vCPU AMD EPYC Zen 5), as first asked: the source this process
    imported, were its files edited later."""
    return _own_source() if root is None else _hash_tree(Path(root))


@functools.lru_cache(maxsize=1)
def _own_source() -> str:
    return _hash_tree(Path(__file__).resolve().parents[1])


SOURCE_SUFFIXES = (".py", ".c", ".h")  # what the source hash covers: an edited C kernel is another program


def _hash_tree(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(p for p in root.rglob("*") if p.suffix in SOURCE_SUFFIXES and p.is_file()):
        h.update(p.relative_to(root).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def node_report(paths: Sequence[str] = ()) -> dict[str, Any]:
    """This process's versions, fedevo's source hash and host name, and the SHA-256 of each of `paths` (None: not
    there or unreadable): what a task pinned to a node returns."""
    import socket

    from .inputs import digest

    files = {}
    for p in paths:
        try:
            files[p] = digest(Path(p))[0] if Path(p).exists() else None
        except OSError:
            files[p] = None
    return {"host": socket.gethostname(), **versions(), "fedevo_source": source_hash(), "files": files}


def differences(here: Mapping[str, Any], there: Mapping[str, Any], keys: Sequence[str]) -> list[str]:
    """'torch 2.13.0 (here 2.14.1)' for each of `keys` whose value differs."""
    return [f"{k} {there.get(k, 'missing')} (here {here.get(k, 'missing')})" for k in keys
            if there.get(k) != here.get(k)]


def compare(here: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]], where: str,
            roles: Sequence[tuple[str, str]] = ()) -> Optional[str]:
    """FedevoError (one line) naming the first node whose fedevo differs from `here`, or that lacks one of the
    input files (`roles`: (path, what it is), as `here["files"]` holds their SHA-256) or holds another version;
    else a note naming the nodes whose Python, numpy, torch or kernels differ (None when every node runs what the
    driver runs)."""
    for n in nodes:
        refused = differences(here, n, REFUSED)
        if refused:
            raise FedevoError(f"node {n.get('host', '?')} of {where} runs another fedevo ({', '.join(refused)}): "
                              "install this fedevo on every node (or start the cluster from this source folder), "
                              "else one run would log rows of two programs")
        for path, role in roles:
            sha, want = (n.get("files") or {}).get(path), (here.get("files") or {}).get(path)
            if want is not None and sha != want:  # (a file this machine cannot read either: its own checks say so)
                how = "is not there" if sha is None else f"differs there (SHA-256 {sha[:12]}… against {want[:12]}… here)"
                raise FedevoError(f"{path} ({role}) {how} on node {n.get('host', '?')} of {where}: its workers read it "
                                  "from this path; put the same file at this path on every node (a folder they share, "
                                  "mounted at the same place)")
    noted = [f"node {n.get('host', '?')}: {', '.join(d)}" for n in nodes if (d := differences(here, n, NOTED))]
    if not noted:
        return None
    return (f"{where} runs other versions than this machine ({'; '.join(noted)}): its numbers may differ in their "
            "last digits from this machine's, and between nodes")


def check_nodes(ray, where: str, timeout: float = 120.0, here: Optional[Mapping[str, Any]] = None,
                inputs: Sequence[tuple[str, Any]] = (), known: Optional[Mapping[str, str]] = None) -> Optional[str]:
    """`compare` this process's node_report (or `here`) with one from every alive node of the connected Ray (a task
    pinned to each node, holding no CPU), the run's input files too (`inputs`: (what it is, path), as
    inputs.files_read_by_path gives them: the data and code the workers read by path; `known`: path → SHA-256 of
    those this machine has digested already, run.json's `inputs`, not read again). None, without a check, where
    the nodes do not answer within `timeout` seconds or this Ray cannot pin tasks: the search goes on unchecked
    (what Ray itself printed meanwhile reaches `ray.log` through the caller's capture)."""
    try:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        paths = [str(p) for _, p in inputs]
        probe = ray.remote(num_cpus=0, max_retries=0)(node_report)
        refs = [probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
                .remote(paths) for n in ray.nodes() if n.get("Alive")]
        nodes = ray.get(refs, timeout=timeout)
    except Exception:  # noqa: BLE001 - an old Ray, a node that does not answer: no check rather than no search
        return None
    if here is None:
        known = dict(known or {})
        here = node_report([p for p in paths if p not in known])
        here["files"].update({p: known[p] for p in paths if p in known})
    return compare(here, nodes, where, roles=[(str(p), role) for role, p in inputs])


__all__ = ["check_nodes", "compare", "differences", "node_report", "program", "source_hash", "versions"]
