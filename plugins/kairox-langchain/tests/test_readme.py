"""The README's worked example runs offline as written."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_worked_example_runs(kairox_home: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(blocks[0], str(README), "exec"), {"__name__": "readme"})
    lines = out.getvalue().splitlines()
    assert lines[0] == "Noted."
    assert lines[1] == "You prefer vim."
    assert "memories" in lines[2] and "history" in lines[2]
    assert lines[3] == "{'text': 'The launch is planned for March'}"
    assert lines[4] == "['human', 'ai', 'human', 'ai']"
    assert lines[5] == "[]"
    assert (kairox_home.parent / "demo.db").exists()  # it ran in the test's directory
