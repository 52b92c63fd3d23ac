"""Shared test set-up: one thread for torch (2-core CI machines oversubscribe otherwise), quiet progress bars,
and a model cache that persists between runs so the tiny model is built once; :func:`load_script` for the
repository's scripts, which are files, not package modules."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

# jsonschema registers an "iri" format check when rfc3987_syntax is installed (Jupyter brings it), and that module
# builds 38 grammars as it is imported: two seconds of every worker's start. No check here uses a format checker (as
# in the framework stand-in's __main__).
sys.modules.setdefault("rfc3987_syntax", None)
os.environ.setdefault("COSMOS_HELPERS_NO_PROGRESS", "1")
# assigned, not defaulted: worker subprocesses inherit it and must run with the one thread this process uses
# (some CPU reductions sum in another order with more threads, and the tests compare frames exactly)
os.environ["OMP_NUM_THREADS"] = "1"


REPO = Path(__file__).resolve().parents[1]


def load_script(relative: str) -> ModuleType:
    """Import a script of this repository (``scripts/train_tiny.py``, ``benchmarks/load_test.py``) by its path.

    It is registered in ``sys.modules`` while it loads because dataclasses look their module up as they are built.
    """
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(f"{path.stem}_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def pytest_xdist_auto_num_workers(config) -> int:
    """``-n auto``: one worker more than the cores. Many tests wait on another process (a notebook's kernel, a
    server, JupyterLab and Chromium, Ray, a framework run) while their worker's core idles; a third worker on two
    cores fills those waits (the whole suite on a 2-core machine: 690 s with two workers, 551 s with three). Each
    process keeps one torch thread (below), so the extra worker adds one thread, not a core's worth."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores + 1


def pytest_configure(config):
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups off the items
def pytest_collection_modifyitems(config, items):
    """Under pytest-xdist's ``--dist loadgroup`` (``make test``), what would otherwise be built twice or waited for
    goes to one worker. The tests that read the executed cookbooks join the browser tests (group ``cookbooks``, the
    largest, so it starts first): one worker executes each cookbook as it is first asked for, and never waits for
    the other. A module whose tests use a module-scoped fixture (a server, a model, a report; some also count what
    its earlier tests did) goes to one worker whole, in its order, so the fixture is built once; the tests on the
    local Ray instance (``ray_instance``) share one worker too. Every other test is handed out on its own. An
    ``xdist_group`` mark of the test's own wins."""
    shared = {item.module.__name__ for item in items if _uses_a_module_fixture(item)}
    for item in items:
        if item.get_closest_marker("xdist_group"):
            continue
        if "cookbook_runs" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("cookbooks"))
        elif "ray_instance" in getattr(item, "fixturenames", ()):  # one local Ray instance (tests/ray/conftest.py)
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif getattr(item, "module", None) is not None and item.module.__name__ in shared:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::")[0]))


def pytest_collection_finish(session):
    """Groups that pytest-xdist silently dropped (pytest-xdist#1386, on pytest 9.2) would run the browser and the
    shared fixtures on every worker at once: stop before any test runs instead."""
    if not (os.environ.get("PYTEST_XDIST_WORKER") and session.config.getvalue("loadgroup")):
        return
    lost = [item.nodeid for item in session.items if item.get_closest_marker("xdist_group") and "@" not in item.nodeid]
    if lost:
        raise pytest.UsageError(f"pytest-xdist did not group {lost[0]} (and {len(lost) - 1} more): "
                                "install the pytest this project pins (pip install -e '.[test]')")


def _uses_a_module_fixture(item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    return getattr(item, "module", None) is not None and info is not None and any(
        defs[-1].scope == "module" for defs in info.name2fixturedefs.values() if defs)


@pytest.fixture(scope="session")
def tiny_backend():
    from cosmos_helpers import DiffusersBackend

    return DiffusersBackend(progress=False)


@pytest.fixture(scope="session")
def cookbook_runs(tmp_path_factory):
    """Each cookbook executed once per test run, shared by every check that reads it (``tests/cookbooks/runs.py``)."""
    from tests.cookbooks.runs import CookbookRuns, shared_folder

    return CookbookRuns(shared_folder(tmp_path_factory.getbasetemp()))


@pytest.fixture(scope="session")
def local_vllm_omni_server():
    """``LocalServer()``: the stand-in serving the tiny model in its own process, for tests that only send it requests.
    Its tests carry ``xdist_group("vllm-omni-server")``, so one worker starts it once per test run."""
    from cosmos_helpers.standins.vllm_omni.local import LocalServer

    with LocalServer(threads=1, progress=False, ready_timeout=120) as server:
        yield server



@pytest.fixture(scope="session")
def assets() -> Path:
    return Path(__file__).resolve().parents[1] / "cookbooks" / "cosmos3" / "generator" / "audiovisual" / "assets"


@pytest.fixture
def rgb_image() -> np.ndarray:
    return (np.random.default_rng(0).random((100, 180, 3)) * 255).astype(np.uint8)


@pytest.fixture
def rgb_video() -> np.ndarray:
    return (np.random.default_rng(1).random((9, 100, 180, 3)) * 255).astype(np.uint8)
