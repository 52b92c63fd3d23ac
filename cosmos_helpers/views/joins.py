"""``join_plot``: where a chained long video was joined, and whether anyone could tell.

Top: the frames on either side of every join (the last of one chunk, the first of the next), so the eye can
judge. Bottom: the mean absolute difference between each pair of consecutive frames across the whole video,
the steps across a join in red, against the steps inside the chunks: a join no taller than the motion inside
a chunk is a continuous join.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..chaining import join_continuity
from ..display import present_figure
from ..longvideo import chunk_starts
from .plots import new_figure

SIDE = 2  # frames shown on each side of a join


def join_plot(generation: Any, *, side: int = SIDE, figsize: tuple[float, float] | None = None, dpi: int = 100,
              display: bool = True):
    """Frames around each join over the frame-to-frame difference curve of a long video (a matplotlib Figure).

    ``generation``: what ``generate_long_video`` returned, or ``Generation.load`` of its saved ``.mp4``.
    """
    starts = chunk_starts(generation)
    frames = generation.frames
    report = join_continuity(frames, starts)
    joins = report["join_indexes"]
    columns = max(1, len(joins)) * 2 * side
    fig = new_figure(figsize or (max(8.0, 1.3 * columns), 5.2), dpi)
    top, bottom = fig.subfigures(2, 1, height_ratios=(1, 1.3))
    axes = np.atleast_1d(top.subplots(1, columns))
    for j, join in enumerate(joins):
        for k, index in enumerate(range(join - side + 1, join + side + 1)):
            ax = axes[j * 2 * side + k]
            ax.imshow(frames[min(max(index, 0), len(frames) - 1)])
            ax.set_xticks([])
            ax.set_yticks([])
            after = index > join
            ax.set_title(f"join {j + 1}: frame {index}", fontsize=8, color="tab:red" if after else "k")
    for ax in axes[len(joins) * 2 * side:]:
        ax.set_axis_off()
    top.suptitle("frames either side of each join (red: the first frames kept of the next chunk)", fontsize=9)
    ax = bottom.subplots()
    steps = np.asarray(report["steps"])
    ax.plot(np.arange(len(steps)) + 0.5, steps, marker=".", color="tab:blue", label="consecutive frames")
    ax.scatter(np.asarray(joins) + 0.5, steps[joins], color="tab:red", zorder=3, label="across a join")
    ax.axhline(report["within_mean"], color="tab:gray", linestyle="--", linewidth=1, label="mean within chunks")
    for start in starts[1:]:
        ax.axvline(start - 0.5, color="tab:red", alpha=0.25)  # between a chunk's last frame and the next's first
    ax.set_xlabel("frame (a step is drawn between the two frames it compares)")
    ax.set_ylabel("mean |difference| (0-255)")
    ax.legend(fontsize=8, loc="upper right")
    return present_figure(fig, display=display)
