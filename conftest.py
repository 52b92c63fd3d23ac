"""Cookbooks executed by nbmake run with progress reporting on, as ``make cookbooks`` runs them.

``tests/conftest.py`` silences progress bars for the Python tests; a notebook kernel started while that is
set would hide the batch-run progress path (a bug there once broke ``make cookbooks`` with every test
green), so the variable is lifted for the duration of each notebook item.
"""

from __future__ import annotations

import os

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if type(item).__name__ != "NotebookItem":
        yield
        return
    saved = os.environ.pop("COSMOS_HELPERS_NO_PROGRESS", None)
    try:
        yield
    finally:
        if saved is not None:
            os.environ["COSMOS_HELPERS_NO_PROGRESS"] = saved
