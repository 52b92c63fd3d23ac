"""Action-conditioned generation's toolkit: trajectories to send (JSON, ``.npy`` or LeRobot parquet), a drive to
condition on, plots to read the result. Names load on first use."""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "..samples": "sample_trajectory render_drive",
    "..trajectories": "load_trajectory save_trajectory",
    "..views.plots": "trajectory_plot trajectory_error_plot",
})
