"""Same seeds, same fronts (issue 25): committed searches on digits_mlp and digits_mlp_local, rerun, give the same
evaluations.csv, front.csv and hypervolume.csv, cell by cell as written (floats as their repr), wall_s aside.

The references (reference_runs/<problem>/, see reference_runs/README.md) were made before issue 25's refactor.
Their numbers are the compute engine's: fp32 or bf16, the native kernels or torch alone, the vector width and
ISA the kernels were compiled for (-march=native: AVX-512 accumulates in 16 lanes, AVX2 in 8, FMA contracts),
the compiler that built them (-ffast-math lets it reorder), torch's own CPU kernels' ISA. Each reference records
that engine signature (engine.json); on a machine whose signature differs the test is skipped, naming both, and
where it matches the files must be equal exactly.

`python tests/searching/test_reference_runs.py digits_mlp` prints this machine's signature for a problem (what
engine.json holds).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REFERENCES = HERE / "reference_runs"
PROBLEMS = ("digits_mlp", "digits_mlp_local")
FILES = ("evaluations.csv", "front.csv", "hypervolume.csv")
IGNORED = ("wall_s",)  # the only column that may differ between two runs of one search
CHAIN = "chain"  # the log's hash chain (issue 35): covers wall_s and run.json's bytes, so it differs too; the
# references were made before it, so a rerun's log has this one more (last) column

from fedevo.engine_signature import engine_signature, signature_mismatch  # (experiments record it too)


def csv_differences(expected: Path, got: Path, ignored=IGNORED, limit: int = 10) -> list[str]:
    """Where two CSV files differ, cell by cell, as written (no float parsing), columns in `ignored` aside."""
    with open(expected, newline="") as f:
        a = list(csv.reader(f))
    with open(got, newline="") as f:
        b = list(csv.reader(f))
    if b and b[0][-1:] == [CHAIN] and a and a[0][-1:] != [CHAIN]:
        b = [r[:-1] for r in b]
    if not a or not b or a[0] != b[0]:
        return [f"{got.name}: header {b[:1]} != {a[:1]}"]
    diffs = [] if len(a) == len(b) else [f"{got.name}: {len(b) - 1} rows, the reference has {len(a) - 1}"]
    header = a[0]
    for i, (ra, rb) in enumerate(zip(a[1:], b[1:]), start=1):
        if len(ra) != len(rb):
            diffs.append(f"{got.name} row {i}: {len(rb)} cells, the reference has {len(ra)}")
            continue
        diffs += [f"{got.name} row {i} ({header[0]}={ra[0]}) {col}: {y!r}, the reference has {x!r}"
                  for col, x, y in zip(header, ra, rb) if col not in ignored and x != y]
    return diffs[:limit] + ([f"... {len(diffs) - limit} more"] if len(diffs) > limit else [])


def references(problem: str) -> list[Path]:
    """The committed references of a problem: ``<problem>/`` and one ``<problem>.<engine>/`` per other engine."""
    return [REFERENCES / problem] + sorted(REFERENCES.glob(f"{problem}.*"))


def reference(ref: Path) -> tuple[Path, dict, dict]:
    return ref, json.loads((ref / "run.json").read_text()), json.loads((ref / "engine.json").read_text())


def problem_file(run: dict, where: Path) -> Path:
    """The reference's problem file as it was (run.json keeps its text), so that editing the bundled problem
    does not move the reference."""
    path = where / f"{run['problem']['file_stem']}.toml"
    path.write_text(run["problem"]["text"])
    return path


@pytest.mark.parametrize("problem", PROBLEMS)
def test_search_reproduces_the_committed_run(problem, tmp_path):
    """The reference made on this machine's engine (one of the problem's), rerun here: equal cell for cell."""
    import fedevo

    whys = []
    for ref in references(problem):
        ref, run, engine = reference(ref)
        prob = problem_file(run, tmp_path)
        why = signature_mismatch(engine["signature"], engine_signature(prob))
        if not why:
            break
        whys.append(f"{ref.name}: {why}")
    else:
        pytest.skip("; ".join(whys))
    s = run["settings"]
    out = tmp_path / "run"
    fedevo.search(str(prob), pop=s["pop"], gen=s["gen"], seed=s["seed"], partitions=s["partitions"],
                  rounds=s["rounds"], workers=run["runtime_at_start"]["workers"], out=out, page=False)
    diffs = [d for f in FILES for d in csv_differences(ref / f, out / f)]
    assert not diffs, (f"{problem}: the search no longer reproduces {ref} on the same engine {engine['signature']} "
                       f"(reference versions {engine['versions']}):\n" + "\n".join(diffs))


def test_the_comparison_sees_one_changed_digit_and_ignores_wall_s(tmp_path):
    """The comparison itself: a copy is equal; one changed digit in one float is reported; wall_s is not."""
    ref = REFERENCES / "digits_mlp" / "evaluations.csv"
    rows = list(csv.reader(open(ref, newline="")))
    col = rows[0].index("error")

    def copy(name, edit=None):
        r = [list(x) for x in rows]
        if edit:
            edit(r)
        path = tmp_path / name
        with open(path, "w", newline="") as f:
            csv.writer(f).writerows(r)
        return path

    assert csv_differences(ref, copy("same.csv")) == []
    assert csv_differences(ref, copy("wall.csv", lambda r: r[3].__setitem__(rows[0].index("wall_s"), "9.5"))) == []

    def one_digit(r):
        r[3][col] = r[3][col][:-1] + ("1" if r[3][col][-1] != "1" else "2")

    diffs = csv_differences(ref, copy("digit.csv", one_digit))
    assert len(diffs) == 1 and "row 3" in diffs[0] and "error" in diffs[0], diffs
    assert csv_differences(ref, copy("short.csv", lambda r: r.pop())) != []


if __name__ == "__main__":
    import tempfile

    for name in sys.argv[1:] or PROBLEMS:
        with tempfile.TemporaryDirectory() as tmp:
            run = json.loads((REFERENCES / name / "run.json").read_text())
            print(name, json.dumps(engine_signature(problem_file(run, Path(tmp)))))
