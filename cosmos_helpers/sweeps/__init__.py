"""Batch sweeps: one notebook, many parameter sets, run with papermill over servers, GPUs or local workers.

``sweep(notebook, grid)`` (``cosmos-helpers sweep NOTEBOOK --grid params.yaml``) runs it once per set into
``<out>/<run name>/``, resumably, and writes a summary table, a contact sheet, a time plot and an HTML page.
"""

from .dispatch import sweep
from .grid import load_grid
from .report import SweepResult

__all__ = ["sweep", "SweepResult", "load_grid"]
