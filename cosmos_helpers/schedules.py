"""Noise schedules made visible: what ``flow_shift`` and the choice of scheduler do to the timesteps.

A larger shift keeps the sampler at high noise for longer (composition and motion are decided there),
which is why Cosmos3 video uses 10 and images often less. Seeing the curves makes that concrete.
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np


def timesteps_for(scheduler: Any, steps: int, shift: float) -> np.ndarray:
    """The timesteps a flow-matching scheduler class (or instance) visits for ``steps`` at ``shift``."""
    from .backends.diffusers import configure_scheduler
    from .models.tiny import SCHEDULER_CONFIG

    configured = configure_scheduler(SCHEDULER_CONFIG, scheduler, shift)
    configured.set_timesteps(steps)
    return configured.timesteps.detach().cpu().numpy().astype(np.float64)


def plot_schedules(curves: Iterable[tuple[str, Any, float]], steps: int = 35):
    """Plot one timestep curve per ``(label, scheduler, shift)``; returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2), dpi=100)
    for label, scheduler, shift in curves:
        values = timesteps_for(scheduler, steps, shift)
        ax.plot(np.arange(len(values)), values, marker="o", markersize=3, label=label)
    ax.set_xlabel("denoising step")
    ax.set_ylabel("timestep (1000 = pure noise)")
    ax.set_title(f"Where {steps} steps are spent")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    plt.close(fig)  # shown once, as the cell's result, not again by the inline backend
    return fig
