"""A tiny synthetic world to train the embedded tiny Cosmos3 model on and to measure meaning in what it makes.

* :mod:`.scenes`: the vocabulary (colours, shapes, directions, speeds, floors), :class:`Scene`, deterministic
  train/held-out sampling and captions (plain sentences and structured JSON);
* :mod:`.render`: batched torch rendering to ``[B, 3, T, H, W]`` in ``[-1, 1]`` and the transfer controls
  (torch is imported inside its functions, so importing this package stays torch-free; the function
  ``render`` shadows the module name here: import the module's other names from ``.render`` directly);
* :mod:`.meaning`: numpy measurements on decoded frames (colour, centroid track, direction, PSNR, edge F1);
* :mod:`.sheet`: a labelled PNG contact sheet; :mod:`.sound`: a stereo tone per scene (pitch = colour, pan = x).
"""

from __future__ import annotations

from .meaning import (centroids, colour_counts, colour_masks, describe, direction, displacement,
                      dominant_colour, edge_f1, psnr)
from .render import controls, render, render_uint8
from .scenes import (ALL_KEYS, COLOURS, DIRECTION_VECTORS, DIRECTIONS, FLOORS, HELDOUT_KEYS, SHAPES, SPEEDS,
                     TEMPLATE_HELDOUT, TEMPLATES, TRAIN_KEYS, Scene, caption, caption_json, parse_caption,
                     sample_scenes)
from .sheet import contact_sheet
from .sound import sound

__all__ = ["ALL_KEYS", "COLOURS", "DIRECTION_VECTORS", "DIRECTIONS", "FLOORS", "HELDOUT_KEYS", "SHAPES",
           "SPEEDS", "TEMPLATE_HELDOUT", "TEMPLATES", "TRAIN_KEYS", "Scene", "caption", "caption_json",
           "parse_caption", "sample_scenes", "centroids", "colour_counts", "colour_masks", "describe", "direction",
           "displacement", "dominant_colour", "edge_f1", "psnr", "contact_sheet", "render", "render_uint8",
           "controls", "sound"]
