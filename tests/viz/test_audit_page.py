"""audit.html and the audit's terminal report state what the accountant's ε is under (issue #28 item 4): trust, δ,
population N, cohort M (clients per round), the rounds run, and the ε there beside the search's."""

import dataclasses
import html as htmllib
import json
import re

import pytest

from tests.viz.fedevo_runs import central_run


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    from fedevo import api

    run_dir = central_run(tmp_path_factory)
    out = tmp_path_factory.mktemp("audit") / "a"
    return api.audit(run_dir, "knee", out=out), out


def text_of(page: str) -> str:
    return htmllib.unescape(re.sub(r"\s+", " ", re.sub("<[^>]+>", " ", page[page.index("<h1>"):])))


def test_audit_page_states_the_deployment_and_the_rounds(audited):
    (r,), out = audited
    assert r.deployment == {"trust": "central", "delta": 1e-6, "population": 100_000, "cohort": 1000,
                            "sampling": "poisson", "rounds": 2}  # digits_mlp searched with --rounds 2
    text = text_of((out / "audit.html").read_text())
    assert ("every ε here is under: trust central · δ 1e-6 · population N 100k · cohort M (clients per round) 1k · "
            "sampling poisson · rounds 2") in text
    assert "at 2 rounds (the search's too)" in text  # a run's pick is audited as searched
    doc = json.loads((out / "audit.json").read_text())
    assert doc["audits"][0]["deployment"]["cohort"] == 1000


def test_audit_eps_text_says_why_it_differs_from_the_search(audited):
    from fedevo.auditing.report import eps_text

    (r,), _ = audited
    other = dataclasses.replace(r, eps_search=r.eps_upper * 2)
    txt = eps_text(other)
    assert txt.startswith(f"ε {eps_text(r).split()[1]} at 2 rounds; the search's ") and "at the same rounds" in txt
    assert "the audit run's accountant gives" in txt


def test_terminal_report_states_the_deployment(audited):
    from rich.console import Console

    from fedevo.auditing.report import print_table

    (r,), _ = audited
    con = Console(width=200, record=True)
    print_table([r], con)
    out = con.export_text()
    assert "trust central · δ 1e-6 · population N 100k · cohort M (clients per round) 1k" in out
    assert "at 2 rounds (the search's too)" in out


def test_audit_page_never_reads_zero_of_zero_guesses(audited, tmp_path):
    """Issue #36: a bound from no guess rule says so ("0 of 0 guesses right ( rule, …)" before); the two plot
    titles are two short lines each (one line each overlapped the other's at 1,000 px)."""
    from fedevo.auditing.estimate import OneRunBound
    from fedevo.auditing.report import figure, write_html

    (r,), _ = audited
    none = dataclasses.replace(r, bound=OneRunBound(0.0, 0, 0, 0, 0, "", 6, 0.01 / 6))
    text = text_of(write_html(tmp_path / "a.html", [none], title="fedevo — audit").read_text())
    assert "0 of 0 guesses" not in text and "( rule" not in text
    assert "none of the 6 guess rules tried" in text
    assert all(len(line) <= 60 for a in figure(r).layout.annotations for line in a.text.split("<br>"))
