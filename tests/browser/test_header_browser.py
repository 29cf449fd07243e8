"""front.html's header of a run whose trust model is a gene (fashion_mlp_dp: central or secagg): the accountant
line names both accountants, about 190 characters in bold, and bold values of the header never wrap, so it ran
past the window's right edge, cut off, at 1,400 px (the expensive-evaluation journey, 2026-11-27). Now it wraps as
the sentence it is, at 1,000 and 1,600 px alike, while a setting's value stays on one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.test_front_browser import CHROMIUM, no_network_and_no_errors, open_fresh
from tests.browser.test_layout_browser import WIDTHS, at_width, no_page_overflow

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium "
                                                          "chromium-driver; pip install selenium)")


def two_trust_run(tmp_path_factory) -> Path:
    """digits_mlp with the trust model as a gene; seed 0 draws both (3 secagg, 1 central)."""
    import fedevo

    base = tmp_path_factory.getbasetemp()
    out = base / "two_trust_run"
    if not (out / "evaluations.csv").exists():
        text = Path(fedevo.Problem.from_file("digits_mlp").path).read_text()
        text = (text.replace('name = "digits_mlp"', 'name = "digits_two_trusts"')
                .replace('trust = "central"\n', 'secagg_bits = 32\nsecagg_threshold = 0.5\n')
                + 'trust = { type = "choice", choices = ["central", "secagg"], default = "central" }\n')
        (base / "two.toml").write_text(text)
        run = fedevo.search(str(base / "two.toml"), optimizer="random", pop=4, gen=1, rounds=1, workers=0, seed=0,
                            out=out, page=False)
        assert {r["trust"] for r in run.evaluations} == {"central", "secagg"}
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_two_accountants_wrap_inside_the_window(browser, tmp_path_factory, width):
    from fedevo.viz import write_front_html

    page = write_front_html(two_trust_run(tmp_path_factory))
    at_width(browser, width)
    open_fresh(browser, page)
    line = browser.execute_script(
        "const b = Array.from(document.querySelectorAll('.meta b')).find(e => e.textContent.startsWith('PLD'));"
        " const r = b.getBoundingClientRect(); return [b.textContent, r.right, window.innerWidth];")
    assert "RDP" in line[0], line  # both accountants, joined
    assert line[1] <= line[2], line  # inside the window
    no_page_overflow(browser)
    no_network_and_no_errors(browser)
