"""front.html's shared arrays (fedevo/viz/shared_arrays.py) as the page's own script (RESOLVE_JS, run in node)
resolves them: the same data as before sharing, whatever was shared."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from fedevo.viz.shared_arrays import RESOLVE_JS, columns, share


def _resolved_in_node(fed, figs):
    pool, (f, g) = share([fed, figs])
    script = (f"const window = {{}};\nwindow.FEDEVO = {json.dumps(f)};\nwindow.FEDEVO_FIGS = {json.dumps(g)};\n"
              f"window.FEDEVO_ARRAYS = {json.dumps(pool)};\n{RESOLVE_JS}\n"
              "console.log(JSON.stringify([window.FEDEVO, window.FEDEVO_FIGS]));\n")
    return pool, json.loads(subprocess.run(["node"], input=script, capture_output=True, text=True,
                                           check=True).stdout)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_rows_whose_keys_are_shared_with_another_list_resolve():
    """The rows' keys are a list like any other: where the same list stood elsewhere in the page's data, it was
    shared and the script, which did not resolve the keys, stopped with `keys.forEach is not a function`."""
    keys = list("abcdefghij")
    rows = [{k: i * 10 + j for j, k in enumerate(keys)} for i in range(3)]
    fed = {"rows": columns(rows), "names": list(keys), "x": [0.5] * 9}
    figs = {"data": [{"y": [0.5] * 9, "customdata": list(range(9))}]}
    pool, got = _resolved_in_node(fed, figs)
    assert keys in pool  # the case: the keys shared
    assert got == [{"rows": rows, "names": keys, "x": [0.5] * 9}, figs]
