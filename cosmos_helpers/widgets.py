"""Looking at results in notebooks: ``show`` one, ``grid`` many, ``compare`` side by side or with a wipe slider,
``frame_strip`` / ``sound_plot`` as pictures (all of a ``Generation``, a saved file or uint8 frames), and
``GenerateForm(backend)`` to make one. Each displays its result (static HTML under papermill) and returns it;
``display=False`` only returns it. Importing this module does not import torch, ipywidgets or matplotlib.
"""

from __future__ import annotations

from .views.form import GenerateForm
from .views.plots import frame_strip, sound_plot
from .views.viewers import compare, grid, show

__all__ = ["show", "grid", "compare", "frame_strip", "sound_plot", "GenerateForm"]
