"""The seams between modules: within the warehouse and the Prometheus source no import runs in a
circle, and no product module imports another module's private name: what modules share has a
public name, in a helper module where it is shared by several (``warehouse/_utils.py``,
``warehouse/_sql.py``)."""

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PRODUCT = ("analysis", "dashboards", "ingest", "pipelines", "sample_data", "sources", "warehouse")
CYCLE_FREE = ("warehouse", "sources/prometheus")


def modules(folder: str, root: Path = REPO) -> dict[str, Path]:
    return {
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__"): p
        for p in sorted((root / folder).rglob("*.py"))
    }


def imports(path: Path, package: str | None = None) -> list[tuple[str, str]]:
    """(module, name) of every ``from module import name`` in the file, inside functions too;
    relative ones too when the file's ``package`` is given (resolved against it)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            if package is None:
                continue
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, *([node.module] if node.module else [])])
        elif node.module:
            module = node.module
        else:
            continue
        out.extend((module, alias.name) for alias in node.names)
    return out


def _parent(module: str) -> str:
    return module.rpartition(".")[0]


def private_imports(folder: str, root: Path = REPO) -> list[str]:
    tops = {"warehouse", "sources", "ingest", "analysis", "dashboards", "pipelines", "sample_data"}
    return [
        f"{module}: from {source} import {name}"
        for module, path in modules(folder, root).items()
        for source, name in imports(path, module if path.name == "__init__.py" else _parent(module))
        if source.split(".")[0] in tops and name.startswith("_") and source != module
    ]


def cycle(folder: str, root: Path = REPO) -> list[str]:
    """One import cycle among the modules of ``folder`` (empty when there is none)."""
    mods = modules(folder, root)
    graph = {m: {s for s, _ in imports(p) if s in mods and s != m} for m, p in mods.items()}
    done: set[str] = set()

    def visit(m: str, path: list[str]) -> list[str]:
        if m in path:
            return [*path[path.index(m) :], m]
        if m in done:
            return []
        for nxt in sorted(graph[m]):
            if found := visit(nxt, [*path, m]):
                return found
        done.add(m)
        return []

    for m in mods:
        if found := visit(m, []):
            return found
    return []


@pytest.mark.parametrize("folder", PRODUCT)
def test_no_module_imports_another_modules_private_name(folder):
    assert private_imports(folder) == []


@pytest.mark.parametrize("folder", CYCLE_FREE)
def test_the_import_graph_has_no_cycle(folder):
    assert cycle(folder) == []


def test_the_checks_see_a_private_import_and_a_cycle(tmp_path):
    pkg = tmp_path / "warehouse"
    pkg.mkdir()
    (pkg / "a.py").write_text("from warehouse.b import _helper\n")
    (pkg / "b.py").write_text("def f():\n    from warehouse.a import x\n")
    (pkg / "sub").mkdir()
    (pkg / "sub" / "c.py").write_text("from ..b import _other\nfrom .c import _own\n")
    assert private_imports("warehouse", tmp_path) == [
        "warehouse.a: from warehouse.b import _helper",
        "warehouse.sub.c: from warehouse.b import _other",
    ]
    assert cycle("warehouse", tmp_path) == ["warehouse.a", "warehouse.b", "warehouse.a"]


MAX_LINES = 500  # a module longer than this holds more than one concern: split it
DECLARATIONS = {"warehouse/schemas.py"}  # every table's columns, declared in one place


def test_no_product_module_is_over_max_lines():
    long = {
        str(p.relative_to(REPO)): n
        for folder in PRODUCT
        for p in (REPO / folder).rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_LINES
    }
    assert {p: n for p, n in long.items() if p not in DECLARATIONS} == {}
