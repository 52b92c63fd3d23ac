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


def pytest_configure(config):
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_backend():
    from cosmos_helpers import DiffusersBackend

    return DiffusersBackend(progress=False)


@pytest.fixture(scope="session")
def assets() -> Path:
    return Path(__file__).resolve().parents[1] / "cookbooks" / "cosmos3" / "generator" / "audiovisual" / "assets"


@pytest.fixture
def rgb_image() -> np.ndarray:
    return (np.random.default_rng(0).random((100, 180, 3)) * 255).astype(np.uint8)


@pytest.fixture
def rgb_video() -> np.ndarray:
    return (np.random.default_rng(1).random((9, 100, 180, 3)) * 255).astype(np.uint8)
