"""What a person types into front.html, read the way the page writes numbers (the 2026-11 browser audit), driven with
the real keyboard and mouse in headless Chromium and checked on what the views DRAW:

* caps ("comm ≤" …) read "1k", "1.3k", "1,000", "1000 params" as the page writes them; a cap applies on Enter or
  when its box is left, never a part of what is being typed ("1" of "1,000"); an entry the page cannot read leaves
  the last valid caps drawn and says so;
* an invalid cap is never saved: a reload (what the live page does) draws what the page said, and a state saved by
  an older page (an invalid cap stored as null) restores no cap, with the green ring where the chooser says;
* inf, Infinity and ∞ are one cap, written `inf` in the offered command (what `fedevo retrain --pick` reads);
* the page's JavaScript formatter rounds an exact half as Python's does (528.5 → 528 in every table and note);
* typed ranges under the parallel coordinates: one end typed leaves the other box empty and the axis' end exact
  (the extreme point stays selected), the page's number forms read, an invalid entry said and kept, both emptied:
  no range; a dragged range keeps its ends in full precision.

Browser fixture: tests/browser/conftest.py; skip rule and helpers: tests/browser/test_front_browser.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re

import pytest

from tests.browser.test_front_browser import (ARTIFACTS, CHROMIUM, MOVE_MS, drag, no_network_and_no_errors,
                                              open_fresh, settle, wait_ready)
from tests.browser.test_selection_browser import DIMMED_JS, _pick_ids

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium "
                                                          "chromium-driver)")


def type_into(driver, el, text: str, end: str = "\n") -> None:
    """Select the box's text with the keyboard, type `text` over it, then `end` (Enter; "\\t": leave the box; "":
    nothing: the text is still being typed)."""
    from selenium.webdriver.common.keys import Keys

    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
    settle(driver)
    el.click()
    el.send_keys(Keys.CONTROL, "a")
    el.send_keys(Keys.DELETE)
    el.send_keys(text + end)
    settle(driver)


def drawn(driver) -> dict:
    settle(driver)  # (the parallel view is recoloured at the next frame)
    got = driver.execute_script(DIMMED_JS)
    got["invalid"] = driver.execute_script("const e = document.getElementById('caps-invalid'); "
                                           "return e ? e.textContent : ''")
    return got


def dimmed_ids(got: dict) -> dict[str, set[int]]:
    return {name: {int(i) for i, d in views.items() if d} for name, views in got["views"].items()}


def spec_of(note: str) -> str:
    """The pick of the command the note offers (fedevo retrain RUN --pick SPEC --rounds N)."""
    m = re.search(r"--pick '?([^' ]+)'? --rounds", note)
    assert m, note
    return m.group(1)


def test_caps_read_the_numbers_the_page_writes(browser, chance_page):
    """Typed with the keyboard into "comm ≤": "1,000", "1k", "1000 params", "1.3k" and "2.5k" are the caps 1000,
    1000, 1000, 1300 and 2500 -- every evaluation above them drawn grey in the 3D view, each projection and the
    parallel coordinates, the rings what `--pick knee:comm<=X` picks, the note and its command in the command line's
    numbers. Before the audit each was "Not a number" while the views showed the prefix typed so far ("comm ≤ 1":
    everything grey); now nothing applies before Enter, and an entry the page cannot read ("1,3x") leaves the last
    valid caps drawn and says so."""
    from fedevo.searching.rundata import load_run
    from fedevo.viz.numfmt import num

    page, run_dir, _, _ = chance_page
    data = load_run(run_dir)
    rows = {r["id"]: r for r in data.ok_rows}
    open_fresh(browser, page)
    box = browser.find_element("id", "cap-comm")

    type_into(browser, box, "1", end="")  # the start of "1,000": not applied while being typed
    got = drawn(browser)
    assert all(not ids for ids in dimmed_ids(got).values()), dimmed_ids(got)
    assert "comm ≤" not in got["note"], got["note"]
    for text, value in (("1,000", 1000), ("1k", 1000), ("1000 params", 1000), ("1.3k", 1300), ("2.5k", 2500)):
        type_into(browser, box, text)
        got = drawn(browser)
        outside = {i for i, r in rows.items() if r["comm"] > value}
        assert outside and len(outside) < len(rows), "the cap must dim some evaluations for this test to tell"
        for name, ids in dimmed_ids(got).items():
            assert ids == outside, (text, name, ids ^ outside)
        want = _pick_ids(data, f"knee:comm<={value}")
        assert got["rings"]["3d:chosen"] == want[:1] and got["rings"]["2d:chosenx2"] == want[:1], (text, got["rings"])
        assert f"comm ≤ {num(value)}" in got["note"] and spec_of(got["note"]) == f"knee:comm<={value}", got["note"]
        assert got["invalid"] == "" and "invalid" not in box.get_attribute("class")
    before = drawn(browser)
    browser.find_element("id", "knee-caps").screenshot(str(ARTIFACTS / "front-caps-2.5k.png"))
    type_into(browser, box, "1,3x")
    after = drawn(browser)
    assert dimmed_ids(after) == dimmed_ids(before) and after["rings"] == before["rings"]
    assert after["note"] == before["note"]
    assert '"1,3x"' in after["invalid"] and "still comm ≤ 2.5k" in after["invalid"], after["invalid"]
    assert "invalid" in box.get_attribute("class") and box.get_attribute("value") == "1,3x"
    browser.find_element("id", "knee-caps").screenshot(str(ARTIFACTS / "front-caps-invalid.png"))
    browser.execute_script("sessionStorage.clear()")
    no_network_and_no_errors(browser)


def _stored(driver) -> dict:
    return json.loads(driver.execute_script("return sessionStorage.getItem('fedevo:' + FEDEVO.run)"))


def test_invalid_caps_are_never_saved_and_a_reload_draws_what_the_page_said(browser, chance_page):
    """A valid cap, "the lowest error" chosen with the mouse, then an invalid entry: the page saves the valid cap as
    typed ("1k"), and a reload shows it in the box and draws the same rings and dimming, the green ring on
    `--pick 'comm<=1000,lowest-error'`. A state an older page saved after an invalid cap ({"comm": null}) restores
    no cap -- the box empty, not "null" -- and the green ring on the lowest error the chooser names, not on the knee."""
    from selenium.webdriver.support.ui import Select

    from fedevo.searching.rundata import load_run

    page, run_dir, _, _ = chance_page
    data = load_run(run_dir)
    open_fresh(browser, page)
    box = browser.find_element("id", "cap-comm")
    type_into(browser, box, "1k")
    chooser = browser.find_element("id", "choose-by")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", chooser)
    Select(chooser).select_by_value("lowest-error")
    type_into(browser, box, "1,0x")
    assert _stored(browser)["caps"] == {"comm": "1k"} and _stored(browser)["choose"] == "lowest-error"
    before = drawn(browser)
    want = _pick_ids(data, "comm<=1000,lowest-error")
    assert before["rings"]["3d:chosen"] == want[:1]
    browser.refresh()
    wait_ready(browser)
    box = browser.find_element("id", "cap-comm")
    after = drawn(browser)
    assert box.get_attribute("value") == "1k" and after["invalid"] == ""
    assert dimmed_ids(after) == dimmed_ids(before) and after["rings"] == before["rings"]
    assert after["rings"]["3d:chosen"] == want[:1] and "the lowest error" in after["note"]

    knee = _pick_ids(data, "knee")
    lowest = _pick_ids(data, "lowest-error")
    assert knee[:1] != lowest[:1], "the knee must differ from the lowest error for this test to tell"
    browser.execute_script("sessionStorage.setItem('fedevo:' + FEDEVO.run, JSON.stringify({selected: [], "
                           "colour: 'generation', caps: {comm: null}, choose: 'lowest-error'}))")
    browser.refresh()
    wait_ready(browser)
    got = drawn(browser)
    assert browser.find_element("id", "cap-comm").get_attribute("value") == ""
    assert browser.find_element("id", "choose-by").get_attribute("value") == "lowest-error"
    for view in ("3d:", "2d:x", "2d:x2", "2d:x3"):
        v, x = view.split(":")
        assert got["rings"][f"{v}:chosen{x}"] == lowest[:1], (view, got["rings"])
        assert got["rings"][f"{v}:knee{x}"] == knee[:1], (view, got["rings"])
    assert all(not ids for ids in dimmed_ids(got).values())
    assert f"Chosen: id {lowest[0]} " in got["note"] and "the lowest error" in got["note"], got["note"]
    assert _stored(browser)["caps"] == {}
    browser.execute_script("sessionStorage.clear()")
    no_network_and_no_errors(browser)


def test_infinite_caps_are_written_as_the_command_line_reads_them(browser, chance_page):
    """inf, Infinity, ∞ and +inf typed into "ε ≤" are one cap, "ε ≤ ∞", written `eps<=inf` in the offered command:
    `fedevo retrain --pick` reads it (before the audit the page wrote `eps<=Infinity`, which the command line
    refuses, and refused `inf`) and picks the green ring; with a comm cap beside it too. −∞ is no cap: said, and
    the last caps stay drawn."""
    from fedevo.searching.rundata import load_run

    page, run_dir, _, _ = chance_page
    data = load_run(run_dir)
    ek = data.eps_key
    open_fresh(browser, page)
    box = browser.find_element("id", f"cap-{ek}")
    for text in ("inf", "Infinity", "∞", "+inf"):
        type_into(browser, box, text)
        got = drawn(browser)
        spec = spec_of(got["note"])
        assert spec == f"knee:{ek}<=inf", (text, got["note"])
        assert [p.id for p in data.pick(spec)] == got["rings"]["3d:chosen"], (text, got["rings"])  # read as written
        assert "ε ≤ ∞" in got["note"] and got["invalid"] == "", (text, got)
    type_into(browser, browser.find_element("id", "cap-comm"), "2k")
    got = drawn(browser)
    spec = spec_of(got["note"])
    assert spec == f"knee:comm<=2000:{ek}<=inf", got["note"]
    assert [p.id for p in data.pick(spec)] == got["rings"]["3d:chosen"]
    before = got
    type_into(browser, box, "-inf")
    got = drawn(browser)
    assert "still ε ≤ ∞" in got["invalid"] and got["rings"] == before["rings"], got["invalid"]
    assert spec_of(got["note"]) == spec
    browser.execute_script("sessionStorage.clear()")
    no_network_and_no_errors(browser)


def test_the_page_rounds_an_exact_half_as_python_does(browser, chance_page, tmp_path):
    """Every comm of the chance run made an exact half (an even integer + 0.5, e.g. 528.5): the Pareto table (written
    by Python's formatter) and what the page's JavaScript twin writes -- the selection table of rows clicked with
    the mouse and the note naming the chosen solution -- show the same number (528, not 529 as JavaScript's own
    toPrecision rounds it)."""
    from selenium.webdriver.common.action_chains import ActionChains

    from fedevo.searching.rundata import load_run
    from fedevo.viz.front import front_html
    from fedevo.viz.html import write
    from fedevo.viz.numfmt import num

    _, run_dir, _, _ = chance_page
    base = load_run(run_dir)
    half = {r["id"]: 2 * int(r["comm"] // 2) + 0.5 for r in base.rows if math.isfinite(r["comm"])}
    rows = [{**r, "comm": half.get(r["id"], r["comm"])} for r in base.rows]
    by_id = {r["id"]: r for r in rows}
    data = dataclasses.replace(base, rows=rows, front=[by_id[r["id"]] for r in base.front])
    assert any(100 <= by_id[r["id"]]["comm"] < 1000 for r in data.front), "a front comm must round at the units"
    plotly_js = next(run_dir.glob("plotly-*.min.js"))
    page = write(tmp_path / "front.html", front_html(data, plotly_src=os.path.relpath(plotly_js, tmp_path)))
    open_fresh(browser, page)
    col = browser.execute_script("return Array.from(document.querySelectorAll('#front-table thead th'))"
                                 ".findIndex(th => th.textContent === 'comm')")
    table = {int(tr.find_element("css selector", "td").get_attribute("data-v")): tr
             for tr in browser.find_elements("css selector", "#front-table tbody tr")}
    python_cells = {i: tr.find_elements("css selector", "td")[col].text for i, tr in table.items()}
    assert all(python_cells[i] == num(by_id[i]["comm"]) for i in table)
    picked = [i for i in table if 100 <= by_id[i]["comm"] < 1000][:4]
    for i in picked:  # real mouse clicks on the rows select them
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", table[i])
        cell = table[i].find_elements("css selector", "td")[0]
        ActionChains(browser, duration=MOVE_MS).move_to_element(cell).click().perform()
        settle(browser)
    assert browser.execute_script("return fedevoSelection()") == sorted(picked)
    js_col = browser.execute_script("return Array.from(document.querySelectorAll('#selected-table thead th'))"
                                    ".findIndex(th => th.textContent === 'comm')")
    js_cells = {int(tr.find_elements("css selector", "td")[0].text): tr.find_elements("css selector", "td")[js_col].text
                for tr in browser.find_elements("css selector", "#selected-table tbody tr")}
    assert js_cells == {i: python_cells[i] for i in picked}, (js_cells, python_cells)
    note = browser.find_element("id", "knee-note").text
    chosen = int(re.match(r"Chosen: id (\d+) ", note).group(1))
    assert f"comm {num(by_id[chosen]['comm'])} params/round/client slot," in note, (note, by_id[chosen]["comm"])
    browser.execute_script("sessionStorage.clear()")
    no_network_and_no_errors(browser)


AXIS_JS = """
// the parallel axis whose label starts with arguments[0]: its index, screen x of its line, top, height, range
const gp = document.getElementById('parallel');
const a = Array.from(gp.querySelectorAll('.y-axis')).find(x => x.__data__ && x.__data__.label.startsWith(arguments[0]));
const d = a.__data__, m = a.getScreenCTM(), line = (a.querySelector('path.domain') || a).getBoundingClientRect();
return {index: d.xIndex, x: line.left + line.width / 2, top: m.f, height: d.height};
"""


def test_typed_ranges_keep_the_other_end_and_say_what_they_cannot_read(browser, chance_page):
    """Under the parallel coordinates, with the keyboard: "1000" typed as comm's "from" brushes 1000 up to the
    axis' end exactly -- the "to" box stays empty (before: filled with the end rounded to 4 digits, which a later
    entry then brushed, dropping the extreme point) and the largest comm stays selected; "1.5k" is read (before:
    silently erased); "abc" is said and kept, the range left as it was; both emptied: no range, nothing selected.
    A range dragged with the mouse fills both boxes and keeps its ends in full precision: typing the other end
    leaves the dragged one where it was."""
    from fedevo.searching.rundata import load_run

    page, run_dir, _, _ = chance_page
    data = load_run(run_dir)
    comm = {r["id"]: r["comm"] for r in data.ok_rows}
    open_fresh(browser, page)
    browser.execute_script("arguments[0].scrollIntoView()", browser.find_element("id", "parallel"))
    settle(browser)
    k = browser.execute_script(AXIS_JS, "comm")["index"]
    log, top = browser.execute_script(  # the axis' end: what an empty "to" stands for
        "const p = FEDEVO.parallel[arguments[0]], d = document.getElementById('parallel').data[0].dimensions[arguments[0]];"
        "return [p.log, Math.max(d.range ? d.range[1] : -Infinity, ...Array.from(d.values))];", k)
    drawn_value = math.log10 if log else float  # the axis draws log10 comm when comm is on a log axis
    lo, hi = browser.find_element("id", f"range-{k}-lo"), browser.find_element("id", f"range-{k}-hi")
    crange = ("const c = document.getElementById('parallel')._fullData[0].dimensions[arguments[0]].constraintrange;"
              "return c && c.length ? (Array.isArray(c[0]) ? c : [c]) : null;")
    note = "const e = document.getElementById('parallel-ranges-note'); return e ? e.textContent : ''"
    selection = "return fedevoSelection()"

    for text, value in (("1000", 1000), ("1.5k", 1500), ("1,200", 1200)):
        type_into(browser, lo, text, end="\t")
        (got_lo, got_hi), = browser.execute_script(crange, k)
        assert got_lo == pytest.approx(drawn_value(value), rel=1e-12) and got_hi == top, (text, got_lo, got_hi, top)
        assert hi.get_attribute("value") == "" and lo.get_attribute("value") == text
        assert browser.execute_script(selection) == sorted(i for i, c in comm.items() if c >= value), text
        assert max(comm, key=comm.get) in browser.execute_script(selection)  # the extreme point stays
        assert browser.execute_script(note) == ""
    type_into(browser, lo, "abc", end="\t")
    (got_lo, got_hi), = browser.execute_script(crange, k)
    assert got_lo == pytest.approx(drawn_value(1200), rel=1e-12) and got_hi == top
    assert lo.get_attribute("value") == "abc" and "invalid" in lo.get_attribute("class")
    assert '"abc"' in browser.execute_script(note) and "left as it was" in browser.execute_script(note)
    type_into(browser, lo, "", end="\t")
    assert browser.execute_script(crange, k) is None and browser.execute_script(selection) == []
    assert lo.get_attribute("value") == "" == hi.get_attribute("value") and browser.execute_script(note) == ""

    # a dragged range: both boxes filled in (4 digits), its ends kept in full
    ax = browser.execute_script(AXIS_JS, "error")
    e = browser.execute_script(AXIS_JS, "error")["index"]
    elo, ehi = browser.find_element("id", f"range-{e}-lo"), browser.find_element("id", f"range-{e}-hi")
    drag(browser, [(ax["x"], ax["top"] + ax["height"] * f) for f in (0.2, 0.35, 0.5, 0.65, 0.8)])
    settle(browser)
    (dlo, dhi), = browser.execute_script(crange, e)
    assert float(elo.get_attribute("value")) == float(f"{dlo:.4g}")
    assert float(ehi.get_attribute("value")) == float(f"{dhi:.4g}") != dhi  # shown in 4 digits, ...
    type_into(browser, elo, "0.1", end="\t")
    assert browser.execute_script(crange, e) == [[0.1, dhi]]  # ... kept exactly: not moved to its 4 digits
    browser.find_element("id", "parallel-ranges").screenshot(str(ARTIFACTS / "front-typed-ranges.png"))
    browser.execute_script("sessionStorage.clear()")
    no_network_and_no_errors(browser)


def _tab_to(driver, js_test: str, limit: int = 300) -> None:
    """Press Tab (the real keyboard) until the focused element passes `js_test` (a function of it, in JavaScript)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    for _ in range(limit):
        if driver.execute_script(f"return ({js_test})(document.activeElement)"):
            return
        ActionChains(driver).send_keys(Keys.TAB).perform()
    raise AssertionError(f"{limit} presses of Tab never reached {js_test}")


def test_the_pareto_table_by_keyboard_alone(browser, chance_page):
    """With the keyboard only: Tab reaches the Pareto table's headers (Enter sorts) and its rows (Space or Enter adds
    the row's solution to the selection, drawn in every view, and drops it again); they answered only a click."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    from tests.browser.test_front_browser import check_linked

    path, run_dir, _, front_ids = chance_page
    open_fresh(browser, path)
    browser.execute_script("document.getElementById('colour-by').focus()")
    gen_th = "e => e.tagName === 'TH' && e.closest('#front-table') && e.textContent.startsWith('gen')"
    _tab_to(browser, gen_th)
    order = ("return Array.from(document.querySelectorAll('#front-table tbody tr'))"
             ".map(r => Number(r.cells[1].textContent))")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    settle(browser)
    gens = browser.execute_script(order)
    assert gens == sorted(gens) and gens != browser.execute_script(order.replace("cells[1]", "cells[0]")), gens
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    settle(browser)
    assert browser.execute_script(order) == sorted(gens, reverse=True)
    _tab_to(browser, "e => e.tagName === 'TR' && e.closest('#front-table tbody')")
    first = browser.execute_script("return Number(document.activeElement.cells[0].dataset.v)")
    assert first in front_ids
    top = "return document.activeElement.getBoundingClientRect().top"
    y0 = browser.execute_script(top)
    ActionChains(browser).send_keys(Keys.SPACE).perform()
    settle(browser)
    check_linked(browser, [first], run_dir)
    assert abs(browser.execute_script(top) - y0) < 100  # Space selected; it did not scroll the page (a screen)
    ActionChains(browser).send_keys(Keys.TAB).perform()
    second = browser.execute_script("return Number(document.activeElement.cells[0].dataset.v)")
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    settle(browser)
    check_linked(browser, [first, second], run_dir)
    ActionChains(browser).key_down(Keys.SHIFT).send_keys(Keys.TAB).key_up(Keys.SHIFT).perform()  # back to `first`
    assert browser.execute_script("return Number(document.activeElement.cells[0].dataset.v)") == first
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    settle(browser)
    check_linked(browser, [second], run_dir)
    no_network_and_no_errors(browser)
