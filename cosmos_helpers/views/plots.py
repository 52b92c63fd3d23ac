"""``frame_strip`` (evenly spaced frames in one picture) and ``sound_plot`` (waveform + spectrogram)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..display import present, present_figure
from .items import as_item

STRIP_GAP = 4
LABEL_HEIGHT = 16


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


def strip_indexes(num_frames: int, n: int) -> list[int]:
    """``n`` evenly spaced frame indexes from first to last (fewer when the clip is shorter)."""
    n = max(1, min(int(n), num_frames))
    return sorted({int(round(i)) for i in np.linspace(0, num_frames - 1, n)})


def frame_strip(generation: Any, n: int = 8, *, height: int | None = 144, labels: bool = True,
                fps: float = 24.0, display: bool = True):
    """A strip of ``n`` evenly spaced frames (first to last) as one PIL image, with times under them.

    Each frame is scaled to ``height`` pixels (``None``: native size; never upscaled); frames are separated
    by a 4 px gap; ``labels`` adds a 16 px row with each frame's index and time. Displays it and returns
    nothing (``display=False``: returns the image). Accepts whatever :func:`show` accepts.
    """
    from PIL import Image, ImageDraw

    item = as_item(generation, fps=fps)
    frames = item.frames()
    indexes = strip_indexes(frames.shape[0], n)
    src_h, src_w = frames.shape[1:3]
    out_h = src_h if height is None else min(int(height), src_h)
    out_w = max(1, round(src_w * out_h / src_h))
    label_h = LABEL_HEIGHT if labels else 0
    total_w = len(indexes) * out_w + (len(indexes) - 1) * STRIP_GAP
    strip = Image.new("RGB", (total_w, out_h + label_h), "white")
    draw = ImageDraw.Draw(strip)
    for slot, index in enumerate(indexes):
        tile = Image.fromarray(frames[index])
        if tile.size != (out_w, out_h):
            tile = tile.resize((out_w, out_h), Image.LANCZOS)
        x = slot * (out_w + STRIP_GAP)
        strip.paste(tile, (x, 0))
        if labels:
            text = f"#{index}" if item.is_image else f"#{index}  {index / item.fps:.2f}s"
            draw.text((x + 2, out_h + 2), text, fill=(60, 60, 60))
    return present(strip, display=display)


def sound_plot(generation: Any, *, title: str | None = None, label: str | None = None,
               figsize: tuple[float, float] = (10, 5), dpi: int = 100, display: bool = True):
    """Waveform (each channel) over a spectrogram (channel mean, dB) of a result's sound.

    Displays the matplotlib ``Figure`` (``figsize * dpi`` pixels; made without pyplot, so no global state) as a
    PNG (``display=False``: returns it); prints a note and returns ``None`` when there is no sound.
    """
    item = as_item(generation, label)
    sound, rate = item.sound()
    if sound is None or sound.size == 0:
        if display:
            print("no sound in this result (generate with sound=True to get a soundtrack)")
        return None
    sound = np.asarray(sound, dtype=np.float32)
    if sound.ndim == 1:
        sound = sound[None]
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
