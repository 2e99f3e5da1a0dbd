"""Shared fixtures: paths to committed fixtures and a throwaway warehouse."""

from pathlib import Path

import pytest

from warehouse.store import Warehouse

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent
SAMPLE_FLEET = REPO / "sample_data" / "fleet"


@pytest.fixture
def wh(tmp_path) -> Warehouse:
    return Warehouse(tmp_path / "home")
