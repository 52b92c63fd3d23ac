"""Batch sweeps: one notebook, many parameter sets, run with papermill over servers, GPUs or local workers.

``sweep(notebook, grid)`` (and ``cosmos-helpers sweep NOTEBOOK --grid params.yaml``) runs the notebook once
per set into ``<out>/<run name>/``, resumably, and writes a summary table, a contact sheet of the outputs by
parameter, a plot of time per run and an HTML page. Modules: :mod:`.grid` (the sets and their checks),
:mod:`.runs` (run folders, manifests, resume rules), :mod:`.dispatch` (``sweep`` and its workers),
:mod:`.worker` (their processes), :mod:`.report` (the files).
"""

from __future__ import annotations

from .dispatch import sweep
from .grid import load_grid
from .report import SweepResult

__all__ = ["sweep", "SweepResult", "load_grid"]
