"""A tiny synthetic world: one coloured ball or box moving in a straight line over a two-tone floor.

The one home of every fact the renderer, captions, sound and meaning measurements share. The world is this small so
that a model trained on it can be *checked*: a caption says colour, shape, direction, speed and floor, and
:mod:`.meaning` reads colour and direction back. Generalisation is measured on combinations never seen in training
(:data:`HELDOUT_KEYS`, a fixed fifth of the 240 attribute tuples; every single value still appears in training) and
on phrasings it never uses (:data:`TEMPLATE_HELDOUT`).
"""

from __future__ import annotations

import itertools
import re
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ValidationError
from ..presets import SOUND_SAMPLE_RATE
from ..prompting.captions import build_caption

# Object colours: saturated hues far apart in RGB and far from every floor tone (see FLOORS), so that a nearest-
# palette classification with a distance threshold separates them cleanly (meaning.colour_masks).
COLOURS: dict[str, tuple[int, int, int]] = {"red": (220, 40, 40), "green": (40, 180, 60), "blue": (30, 90, 235),
                                            "yellow": (235, 215, 40), "purple": (180, 50, 200)}
SHAPES: tuple[str, ...] = ("ball", "box")
# unit vectors in image coordinates (x right, y down, so "up" decreases y)
DIRECTION_VECTORS: dict[str, tuple[int, int]] = {"left": (-1, 0), "right": (1, 0), "up": (0, -1), "down": (0, 1)}
DIRECTIONS: tuple[str, ...] = tuple(DIRECTION_VECTORS)
# fraction of the frame side along the motion (width for left/right, height for up/down) moved per frame:
# over 9 frames (8 steps) "slowly" travels ~26% of the side and "quickly" ~51%
SPEEDS: dict[str, float] = {"slowly": 0.032, "quickly": 0.064}
# background: (wall colour, floor colour); low-saturation tones, none near an object colour. Wall and floor
# differ by ~60 levels so the wall line survives the "medium" Canny thresholds: a static edge in every control.
FLOORS: dict[str, tuple[tuple[int, int, int], tuple[int, int, int]]] = {
    "grey floor": ((160, 160, 160), (100, 100, 100)), "dark floor": ((90, 90, 98), (30, 30, 34)),
    "sand floor": ((228, 216, 190), (180, 160, 120))}
WALL_FRACTION = 0.35  # default height of the wall band (fraction of the frame): a static horizontal edge
# Each sampled scene draws its own wall line, so clips differ in their static edge too: a transfer output that
# ignores its control cannot match it by reproducing a line every clip shares.
WALL_RANGE: tuple[float, float] = (0.2, 0.5)
SIZE_RANGE: tuple[float, float] = (0.14, 0.2)  # radius (half side for a box) as a fraction of the height
DEFAULT_FRAMES, DEFAULT_WIDTH, DEFAULT_HEIGHT = 9, 160, 96
SPLITS: tuple[str, ...] = ("train", "heldout", "all")  # of the attribute tuples, and of the caption templates
_MARGIN = 0.01  # kept free between the object and the frame border, as a fraction of the side

Key = tuple[str, str, str, str, str]
ALL_KEYS: tuple[Key, ...] = tuple(itertools.product(COLOURS, SHAPES, DIRECTIONS, SPEEDS, FLOORS))


# Every tuple whose index sum is 0 mod 5: exactly one in five, spread evenly over every attribute value; a rule
# rather than a random draw, so it never changes with numpy versions and reads the same in any language.
_INDEX = [{value: i for i, value in enumerate(values)} for values in (COLOURS, SHAPES, DIRECTIONS, SPEEDS, FLOORS)]
HELDOUT_KEYS: frozenset[Key] = frozenset(key for key in ALL_KEYS
                                         if sum(_INDEX[i][value] for i, value in enumerate(key)) % 5 == 0)
TRAIN_KEYS: tuple[Key, ...] = tuple(key for key in ALL_KEYS if key not in HELDOUT_KEYS)


@dataclass(frozen=True)
class Scene:
    """One clip of the world: what moves, where it starts (centre, fractions of width/height) and how big it is."""

    colour: str
    shape: str
    direction: str
    speed: str
    floor: str
    x0: float
    y0: float
    size: float  # radius (a box: half its side) as a fraction of the frame height
    wall: float = WALL_FRACTION  # where the wall meets the floor, as a fraction of the frame height

    def __post_init__(self) -> None:
        for name, allowed in (("colour", COLOURS), ("shape", SHAPES), ("direction", DIRECTIONS),
                              ("speed", SPEEDS), ("floor", FLOORS)):
            if getattr(self, name) not in allowed:
                raise ValidationError(f"scene.{name}", f"{getattr(self, name)!r} is not part of this world.",
                                      f"use one of {', '.join(map(repr, allowed))}.")
        if not 0.0 <= self.wall <= 1.0:
            raise ValidationError("scene.wall", f"{self.wall!r} is not a fraction of the frame height.",
                                  "use a value between 0 and 1, e.g. 0.35.")

    @property
    def key(self) -> Key:
        return (self.colour, self.shape, self.direction, self.speed, self.floor)

    @property
    def heldout(self) -> bool:
        return self.key in HELDOUT_KEYS

    def velocity(self) -> tuple[float, float]:
        """Per-frame motion as fractions of (width, height)."""
        dx, dy = DIRECTION_VECTORS[self.direction]
        step = SPEEDS[self.speed]
        return dx * step, dy * step


def place(key: Key, rng: np.random.Generator, *, frames: int = DEFAULT_FRAMES, width: int = DEFAULT_WIDTH,
          height: int = DEFAULT_HEIGHT) -> Scene:
    """A :class:`Scene` for ``key`` with a random size and a start that keeps it inside the frame throughout."""
    colour, shape, direction, speed, floor = key
    size = float(rng.uniform(*SIZE_RANGE))
    half = (size * height / width, size)  # the object's half extent as fractions of (width, height)
    dx, dy = DIRECTION_VECTORS[direction]
    travel = SPEEDS[speed] * (frames - 1)
    start = []
    for axis, sign in enumerate((dx, dy)):
        lo, hi = half[axis] + _MARGIN, 1.0 - half[axis] - _MARGIN
        if sign > 0:  # along the motion: start on the side opposite the direction, the whole path inside
            hi = min(0.5, hi - travel)
        elif sign < 0:
            lo = max(0.5, lo + travel)
        if hi < lo:
            raise ValidationError("frames", f"a {speed} {shape} cannot stay inside a {width}x{height} frame for "
                                  f"{frames} frames.", "use fewer frames (the world is tuned for 9).")
        start.append(float(rng.uniform(lo, hi)))
    wall = float(rng.uniform(*WALL_RANGE))
    return Scene(colour, shape, direction, speed, floor, start[0], start[1], size, wall)


def sample_scenes(n: int, seed: int, split: str = "train", *, frames: int = DEFAULT_FRAMES,
                  width: int = DEFAULT_WIDTH, height: int = DEFAULT_HEIGHT) -> list[Scene]:
    """``n`` scenes drawn uniformly from the ``split``'s attribute tuples; the same ``seed`` gives the same list."""
    if split not in SPLITS:
        raise ValidationError("split", f"{split!r} is not a split.", f"use one of {', '.join(map(repr, SPLITS))}.")
    if not isinstance(n, (int, np.integer)) or n < 0:
        raise ValidationError("n", f"expected a count of 0 or more, got {n!r}.", "pass a whole number, e.g. 64.")
    keys = {"train": TRAIN_KEYS, "heldout": tuple(k for k in ALL_KEYS if k in HELDOUT_KEYS), "all": ALL_KEYS}[split]
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(keys), size=int(n))
    return [place(keys[i], rng, frames=frames, width=width, height=height) for i in picks]


# Captions ------------------------------------------------------------------------------------------------

_VERB = {"ball": "rolls", "box": "slides"}
_TO = {"left": "to the left", "right": "to the right", "up": "upward", "down": "downward"}
_ADJ = {"slowly": "slow", "quickly": "fast"}

# Every template states colour, shape, direction and floor; all but the last state the speed.
TEMPLATES: tuple[str, ...] = (
    "A {colour} {shape} {verb} {speed} {to} across a {floor}.",
    "On a {floor}, a {colour} {shape} moves {speed} {ward}.",
    "A {colour} {shape} {verb} {bare} over a {floor}, moving {speed}.",
    "{Speed}, a {colour} {shape} travels {to} on a {floor}.",
    "The {colour} {shape} goes {bare} {speed} along a {floor}.",
    "A {adj} {colour} {shape} heading {bare} on a {floor}.",
    "A {colour} {shape} on a {floor} {verb} {to}.",
)
# Phrasings the training split never uses: a test of whether the model learnt the words or the sentences.
TEMPLATE_HELDOUT: tuple[str, ...] = (
    "Watch a {colour} {shape} drift {speed} {ward} across the {floor}.",
    "{Floor} scene: one {colour} {shape}, moving {bare}, {speed}.",
)


def _fill(template: str, scene: Scene) -> str:
    words = {"colour": scene.colour, "shape": scene.shape, "verb": _VERB[scene.shape], "speed": scene.speed,
             "Speed": scene.speed.capitalize(), "adj": _ADJ[scene.speed], "to": _TO[scene.direction],
             "ward": scene.direction + "ward", "bare": scene.direction, "floor": scene.floor,
             "Floor": scene.floor.capitalize()}
    return template.format(**words)


def caption(scene: Scene, style: str | int = "train", rng: np.random.Generator | None = None) -> str:
    """A plain sentence a user would type about ``scene``, from :data:`TEMPLATES` (``style="train"``),
    :data:`TEMPLATE_HELDOUT` (``"heldout"``), either (``"all"``) or ``(TEMPLATES + TEMPLATE_HELDOUT)[style]``, drawn
    with ``rng``; without one the scene itself picks it, so the same scene always reads the same."""
    everything = TEMPLATES + TEMPLATE_HELDOUT
    if isinstance(style, (int, np.integer)) and not isinstance(style, bool):
        if not 0 <= style < len(everything):
            raise ValidationError("style", f"template index {style} is out of range.",
                                  f"use 0..{len(everything) - 1} or one of {', '.join(map(repr, SPLITS))}.")
        return _fill(everything[style], scene)
    if style not in SPLITS:
        raise ValidationError("style", f"{style!r} is not a caption style.",
                              f"use one of {', '.join(map(repr, SPLITS))} or a template index.")
    pool = {"train": TEMPLATES, "heldout": TEMPLATE_HELDOUT, "all": everything}[style]
    index = int(rng.integers(len(pool))) if rng is not None else zlib.crc32(repr(scene).encode()) % len(pool)
    return _fill(pool[index], scene)


_WORDS: dict[str, dict[str, str]] = {
    "colour": {name: name for name in COLOURS},
    "shape": {name: name for name in SHAPES},
    "direction": {d + ending: d for d in DIRECTIONS for ending in ("", "ward", "wards")},
    "speed": {"slowly": "slowly", "slow": "slowly", "quickly": "quickly", "quick": "quickly", "fast": "quickly"},
    "floor": {"grey": "grey floor", "gray": "grey floor", "dark": "dark floor", "sand": "sand floor",
              "sandy": "sand floor"},
}


def parse_caption(text: str) -> dict[str, str | None]:
    """The world's words found in a sentence (the first match of each): colour, shape, direction, speed, floor
    (``None`` where absent), to score what a caption asked for against what a clip shows."""
    tokens = re.findall(r"[a-z]+", str(text).lower())
    return {attribute: next((words[token] for token in tokens if token in words), None)
            for attribute, words in _WORDS.items()}


def caption_json(scene: Scene, *, frames: int = DEFAULT_FRAMES, fps: float = 16.0) -> dict[str, Any]:
    """The same facts as a structured video caption valid for the framework's template (checked on return)."""
    if not fps > 0 or not frames >= 1:
        raise ValidationError("fps" if not fps > 0 else "frames", f"expected positive frames and fps, got "
                              f"frames={frames!r}, fps={fps!r}.", "pass e.g. frames=9, fps=16.")
    seconds = max(1, int(np.ceil(frames / fps)))
    span = f"0:00-{seconds // 60}:{seconds % 60:02d}"
    sentence = _fill(TEMPLATES[0], scene)
    side = {"left": "right side", "right": "left side", "up": "lower part", "down": "upper part"}[scene.direction]
    what = f"a plain {scene.colour} {'sphere' if scene.shape == 'ball' else 'cube'}"
    subject = {
        "description": f"A {scene.colour} {scene.shape}: {what} with a smooth matte surface.",
        "appearance_details": "Uniform colour, soft edges, no markings.", "relationship": "The only object.",
        "location": f"starts in the {side} of the frame", "relative_size": "Small within frame",
        "orientation": "Facing the camera", "pose": "Upright", "action": f"moves {scene.speed} {_TO[scene.direction]}",
        "state_changes": f"Its position changes steadily {_TO[scene.direction]}; its shape and colour stay the same.",
        "clothing": "", "expression": "", "gender": "", "age": "", "skin_tone_and_texture": "",
        "facial_features": "", "number_of_subjects": 1, "number_of_arms": 0, "number_of_legs": 0,
    }
    return build_caption(
        "video", subjects=[subject],
        background_setting=f"A plain room: a flat wall above a {scene.floor}.",
        lighting={"conditions": "Even studio light", "direction": "From the upper left",
                  "shadows": "None", "illumination_effect": "Flat, uniform"},
        aesthetics={"composition": "One object on a two-tone background", "color_scheme": f"{scene.colour} on "
                    f"{scene.floor.split()[0]}", "mood_atmosphere": "Calm, simple", "patterns": "None"},
        cinematography={"camera_motion": "Static camera", "framing": "Wide shot", "camera_angle": "Eye level",
                        "depth_of_field": "Deep", "focus": f"The {scene.colour} {scene.shape}",
                        "lens_focal_length": "Standard"},
        style_medium="Simple computer rendering", artistic_style="Minimal, flat colours",
        context="A synthetic toy world for testing motion and colour.",
        actions=[{"time": span, "description": sentence}],
        text_and_signage_elements=[],
        segments=[{"segment_index": 0, "time_range": span, "description": sentence,
                   "key_changes": f"The {scene.shape} moves {_TO[scene.direction]}.", "camera": "Static"}],
        transitions=[], temporal_caption=sentence, audio_description="Silent.",
    )


# Sound: each colour has its own pitch (a pentatonic set, so no two are confusable or dissonant), a ball is a pure
# sine and a box adds a soft third harmonic (a hollower timbre), and the stereo balance follows the object's x
# position with an equal-power pan: a ball rolling right moves from the left speaker to the right.
PITCHES: dict[str, float] = {"red": 220.0, "green": 261.63, "blue": 293.66, "yellow": 392.0, "purple": 440.0}
LOUDNESS = 0.3
FADE_SECONDS = 0.01  # short fades so the clip starts and ends without a click


def sound(scene: Scene, frames: int = DEFAULT_FRAMES, fps: float = 16.0,
          sample_rate: int = SOUND_SAMPLE_RATE) -> np.ndarray:
    """Stereo float32 ``[2, N]`` in [-1, 1] lasting ``frames / fps`` seconds (the shape media.write_video takes)."""
    if not isinstance(scene, Scene):
        raise ValidationError("scene", f"expected a Scene, got a {type(scene).__name__}.",
                              "pass one of sample_scenes(...).")
    for name, value in (("frames", frames), ("fps", fps), ("sample_rate", sample_rate)):
        if not isinstance(value, (int, float, np.integer, np.floating)) or value <= 0:
            raise ValidationError(name, f"expected a positive number, got {value!r}.", f"pass e.g. {name}=16.")
    count = max(1, int(round(frames / fps * sample_rate)))
    t = np.arange(count, dtype=np.float64) / sample_rate
    phase = 2 * np.pi * PITCHES[scene.colour] * t
    wave = np.sin(phase) if scene.shape == "ball" else (np.sin(phase) + np.sin(3 * phase) / 3) * 0.75
    fade = np.clip(np.minimum(t, t[-1] - t) / FADE_SECONDS, 0.0, 1.0)
    x = np.clip(scene.x0 + scene.velocity()[0] * t * fps, 0.0, 1.0)  # position at each sample, frame-rate time
    angle = x * np.pi / 2
    mono = LOUDNESS * wave * fade
    return np.stack([mono * np.cos(angle), mono * np.sin(angle)]).astype(np.float32)
