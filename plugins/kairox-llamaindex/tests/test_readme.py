"""The README's worked example runs offline as written and prints what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_worked_example_runs_as_written(tmp_path: Path) -> None:
    text = README.read_text()
    example = re.search(r"```python\n(.*?)```", text, re.DOTALL)
    expected = re.search(r"It prints:\n\n```text\n(.*?)```", text, re.DOTALL)
    assert example is not None and expected is not None
    env = {
        **os.environ,
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    for var in ("KAIROX_CONFIG", "KAIROX_DB"):
        env.pop(var, None)
    done = subprocess.run(
        [sys.executable, "-c", example.group(1)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == expected.group(1)
    assert done.stderr == ""  # nothing failed quietly (a background engine, a warning)
