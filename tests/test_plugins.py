"""One plug-in discovery for formats, lifetime models, source kinds and report sections
(warehouse/plugins.py): a module scan plus a declared attribute."""

import sys

import pytest

from warehouse.plugins import discover


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A throwaway package ``plugs`` on the path; returns a function that adds a module."""
    root = tmp_path / "plugs"
    root.mkdir()
    (root / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield lambda name, text: (root / f"{name}.py").write_text(text)
    for name in [m for m in sys.modules if m == "plugs" or m.startswith("plugs.")]:
        del sys.modules[name]


def test_modules_declaring_the_attribute_are_found_by_their_name_in_module_order(package):
    package("b_two", "KIND = 'two'\n")
    package("a_one", "KIND = 'one'\n")
    package("helper", "X = 1\n")  # declares nothing: not a plug-in
    package("_private", "KIND = 'hidden'\n")  # a helper of the package
    package("wrong", "KIND = 3\n")  # a value the contract does not accept
    found = discover("plugs", "KIND", lambda kind: isinstance(kind, str))
    assert list(found) == ["one", "two"]
    assert found["two"].__name__ == "plugs.b_two"


def test_the_name_can_come_from_the_declared_object(package):
    package("m", "class MODEL:\n    name = 'weibull'\n")
    assert list(discover("plugs", "MODEL", name=lambda model: model.name)) == ["weibull"]


def test_a_module_missing_a_required_attribute_or_sharing_a_name_is_an_error(package):
    package("a", "KEY = 'k'\nTITLE = 't'\n")
    package("b", "KEY = 'k'\nTITLE = 'u'\n")
    with pytest.raises(ValueError, match="plugs.a and plugs.b share the name 'k'"):
        discover("plugs", "KEY", required=("KEY", "TITLE"))
    package("aa", "KEY = 'c'\n")  # scanned before b
    with pytest.raises(TypeError, match="plugs.aa does not define TITLE"):
        discover("plugs", "KEY", required=("KEY", "TITLE"))


def test_every_extension_point_uses_it():
    from analysis.lifetime_models import models
    from dashboards.sections import registry
    from ingest.registry import formats
    from sources import kinds

    assert formats()["sacct"].name == "sacct" and "weibull" in models()
    assert "slurm" in kinds() and registry()[0].KEY == "summary"
