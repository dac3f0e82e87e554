"""The README's worked example runs offline as written and prints what it says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks(lang: str) -> list[str]:
    section = README.read_text().split("## Worked example", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, flags=re.S)


def test_the_worked_example_runs_and_prints_what_the_readme_says(tmp_path: Path) -> None:
    (code,) = blocks("python")
    (expected,) = blocks("text")
    script = tmp_path / "example.py"
    script.write_text(code)
    # the default configuration, as a new user has it: no kairox.toml, a fresh home
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAIROX_")}
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={**env, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected
    assert (tmp_path / "demo.db").exists()
