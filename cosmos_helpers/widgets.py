"""Looking at results in notebooks: players with sound, contact sheets, comparisons, plots and a form.

=============================  ==================================================================
``show(x)``                    one result: image, or a video player with sound, and its caption
``grid(xs, columns=3)``        a contact sheet of many results (prompt summary, seed, backend, time)
``compare(a, b, ..., mode=)``  side by side, or a wipe slider over one frame of each
``frame_strip(x, n=8)``        evenly spaced frames in one picture (a PIL image)
``sound_plot(x)``              waveform + spectrogram (a matplotlib Figure)
``GenerateForm(backend)``      prompt and settings, a Generate button, a progress bar, the result
=============================  ==================================================================

``x`` may be a :class:`~cosmos_helpers.Generation`, a saved ``.mp4``/``.png`` (or its ``.json`` manifest)
or uint8 frames ``(T,H,W,3)``. Videos are played from a small preview transcode (``<stem>.preview.mp4``:
H.264 yuv420p + AAC, at most ``max_side`` pixels), never from the full-resolution file.

Live Jupyter: ipywidgets; papermill / nbconvert (``COSMOS_HELPERS_STATIC=1``): self-contained HTML embedding only
the preview. Each displays its result and returns it (shown once as a cell's last line); ``display=False`` only
returns it. Importing this module does not import torch, ipywidgets or matplotlib.
"""

from __future__ import annotations

from .views.form import GenerateForm
from .views.plots import frame_strip, sound_plot
from .views.viewers import compare, grid, show

__all__ = ["show", "grid", "compare", "frame_strip", "sound_plot", "GenerateForm"]
