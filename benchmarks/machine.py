"""The machine a benchmark ran on, for its header: lscpu's model name, family and model (the CPU changes between
sessions; every published number names it)."""

from __future__ import annotations

import os
import subprocess


def cpu() -> str:
    """e.g. 'AMD EPYC (family 26, model 2), 2 logical CPUs'; '?' for what lscpu does not say."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    field = {ln.split(":", 1)[0].strip(): ln.split(":", 1)[1].strip() for ln in out.splitlines() if ":" in ln}
    return (f"{field.get('Model name', '?')} (family {field.get('CPU family', '?')}, model {field.get('Model', '?')}), "
            f"{os.cpu_count()} logical CPUs")
