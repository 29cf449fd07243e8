"""front.html of a search without privacy: it searched error and comm (ε, ∞ for everyone, left out), and says so
where it said "the search saw ε as log10 ε" of a search that did not see ε at all."""

from __future__ import annotations

import fedevo
from fedevo.searching.rundata import load_run
from fedevo.viz.front import front_html

from tests.searching.test_nonprivate_search import plain


def test_the_header_says_eps_was_left_out(tmp_path):
    out = tmp_path / "R"
    fedevo.search(str(plain(tmp_path)), pop=4, gen=1, seed=1, workers=0, out=out, progress=False)
    page = front_html(load_run(out))
    assert ("comm (params/round/client slot) minimised; ε left out of the objectives: no privacy, ε = ∞ in every "
            "evaluation</p>") in page
    assert "the search saw ε as" not in page
