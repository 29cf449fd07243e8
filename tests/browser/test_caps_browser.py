"""front.html's knee caps in headless Chromium (issues #28, #36), split from test_selection_browser.py (so that
pytest-xdist's --dist loadfile, a file a worker, does not end the suite on one long file): the page's knee within
caps is picking's, the caps' rings and greyed evaluations are the command line's picks, and a maximised objective
is chosen by its highest.

Browser fixture: tests/browser/conftest.py; skip rule and helpers: tests/browser/test_front_browser.py.
"""

from __future__ import annotations

import math

import pytest

from tests.browser.test_front_browser import (ARTIFACTS, CHROMIUM, MOVE_MS, no_network_and_no_errors, open_fresh,
                                              settle)
from tests.browser.test_selection_browser import DIMMED_JS, _pick_ids

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium "
                                                          "chromium-driver)")

KNEES_JS = """
return ['front3d', 'projections'].map(d => document.getElementById(d).data.filter(t => t.name === 'knee')
  .map(t => Array.from(t.customdata)));
"""

CAPS_SERIES_JS = """
// fedevoCaps for each caps in turn (one call from the test instead of three per caps): after each, the knee it
// returns, the note and the knee rings of the 3D view and every projection as the page then holds them
const knees = () => ['front3d', 'projections'].map(d => document.getElementById(d).data.filter(t => t.name === 'knee')
  .map(t => Array.from(t.customdata)));
return arguments[0].map(c => {
  const r = fedevoCaps(c);
  return {id: r.row ? r.row.id : null, reason: r.reason || null, how: r.how || null,
          note: document.getElementById('knee-note').textContent, knees: knees()};
});
"""


def _python_knee(data, caps: dict):
    from fedevo.errors import FedevoError

    spec = "knee" + "".join(f":{k}<={v!r}" for k, v in caps.items())
    try:
        return data.pick(spec)[0].id, None
    except FedevoError as e:
        return None, str(e)


def test_knee_caps_pick_as_python(browser, chance_page):
    """The page's knee within caps (JavaScript) is picking's `--pick knee:eps<=X:comm<=Y` for many caps, including
    none, caps that leave nothing (the page says so) and caps that leave only solutions at chance; the knee's
    rings in the 3D view and every projection follow."""
    from fedevo.searching.rundata import load_run

    page, run_dir, _, _ = chance_page
    data = load_run(run_dir)
    ek = data.eps_key
    bar = data.knee_bar
    open_fresh(browser, page)
    eps = sorted({r[ek] for r in data.front if math.isfinite(r[ek])})
    comm = sorted({r["comm"] for r in data.front})
    caps = ([{}] + [{ek: e} for e in eps] + [{"comm": c} for c in comm[::2]]
            + [{ek: e, "comm": c} for e in eps[::3] for c in comm[::3]] + [{ek: eps[0] / 2}])
    chance_only = [e for e in eps if all(r["error"] >= bar for r in data.front if r[ek] <= e)]
    assert chance_only, "the fixture's most private Pareto solutions must be at chance"
    seen = set()
    got = browser.execute_script(CAPS_SERIES_JS, caps)
    assert len(got) == len(caps)
    for c, js in zip(caps, got):
        want, err = _python_knee(data, c)
        assert js["id"] == want, (c, js, want, err)
        note, knees = js["note"], js["knees"]
        assert all(ids == ([want] if want is not None else []) for view in knees for ids in view), (c, knees)
        assert len(knees[1]) == 3  # one knee trace per projection panel
        if want is not None:
            assert f"id {want} " in note
            seen.add(js["how"])
        elif js["reason"] == "none":
            assert "No Pareto solution is within" in note and "no knee is marked" in note, note
            seen.add("none")
        else:
            assert "clearly better than chance" in note and "no knee is marked" in note, note
            seen.add("chance")
    assert {"none", "chance", "pymoo HighTradeoffPoints"} <= seen, seen

    # typed into the inputs: the note and the rings follow, and name the equivalent --pick
    browser.execute_script("fedevoCaps({})")
    box = browser.find_element("id", "cap-eps")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    cap = eps[len(eps) // 2]
    box.send_keys(repr(cap) + "\n")  # a cap applies on Enter (or when its box is left)
    settle(browser)
    want, _ = _python_knee(data, {ek: cap})
    note = browser.execute_script("return document.getElementById('knee-note').textContent")
    assert f"id {want} " in note and f"--pick 'knee:{ek}<={cap!r}'" in note, note
    assert browser.execute_script(KNEES_JS)[0] == [[want]]
    browser.find_element("id", "knee-caps").screenshot(str(ARTIFACTS / "front-knee-caps.png"))
    browser.execute_script("fedevoCaps({})")
    no_network_and_no_errors(browser)


def test_caps_choose_what_the_command_line_picks_and_dim_the_rest(browser, chance_page):
    """Issue #36: caps on any objective with "the knee" or "the lowest NAME": the green ring is `fedevo front RUN
    --pick 'CAPS,lowest-NAME'` (or `knee:CAPS`), the black ring `knee:CAPS`, the red rings `CAPS,lowest-error:2`,
    the Pareto table's marks follow, and every evaluation outside the caps is drawn grey in the 3D view, in every
    projection and in the parallel coordinates (its colour value below the scale, as plotly holds it) and greyed in
    the table; a cap the knee meets leaves it in place, on the page and in `--pick knee:CAPS` alike. Typed into the
    inputs with the keyboard, the chooser set with the mouse."""
    from fedevo.searching.rundata import load_run

    page, run_dir, ok_ids, front_ids = chance_page
    data = load_run(run_dir)
    ek = data.eps_key
    open_fresh(browser, page)
    knee = _pick_ids(data, "knee")[0]
    krow = next(r for r in data.front if r["id"] == knee)
    eps = sorted(r[ek] for r in data.front if math.isfinite(r[ek]))
    comm = sorted(r["comm"] for r in data.front)
    cases = [({ek: krow[ek]}, "knee"), ({ek: krow[ek] * 1.01, "comm": krow["comm"]}, "knee"),
             ({"error": krow["error"]}, "knee"), ({ek: eps[len(eps) // 3]}, "knee"),
             ({ek: eps[len(eps) // 3], "comm": comm[len(comm) // 2]}, "lowest-error"),
             ({ek: eps[len(eps) // 2]}, "lowest-comm"), ({"comm": comm[len(comm) // 3]}, f"lowest-{ek}"),
             ({}, "lowest-error")]
    rows = {r["id"]: r for r in data.ok_rows}
    chance_cases: list = []
    for caps, mode in cases:
        res = browser.execute_script("const r = fedevoCaps(arguments[0], arguments[1]); "
                                     "return {chosen: r.chosen ? r.chosen.id : null, spec: r.spec};", caps, mode)
        terms = [f"{k}<={v!r}" for k, v in caps.items()]
        spec = ("knee:" + ":".join(terms) if terms else "knee") if mode == "knee" else ",".join(terms + [mode])
        want = _pick_ids(data, spec)
        assert [res["chosen"]] == want[:1], (caps, mode, res, want)
        if mode == "knee" and all(krow[k] <= v for k, v in caps.items()):
            assert want == [knee], (caps, want)  # the command line keeps the knee ...
        settle(browser)  # (the parallel view is recoloured at the next frame)
        got = browser.execute_script(DIMMED_JS)
        if mode == "knee" and all(krow[k] <= v for k, v in caps.items()):
            assert got["rings"]["3d:knee"] == [knee]  # ... and so does the page
        kspec = "knee:" + ":".join(terms) if terms else "knee"
        want_knee = _pick_ids(data, kspec)
        low2 = _pick_ids(data, ",".join(terms + ["lowest-error:2"]))
        for view in ("3d:", "2d:x", "2d:x2", "2d:x3"):
            v = view.split(":")[0] + ":"
            x = view.split(":")[1]
            assert got["rings"][f"{v}knee{x}"] == want_knee, (view, got["rings"])
            assert sorted(got["rings"][f"{v}lowest error ×2{x}"]) == sorted(low2), (view, got["rings"])
            assert got["rings"][f"{v}chosen{x}"] == want[:1], (view, got["rings"])
        inside = {i for i, r in rows.items() if all(r[k] <= v for k, v in caps.items())}
        for name, dimmed in got["views"].items():
            assert {int(i) for i, d in dimmed.items() if d} == (set(rows) - inside if caps else set()), (name, caps)
        assert set(got["grey"]) == ({r["id"] for r in data.front} - inside if caps else set())
        knee_marked = [int(i) for i, m in got["marks"].items() if "knee" in m]
        assert knee_marked == want_knee, (got["marks"], want_knee)
        if want:
            # the page's own spec (its caps in the objectives' order) picks the same, and the note gives it
            assert _pick_ids(data, res["spec"])[:1] == want[:1], res
            assert f"Chosen: id {want[0]} " in got["note"], got["note"]
            assert (f"--pick '{res['spec']}'" in got["note"] or f"--pick {res['spec']} " in got["note"]), got["note"]
            # a choice no better than chance says so on the page as in the command line's reasons
            said = "not clearly better than chance" in data.pick(spec)[0].label
            chance_cases.append(said)
            assert ("not clearly better than chance" in got["note"]) == said, (mode, got["note"])
    assert True in chance_cases and False in chance_cases  # both kinds of choice were seen
    # typed with the keyboard, the chooser with the mouse
    browser.execute_script("fedevoCaps({}, 'knee')")
    box = browser.find_element("id", f"cap-{ek}")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", box)
    box.send_keys(repr(eps[len(eps) // 3]))
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("id", "choose-by")).select_by_value("lowest-error")
    settle(browser)
    want = _pick_ids(data, f"{ek}<={eps[len(eps) // 3]!r},lowest-error")
    got = browser.execute_script(DIMMED_JS)
    assert got["rings"]["3d:chosen"] == want[:1] and f"Chosen: id {want[0]} " in got["note"]
    browser.execute_script("document.getElementById('projections').scrollIntoView()")
    settle(browser)
    browser.save_screenshot(str(ARTIFACTS / "front-caps-dimmed.png"))
    browser.execute_script("fedevoCaps({}, 'knee')")
    no_network_and_no_errors(browser)


def test_a_maximised_objective_is_chosen_by_its_highest(browser, chance_page, tmp_path):
    """A run with a maximised objective (here the chance run's global accuracy recorded as a fourth objective, to be
    maximised) offers "the highest NAME" for it, not the lowest, and what the page chooses with it within caps is
    `fedevo front RUN --pick 'CAPS,highest-NAME'`; the note says the highest."""
    import dataclasses
    import os

    from fedevo.searching.rundata import load_run
    from fedevo.viz.front import front_html
    from fedevo.viz.html import write

    _, run_dir, _, _ = chance_page
    three = load_run(run_dir)
    ek = three.eps_key
    acc = {"name": "acc_hi", "label": "global accuracy", "unit": "", "direction": "maximize", "worst": 0.0,
           "log": False, "floor": 0.0, "lower": 0.0, "upper": 1.0, "description": "1 - global test error"}
    meta = {**three.meta, "objectives": [*three.meta["objectives"], "acc_hi"],
            "objective_specs": [*three.meta["objective_specs"], acc]}
    rows = [{**r, "acc_hi": r.get("accuracy_global")} for r in three.rows]
    by_id = {r["id"]: r for r in rows}
    data = dataclasses.replace(three, meta=meta, rows=rows, front=[by_id[r["id"]] for r in three.front])
    assert data.objectives.names[-1] == "acc_hi" and data.objectives.by_name("acc_hi").maximize
    plotly_js = next(run_dir.glob("plotly-*.min.js"))
    page = write(tmp_path / "front.html", front_html(data, plotly_src=os.path.relpath(plotly_js, tmp_path)))
    open_fresh(browser, page)
    options = browser.execute_script("return Array.from(document.querySelectorAll('#choose-by option'))"
                                     ".map(o => o.value)")
    assert "highest-acc_hi" in options and "lowest-acc_hi" not in options and "lowest-error" in options, options
    eps = sorted(r[ek] for r in data.front if math.isfinite(r[ek]))
    comm = sorted(r["comm"] for r in data.front)
    for caps in ({}, {ek: eps[len(eps) // 2]}, {"comm": comm[len(comm) // 3]}, {ek: eps[-1], "comm": comm[-2]}):
        res = browser.execute_script("const r = fedevoCaps(arguments[0], 'highest-acc_hi'); return {chosen: "
                                     "r.chosen ? r.chosen.id : null, spec: r.spec, "
                                     "note: document.getElementById('knee-note').textContent};", caps)
        spec = ",".join([f"{k}<={v!r}" for k, v in caps.items()] + ["highest-acc_hi"])
        want = _pick_ids(data, spec)
        assert want and [res["chosen"]] == want[:1], (caps, res, want)
        assert _pick_ids(data, res["spec"])[:1] == want[:1], res
        worst = min(r["acc_hi"] for r in data.front if all(r[k] <= v for k, v in caps.items()))
        assert by_id[want[0]]["acc_hi"] > worst  # the highest, not the lowest
        assert "the highest global accuracy among" in res["note"], res["note"]
    # the 2026-11 audit: the tables and the hypervolume note name it, said to be maximised (a row clicked with the mouse)
    from selenium.webdriver.common.action_chains import ActionChains

    browser.execute_script("fedevoCaps({}, 'knee')")
    heads = browser.execute_script("return Array.from(document.querySelectorAll('#front-table thead th'))"
                                   ".map(th => th.textContent)")
    assert "global accuracy (maximised)" in heads, heads
    cell = browser.find_element("css selector", f'#front-table tbody td[data-v="{data.front[0]["id"]}"]')
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
    ActionChains(browser, duration=MOVE_MS).move_to_element(cell).click().perform()
    settle(browser)
    heads = browser.execute_script("return Array.from(document.querySelectorAll('#selected-table thead th'))"
                                   ".map(th => th.textContent)")
    assert "global accuracy (maximised)" in heads, heads
    note = browser.find_element("id", "hypervolume-note").text
    assert "−global accuracy)" in note and "(1.1, 1.1, 1.1, 1.1)" in note and "negated" in note, note
    browser.execute_script("sessionStorage.clear()")
    no_network_and_no_errors(browser)
