"""A tiny synthetic world to train the embedded tiny Cosmos3 model on and to measure meaning in what it makes:
:mod:`.scenes`, :mod:`.render` (its function ``render`` shadows the module name here; torch loads inside it),
:mod:`.meaning`, :mod:`.evaluate` and ``contact_sheet`` (a labelled PNG of clips, :mod:`cosmos_helpers.views.sheet`).
"""

from __future__ import annotations

from .meaning import (centroids, colour_counts, colour_masks, describe, direction, displacement,
                      dominant_colour, edge_f1, psnr)
from .render import controls, render, render_uint8
from .scenes import (ALL_KEYS, COLOURS, DIRECTION_VECTORS, DIRECTIONS, FLOORS, HELDOUT_KEYS, SHAPES, SPEEDS,
                     TEMPLATE_HELDOUT, TEMPLATES, TRAIN_KEYS, Scene, caption, caption_json, parse_caption,
                     sample_scenes, sound)
from ..views.sheet import contact_sheet

__all__ = ["ALL_KEYS", "COLOURS", "DIRECTION_VECTORS", "DIRECTIONS", "FLOORS", "HELDOUT_KEYS", "SHAPES",
           "SPEEDS", "TEMPLATE_HELDOUT", "TEMPLATES", "TRAIN_KEYS", "Scene", "caption", "caption_json",
           "parse_caption", "sample_scenes", "centroids", "colour_counts", "colour_masks", "describe", "direction",
           "displacement", "dominant_colour", "edge_f1", "psnr", "contact_sheet", "render", "render_uint8",
           "controls", "sound"]
