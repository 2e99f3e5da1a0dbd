"""docs/attacks.md names real tests, and every attack test is in it: the table cannot drift."""

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
TABLE = TESTS.parent / "docs" / "attacks.md"


def _tests(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")
    }


def test_attacks_table_and_attack_tests_name_each_other():
    named = re.findall(
        r"^\|[^|]+\|[^|]+\| `(test_\w+\.py)::(test_\w+)` \|$", TABLE.read_text(), re.MULTILINE
    )
    rows = [ln for ln in TABLE.read_text().splitlines() if ln.startswith("| ")][
        1:
    ]  # past the header
    assert len(named) == len(set(named)) == len(rows) > 0
    missing = [f"{f}::{t}" for f, t in named if t not in _tests(TESTS / f)]
    assert missing == [], "named in docs/attacks.md but not a test"
    suite = [*sorted(TESTS.glob("test_attack_*.py")), TESTS / "test_operations.py"]
    unlisted = [
        f"{p.name}::{t}" for p in suite for t in sorted(_tests(p)) if (p.name, t) not in named
    ]
    assert unlisted == [], "attack tests missing from docs/attacks.md"
