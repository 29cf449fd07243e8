"""The search's plain progress lines (output not a terminal): their clock."""

import io
import re
import types

from rich.console import Console

from fedevo.viz import progress


def test_the_plain_lines_clock_never_goes_back(monkeypatch):
    """Its clock started when the display was made, before the set-up (native kernels built: seconds), while the
    last line showed the summary's wall_s, timed from the search's start: 12 s, then 10 s; on Ray the summary's
    also counts Ray's start: 4 s, then 10 s two seconds later (the 2026-11-27 audits). Now every line counts
    from the evaluation's start (on_start), the last too."""
    now = [100.0]
    monkeypatch.setattr(progress.time, "monotonic", lambda: now[0])
    buf = io.StringIO()
    rep = progress.RichReporter(console=Console(file=buf, force_terminal=False, width=200))
    now[0] += 5.0  # the set-up before the search starts
    rep.on_start(n_gen=3, generation=1, total=6, done=0)
    for g, t in ((2, 4.0), (3, 4.0)):
        now[0] += t
        rep.on_generation_start(g)
    now[0] += 4.0
    rep.on_finish(types.SimpleNamespace(wall_s=19.0))  # run()'s clock: Ray's start too
    seconds = [int(s) for s in re.findall(r"· (\d+) s$", buf.getvalue(), re.M)]
    assert seconds == [4, 8, 12], buf.getvalue()
