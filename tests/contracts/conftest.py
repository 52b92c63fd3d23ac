"""The contract fixtures: facts read from the real upstream packages by ``scripts/refresh_contracts.py``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def load(prefix: str) -> dict:
    """The fixture file ``<prefix>-<upstream version>.json`` (exactly one per upstream package)."""
    (path,) = sorted(FIXTURES.glob(f"{prefix}-*.json"))
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def vllm_contract() -> dict:
    return load("vllm_omni")


@pytest.fixture(scope="session")
def framework_contract() -> dict:
    return load("cosmos_framework")


@pytest.fixture(scope="session")
def diffusers_contract() -> dict:
    return load("diffusers")
