"""Pictures of action trajectories: the path from above and in 3-D, the per-axis steps, and predicted-vs-given
errors per step. Each shows a matplotlib ``Figure`` made without pyplot (no global state) as a PNG in a notebook
(``display=False`` returns it)."""

from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np

from ..display import present_figure
from ..protocol import action as proto
from ..trajectories import integrate, step_errors
from .plots import new_figure

AXES = ("x", "y", "z")


def trajectory_plot(*trajectories: np.ndarray, labels: Sequence[str] | None = None, title: str | None = None,
                    figsize: tuple[float, float] = (12, 3.4), dpi: int = 90, display: bool = True):
    """Top-down path, 3-D path, per-axis translation steps and (when the rows carry one) the grasp state of one or
    more ``(T, D)`` trajectories of the same embodiment, overlaid."""
    arrays = [np.asarray(t, dtype=np.float64) for t in trajectories if t is not None]
    if not arrays:
        raise ValueError("trajectory_plot needs at least one (T, D) trajectory")
    labels = list(labels or [f"trajectory {i + 1}" for i in range(len(arrays))])
    has_grasp = arrays[0].shape[1] > proto.POSE_DIM
    fig = new_figure(figsize, dpi)
    columns = 4 if has_grasp else 3
    top = fig.add_subplot(1, columns, 1)
    space = fig.add_subplot(1, columns, 2, projection="3d")
    steps = fig.add_subplot(1, columns, 3)
    for index, (array, label) in enumerate(zip(arrays, labels)):
        path = integrate(array) if array.shape[1] >= proto.POSE_DIM else np.cumsum(
            np.vstack([np.zeros((1, 3)), np.pad(array[:, :3], ((0, 0), (0, max(0, 3 - array.shape[1]))))]), axis=0)
        colour = f"C{index}"
        top.plot(path[:, 0], path[:, 1], "-o", color=colour, markersize=2.5, label=label)
        space.plot(path[:, 0], path[:, 1], path[:, 2], color=colour)
        for axis, style in zip(range(min(3, array.shape[1])), ("-", "--", ":")):
            steps.plot(array[:, axis], style, color=colour, label=f"{label} {AXES[axis]}" if index == 0 or axis == 0
                       else None)
        if has_grasp:
            grip = fig.axes[3] if len(fig.axes) > 3 else fig.add_subplot(1, columns, 4)
            grip.plot(array[:, proto.POSE_DIM:].mean(axis=1), color=colour)
    top.plot([0], [0], "k*", markersize=8)
    top.set(title="path from above (start *)", xlabel="x", ylabel="y")
    top.set_aspect("equal", adjustable="datalim")
    top.legend(fontsize=7)
    space.set(title="path in 3-D", xlabel="x", ylabel="y", zlabel="z")
    steps.set(title="translation per step", xlabel="step")
    steps.legend(fontsize=6, ncol=2)
    if has_grasp:
        fig.axes[3].set(title="grasp (mean)", xlabel="step")
    if title:
        fig.suptitle(title, fontsize=10)
    return present_figure(fig, display=display)


def trajectory_error_plot(predicted: np.ndarray, given: np.ndarray, *, title: str | None = None,
                          figsize: tuple[float, float] = (10, 3), dpi: int = 90, display: bool = True):
    """Per-step errors of ``predicted`` against ``given`` (:func:`~cosmos_helpers.trajectories.step_errors`):
    translation, rotation (degrees), path drift and grasp, one panel each."""
    errors = step_errors(predicted, given)
    fig = new_figure(figsize, dpi)
    panels = fig.subplots(1, len(errors), squeeze=False)[0]
    units = {"translation": "translation error", "rotation_deg": "rotation error (deg)",
             "path": "position drift", "grasp": "grasp error"}
    for axis, (name, values) in zip(panels, errors.items()):
        axis.plot(values, "-o", markersize=2.5)
        axis.set_title(f"{units[name]}\nmean {values.mean():.3g}", fontsize=9)
        axis.set_xlabel("step")
    if title:
        fig.suptitle(title, fontsize=10)
    return present_figure(fig, display=display)


def trajectory_png(given: Any = None, predicted: Any = None, *, dpi: int = 72) -> bytes | None:
    """A PNG of the given and/or predicted trajectory of a result (galleries), or ``None`` when it has neither."""
    pairs = [(np.asarray(t, dtype=np.float32), label) for t, label in ((given, "given"), (predicted, "predicted"))
             if t is not None]
    if not pairs:
        return None
    fig = trajectory_plot(*(t for t, _ in pairs), labels=[label for _, label in pairs], figsize=(10, 2.8), dpi=dpi,
                          display=False)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
