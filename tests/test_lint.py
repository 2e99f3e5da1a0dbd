"""The tree stays as ruff lays it out and within its rules, line length 100 included
(pyproject.toml): a long line or a format drift fails here, not in a later review."""

import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

RUFF = Path(sys.executable).with_name("ruff")


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(RUFF), *args], check=False, cwd=REPO, capture_output=True, text=True, timeout=120
    )


def test_ruff_check_passes_line_length_included():
    out = ruff("check", "--output-format", "concise", ".")
    assert out.returncode == 0, out.stdout[-3000:]


def test_ruff_format_leaves_the_tree_unchanged():
    out = ruff("format", "--check", ".")
    assert out.returncode == 0, out.stdout[-3000:]
