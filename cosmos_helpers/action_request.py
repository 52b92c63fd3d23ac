"""The action fields of a :class:`~cosmos_helpers.request.GenerationRequest`, checked as a person would check them.

An action run is sized by its media and an action tier (``protocol.action.output_size``: fitted into the tier's
canvas, never upscaled), its length by the action chunk: ``num_frames = chunk + 1``. Upstream pads a short trajectory
and cuts a long one without a word; here one that does not fit is refused, naming the numbers and the fix.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import media
from .errors import ValidationError
from .protocol import action as proto
from .trajectories import load_trajectory

ACTION_FIELDS = ("actions", "embodiment", "view_point")
# The media an action mode is conditioned on -> (its article, what it is, its forms, the fix when given the other)
_MEDIA = {"image": ("an", "the first frame of the future video", "a path, a PIL image or an HxWx3 uint8 array",
                    "pass its first frame as image= (a video is what inverse_dynamics reads)"),
          "video": ("a", "the clip whose actions to infer", "a path or a TxHxWx3 uint8 array",
                    "pass the clip as video=")}


def refuse_action_fields(request: Any) -> None:
    """A non-action mode given an action field: say which mode takes it."""
    for name in ACTION_FIELDS:
        if getattr(request, name) is not None:
            raise ValidationError(name, f"{request.mode} takes no {name}.",
                                  f"use mode='forward_dynamics' (or inverse_dynamics / policy), or drop {name}=.")


def frames_from_actions(request: Any) -> int | None:
    """``len(actions) + 1`` when forward dynamics is given a trajectory and no frame count: the trajectory sets it."""
    if request.mode not in proto.GIVES_ACTIONS or request.actions is None or request.num_frames is not None:
        return None
    actions = load_trajectory(request.actions)
    if actions.ndim != 2:
        return None  # reported with the other trajectory checks
    steps = int(actions.shape[0])
    if steps < 4 or steps % 4:
        lower = max(4, steps // 4 * 4)
        raise ValidationError("actions", f"{steps} steps make a {steps + 1}-frame video, which the causal VAE cannot "
                              "keep (it needs 4k+1 frames: 4, 8, 16, ... steps).",
                              f"give {lower} or {lower + 4} steps (or pass num_frames= and that many steps + 1).")
    return steps + 1


def resolve(request: Any, defaults: Any) -> dict[str, Any]:
    """Validate the action fields and media (frame count and caption already resolved); return their values."""
    embodiment = _embodiment(request.embodiment)
    values: dict[str, Any] = {"embodiment": embodiment}
    if request.view_point is not None:
        if not isinstance(request.view_point, str) or request.view_point.strip() not in proto.VIEW_POINTS:
            raise ValidationError("view_point", f"{request.view_point!r} is not a camera viewpoint the action model "
                                  "was trained with.", f"use one of {', '.join(proto.VIEW_POINTS)}, or leave it out "
                                  f"({proto.DEFAULT_VIEW_POINT}).")
        values["view_point"] = request.view_point.strip()
    if isinstance(request.caption, dict):
        raise ValidationError("prompt", f"{request.mode} takes a plain instruction: the model wraps it in its own "
                              "action caption (actions, duration, fps, resolution, framing).",
                              "pass the instruction as text, e.g. 'Put the pot to the left of the purple item.'")
    for name in ("sound", "condition_frames", "condition_video_keep", "add_resolution_template",
                 "add_duration_template"):
        if getattr(request, name) not in (None, False):
            raise ValidationError(name, f"{request.mode} does not take {name} (the action task fixes what is "
                                  "generated, which frames stay clean and the caption).", f"drop {name}=.")
    height, width = _conditioning_size(request)
    tier = str(request.tier if request.tier is not None else defaults.tier).lower().removesuffix("p")
    if tier not in proto.TIERS:
        raise ValidationError("tier", f"{request.tier!r} is not an action resolution tier.",
                              f"use one of {', '.join(proto.TIERS)}: the start image is fitted into that canvas.")
    if name := next((key for key in ("width", "height", "aspect_ratio") if getattr(request, key) is not None), None):
        what = "video" if request.mode in proto.TAKES_VIDEO else "start image"
        raise ValidationError(name, f"{request.mode} sizes the video from its {what} and the tier "
                              "(the model pads it into the tier's closest-ratio canvas).",
                              f"drop {name}=; choose tier= one of {', '.join(proto.TIERS)}.")
    out_height, out_width = proto.output_size(tier, height, width)
    return {**values, "tier": tier, "height": out_height, "width": out_width, "actions": _actions(request, embodiment)}


def _embodiment(value: Any) -> str:
    known = ", ".join(sorted(proto.RAW_DIM))
    if value is None:
        raise ValidationError("embodiment", "action modes need the embodiment whose actions these are (it selects "
                              "the model's action weights and fixes the width of a row).",
                              f"pass embodiment= e.g. 'av', 'bridge_orig_lerobot' or 'droid_lerobot' (all: {known}).")
    key = str(value).strip().lower()
    if key not in proto.RAW_DIM:
        raise ValidationError("embodiment", f"unknown embodiment {value!r} (or one whose action width is set per "
                              "dataset, which no backend can run).", f"use one of {known}.")
    return key


def _conditioning_size(request: Any) -> tuple[int, int]:
    """Check the media the mode needs (image for forward dynamics / policy, video for inverse dynamics)."""
    wanted, other = ("video", "image") if request.mode in proto.TAKES_VIDEO else ("image", "video")
    article, why, forms, fix = _MEDIA[wanted]
    if getattr(request, other) is not None:
        raise ValidationError(other, f"{request.mode} is conditioned on a {wanted}, not a {other}.", f"{fix}.")
    source = getattr(request, wanted)
    if source is None:
        raise ValidationError(wanted, f"{request.mode} needs {article} {wanted}: {why}.", f"pass {wanted}= {forms}.")
    if wanted == "image":
        media.check_image(source, field="image")
        return media.load_image(source).size[::-1]
    media.check_video(source, field="video")
    frames = media.load_video_frames(source, max_frames=request.num_frames)[0]  # enough to tell it is long enough
    if len(frames) < request.num_frames:
        longest = max(5, (len(frames) - 1) // 4 * 4 + 1)
        raise ValidationError("video", f"the video has {len(frames)} frames; inverse dynamics reads "
                              f"num_frames={request.num_frames} of them.",
                              f"pass num_frames={longest} (4k+1, at most the video's length) or a longer video.")
    return int(frames.shape[1]), int(frames.shape[2])


def _actions(request: Any, embodiment: str) -> np.ndarray | None:
    chunk, width = request.num_frames - 1, proto.RAW_DIM[embodiment]
    if request.mode not in proto.GIVES_ACTIONS:
        if request.actions is not None:
            raise ValidationError("actions", f"{request.mode} predicts the actions; it is not given them.",
                                  "drop actions= (or use mode='forward_dynamics' to play a trajectory).")
        return None
    if request.actions is None:
        raise ValidationError("actions", "forward_dynamics plays a trajectory: none was given.",
                              f"pass actions= a ({chunk}, {width}) array or a .json/.npz/LeRobot .parquet file "
                              f"({embodiment}: {width} values per step).")
    actions = load_trajectory(request.actions)
    if actions.ndim != 2:
        raise ValidationError("actions", f"a trajectory is a (T, D) table, got shape {actions.shape}.",
                              f"pass one row of {width} values per step.")
    if actions.shape[1] != width:
        raise ValidationError("actions", f"rows have {actions.shape[1]} values; {embodiment} actions have {width} "
                              "(9-D pose delta + grasp state, see protocol.action).",
                              f"give {width} values per row, or the embodiment these actions belong to.")
    if actions.shape[0] != chunk:
        raise ValidationError("actions", f"{actions.shape[0]} steps for a {request.num_frames}-frame video, which "
                              f"has {chunk} transitions (upstream would silently repeat or cut rows).",
                              f"give {chunk} rows, or num_frames={actions.shape[0] + 1} (leave it out to follow the "
                              "trajectory).")
    bad = np.argwhere(~np.isfinite(actions))
    if len(bad):
        row, col = (int(i) for i in bad[0])
        raise ValidationError("actions", f"row {row}, value {col} is {actions[row, col]} ({len(bad)} non-finite "
                              "values in all).", "replace NaN/inf values (e.g. interpolate the missing steps).")
    return actions
