"""Pictures of a result: frame strips, sound, the joins of a chained long video and action trajectories.

Figures are matplotlib ``Figure``s made without pyplot (no global state), shown as PNGs (``display=False`` returns
them).
"""

from __future__ import annotations

import io
from typing import Any, Sequence

import numpy as np

from ..chaining import join_continuity
from ..display import present, present_figure
from ..longvideo import chunk_starts
from ..protocol import action as proto
from ..trajectories import integrate, step_errors
from .items import as_item

STRIP_GAP = 4
LABEL_HEIGHT = 16
SIDE = 2  # frames shown on each side of a join


def new_figure(figsize: tuple[float, float], dpi: int) -> Any:
    """A matplotlib ``Figure`` on its own Agg canvas: made without pyplot, so no global figure state."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def shorten(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in an ellipsis when cut (labels on a plot)."""
    return text if len(text) <= width else text[:width - 1] + "\u2026"


def frame_strip(generation: Any, n: int = 8, *, height: int | None = 144, labels: bool = True,
                fps: float = 24.0, display: bool = True):
    """A strip of ``n`` evenly spaced frames (first to last) as one PIL image, each scaled down to ``height``
    (``None``: native size), with each one's index and time under it (``labels``). Displays it (``display=False``:
    returns it). Accepts whatever :func:`show` accepts."""
    from PIL import Image, ImageDraw

    item = as_item(generation, fps=fps)
    frames = item.frames()
    count = max(1, min(int(n), frames.shape[0]))  # evenly spaced, first to last (fewer when the clip is shorter)
    indexes = sorted({int(round(i)) for i in np.linspace(0, frames.shape[0] - 1, count)})
    src_h, src_w = frames.shape[1:3]
    out_h = src_h if height is None else min(int(height), src_h)
    out_w = max(1, round(src_w * out_h / src_h))
    label_h = LABEL_HEIGHT if labels else 0
    total_w = len(indexes) * out_w + (len(indexes) - 1) * STRIP_GAP
    strip = Image.new("RGB", (total_w, out_h + label_h), "white")
    draw = ImageDraw.Draw(strip)
    for slot, index in enumerate(indexes):
        tile = Image.fromarray(frames[index]).resize((out_w, out_h), Image.LANCZOS)  # a copy at the same size
        x = slot * (out_w + STRIP_GAP)
        strip.paste(tile, (x, 0))
        if labels:
            text = f"#{index}" if item.is_image else f"#{index}  {index / item.fps:.2f}s"
            draw.text((x + 2, out_h + 2), text, fill=(60, 60, 60))
    return present(strip, display=display)


def sound_plot(generation: Any, *, title: str | None = None, label: str | None = None,
               figsize: tuple[float, float] = (10, 5), dpi: int = 100, display: bool = True):
    """Waveform (each channel) over a spectrogram (channel mean, dB) of a result's sound, as a PNG
    (``display=False``: the ``Figure``); without sound a note is printed and ``None`` returned."""
    item = as_item(generation, label)
    sound, rate = item.sound()
    if sound is None or sound.size == 0:
        if display:
            print("no sound in this result (generate with sound=True to get a soundtrack)")
        return None
    sound = np.atleast_2d(np.asarray(sound, dtype=np.float32))  # (channels, samples)
    times = np.arange(sound.shape[1]) / rate
    fig = new_figure(figsize, dpi)
    wave, spec = fig.subplots(2, 1, sharex=True, height_ratios=(1, 1.4))
    names = ("left", "right") if sound.shape[0] == 2 else tuple(f"ch {i}" for i in range(sound.shape[0]))
    for channel, name in zip(sound, names):
        wave.plot(times, channel, linewidth=0.6, alpha=0.8, label=name)
    wave.set_ylabel("amplitude")
    wave.set_ylim(-1.05, 1.05)
    wave.legend(loc="upper right", fontsize=8)
    peak, rms = float(np.max(np.abs(sound))), float(np.sqrt(np.mean(sound ** 2)))
    name = shorten(item.label or item.summary or "sound", 70)
    wave.set_title(title or f"{name}  (peak {peak:.2f}, rms {rms:.3f}, {rate} Hz, {sound.shape[1] / rate:.2f} s)",
                   fontsize=9, loc="left")
    mono = sound.mean(axis=0)
    nfft = int(min(1024, max(64, 2 ** int(np.log2(max(64, len(mono) // 8))))))
    _, _, _, image = spec.specgram(mono, NFFT=nfft, Fs=rate, noverlap=nfft // 2, cmap="magma", scale="dB")
    spec.set_ylabel("frequency (Hz)")
    spec.set_xlabel("time (s)")
    fig.colorbar(image, ax=spec, label="dB", pad=0.01)
    return present_figure(fig, display=display)


def join_plot(generation: Any, *, side: int = SIDE, figsize: tuple[float, float] | None = None, dpi: int = 100,
              display: bool = True):
    """Frames around each join over the frame-to-frame difference curve of a long video (``generate_long_video``'s
    result, or ``Generation.load`` of its ``.mp4``): a join no taller than the motion inside a chunk is continuous."""
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
            ax.set_title(f"join {j + 1}: frame {index}", fontsize=8, color="tab:red" if index > join else "k")
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
    grip = fig.add_subplot(1, columns, 4) if has_grasp else None
    for index, (array, label) in enumerate(zip(arrays, labels)):
        path = integrate(array) if array.shape[1] >= proto.POSE_DIM else np.cumsum(
            np.vstack([np.zeros((1, 3)), np.pad(array[:, :3], ((0, 0), (0, max(0, 3 - array.shape[1]))))]), axis=0)
        colour = f"C{index}"
        top.plot(path[:, 0], path[:, 1], "-o", color=colour, markersize=2.5, label=label)
        space.plot(path[:, 0], path[:, 1], path[:, 2], color=colour)
        for axis, style in zip(range(min(3, array.shape[1])), ("-", "--", ":")):
            steps.plot(array[:, axis], style, color=colour, label=f"{label} {'xyz'[axis]}" if index == 0 or axis == 0
                       else None)
        if grip is not None:
            grip.plot(array[:, proto.POSE_DIM:].mean(axis=1), color=colour)
    top.plot([0], [0], "k*", markersize=8)
    top.set(title="path from above (start *)", xlabel="x", ylabel="y")
    top.set_aspect("equal", adjustable="datalim")
    top.legend(fontsize=7)
    space.set(title="path in 3-D", xlabel="x", ylabel="y", zlabel="z")
    steps.set(title="translation per step", xlabel="step")
    steps.legend(fontsize=6, ncol=2)
    if grip is not None:
        grip.set(title="grasp (mean)", xlabel="step")
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
