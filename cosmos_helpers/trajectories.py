"""Action trajectories: read and write them, turn pose deltas into paths, compare two.

A trajectory is a float ``(T, D)`` array, one row per transition between two video frames, in an embodiment's raw
action layout (``protocol.action``): a 9-D pose delta (translation, then the framework's ``rot6d``: the rotation
matrix's first two columns), then the grasp state. Files: JSON ``[T][D]`` or ``{"actions": [T][D]}``, ``.npz`` with
an ``actions`` array, and LeRobot parquet (optional ``pyarrow``), read and written as huggingface/lerobot v0.3.3 and
main @ 7427f31 (pyproject 0.6.2) lay it out:

* Files: ``v2.1`` keeps one episode per ``data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet``
  (``datasets/utils.py`` ``DEFAULT_PARQUET_PATH``); ``v3.0`` packs many into ``data/chunk-{chunk_index:03d}/
  file-{file_index:03d}.parquet`` (``DEFAULT_DATA_PATH``), so a reader selects one by ``episode_index``.
* Columns: ``action``, ``observation.state`` and the per-frame ``timestamp`` (float32), ``frame_index``,
  ``episode_index``, ``index`` (across the dataset) and ``task_index`` (int64), each of shape ``(1,)``
  (``DEFAULT_FEATURES``). A ``(D,)`` feature is ``datasets.Sequence(length=D)``, stored as Arrow
  ``fixed_size_list<float32>[D]``; other writers give a plain ``list<float>``; both are read.
* Timing: ``timestamp = frame_index / fps``; ``index`` runs on across episodes (``dataset_writer.py``).
* A real ``meta/info.json`` (rerun-io/rerun @ 473c6d4) is kept as ``tests/contracts/fixtures/lerobot_info-v3.0.json``;
  the tests hold this writer to it.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ValidationError
from .media import write_bytes_atomic
from .protocol import action as proto

SUFFIXES = (".json", ".npz", ".parquet")
# Our argument name -> the LeRobot column; any other ``field`` is taken as a column name ("observation.state").
LEROBOT_COLUMNS: dict[str, str] = {"actions": "action"}
PYARROW_FIX = "`pip install pyarrow` (or `pip install cosmos-helpers[lerobot]`), or convert the file to JSON or .npz."


def load_trajectory(source: Any, *, field: str = "actions", episode: int | None = None) -> np.ndarray:
    """A ``(T, D)`` float32 array from an array, nested lists, or a ``.json`` / ``.npz`` / LeRobot ``.parquet`` file.

    For parquet, ``field`` picks the column (``"actions"`` means ``action``) and ``episode`` the episode, required when
    the file holds several (joining two would make a path that jumps); rows come back in ``frame_index`` order.
    """
    if isinstance(source, (str, Path)):
        path = Path(source).expanduser()
        suffix = path.suffix.lower()
        if suffix not in SUFFIXES:
            raise ValidationError(field, f"{path.name} is not a trajectory file this reads.",
                                  f"give a {', '.join(SUFFIXES)} file, or the array itself.")
        if not path.is_file():
            raise ValidationError(field, f"{path} does not exist.", "check the path.")
        if episode is not None and suffix != ".parquet":
            raise ValidationError("episode", f"{path.name} holds one trajectory; only parquet holds episodes.",
                                  "leave episode= out.")
        source = _read_parquet(path, field, episode) if suffix == ".parquet" else _read_file(path, field)
    try:
        array = np.asarray(source, dtype=np.float64)
    except (TypeError, ValueError):
        fix = "pass a (T, D) array, nested lists of numbers, or a .json / .npz / .parquet file."
        raise ValidationError(field, f"{type(source).__name__} is not a numeric (T, D) trajectory.", fix) from None
    return array.astype(np.float32) if array.ndim == 2 else array


def _read_file(path: Path, field: str) -> Any:
    if path.suffix.lower() == ".npz":
        with np.load(path) as data:
            if "actions" not in data:
                raise ValidationError(field, f"{path.name} has no 'actions' array (it has {sorted(data)}).",
                                      "save it with save_trajectory(), or np.savez(path, actions=array).")
            return data["actions"]
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValidationError(field, f"{path.name} is not valid JSON ({exc}).", "give a [T][D] JSON array.") from None
    return data["actions"] if isinstance(data, dict) and "actions" in data else data


def _pyarrow(field: str, what: str) -> tuple[Any, Any]:
    """``(pyarrow, pyarrow.parquet)``, imported only here: parquet is optional and most users never need it."""
    try:
        import pyarrow
        import pyarrow.compute  # noqa: F401 (pyarrow.compute.list_value_length)
        import pyarrow.parquet
    except ImportError:
        raise ValidationError(field, f"{what} LeRobot parquet needs pyarrow, which is not installed.",
                              PYARROW_FIX) from None
    return pyarrow, pyarrow.parquet


def _read_parquet(path: Path, field: str, episode: int | None) -> np.ndarray:
    """One episode's ``field`` column as ``(T, D)``, in ``frame_index`` order."""
    pa, pq = _pyarrow(field, f"{path.name}: reading")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as exc:
        raise ValidationError(field, f"{path.name} is not a readable parquet file ({exc}).",
                              "give a LeRobot data file (data/chunk-*/*.parquet).") from None
    column = LEROBOT_COLUMNS.get(field, field)
    column = field if column not in table.column_names and field in table.column_names else column
    if column not in table.column_names:
        raise ValidationError(field, f"{path.name} has no column {column!r}; its columns are {table.column_names}.",
                              "pass field= one of those (e.g. 'observation.state'), or 'actions' for 'action'.")
    rows = _episode_rows(table, path, episode)
    if "frame_index" in table.column_names:
        frames = table.column("frame_index").to_numpy()[rows]
        if len(np.unique(frames)) != len(frames):
            raise ValidationError("episode", f"{path.name} repeats frame_index values within one episode.",
                                  "pass episode= to pick one episode, or rewrite the file with unique frames.")
        rows = rows[np.argsort(frames, kind="stable")]
    return _column_rows(table.column(column).combine_chunks().take(pa.array(rows)), field, path.name, pa)


def _episode_rows(table: Any, path: Path, episode: int | None) -> np.ndarray:
    """Row numbers of the chosen episode (all rows when the file has no ``episode_index``, i.e. one episode)."""
    if "episode_index" not in table.column_names:
        if episode not in (None, 0):
            raise ValidationError("episode", f"{path.name} has no episode_index column, so holds one episode.",
                                  "leave episode= out.")
        return np.arange(table.num_rows)
    ids = table.column("episode_index").to_numpy()
    present = np.unique(ids).tolist()
    if episode is None:
        if len(present) > 1:
            raise ValidationError("episode", f"{path.name} holds {len(present)} episodes ({_listed(present)}).",
                                  "pass episode= one of them: a trajectory is one episode.")
        return np.arange(table.num_rows)
    if episode not in present:
        raise ValidationError("episode", f"{path.name} has no episode {episode} (it has {_listed(present)}).",
                              "pass one of those.")
    return np.flatnonzero(ids == episode)


def _listed(values: list[int], limit: int = 10) -> str:
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f", ... {len(values) - limit} more" if len(values) > limit else "")


def _column_rows(column: Any, field: str, name: str, pa: Any) -> np.ndarray:
    """An Arrow column as ``(T, D)`` float32: list columns (fixed or not) give ``D`` per row, scalars ``D = 1``."""
    kind = column.type
    if pa.types.is_fixed_size_list(kind) or pa.types.is_list(kind) or pa.types.is_large_list(kind):
        values, inner = column.flatten(), kind.value_type
        widths = np.unique(pa.compute.list_value_length(column).to_numpy(zero_copy_only=False))
        if len(widths) > 1:
            raise ValidationError(field, f"{name}: the rows of this column have different lengths {widths.tolist()}.",
                                  "give a column with one length per row (a LeRobot feature of shape (D,)).")
        width = int(widths[0]) if len(widths) else 0
    else:
        values, inner, width = column, kind, 1
    if not (pa.types.is_floating(inner) or pa.types.is_integer(inner)):
        raise ValidationError(field, f"{name}: the column holds {kind}, not numbers.", "pick a numeric column.")
    if column.null_count or values.null_count:
        raise ValidationError(field, f"{name}: the column has missing values.", "fill them, or pick another column.")
    return values.to_numpy(zero_copy_only=False).astype(np.float32).reshape(len(column), width)


def save_trajectory(path: str | Path, actions: np.ndarray, *, overwrite: bool = False, fps: float | None = None,
                    episode_index: int = 0, task_index: int = 0) -> Path:
    """Write ``actions`` as the framework's ``.json`` action file, ``.npz``, or a one-episode LeRobot ``.parquet``
    (``fps`` required: it stores ``timestamp = frame_index / fps``, and a guessed rate would misplace every frame)."""
    path = Path(path)
    array = np.asarray(actions, dtype=np.float32)
    suffix = path.suffix.lower()
    if suffix == ".npz":
        buffer = io.BytesIO()
        np.savez(buffer, actions=array)
        return write_bytes_atomic(path, buffer.getvalue(), overwrite=overwrite)
    if suffix == ".parquet":
        data = _lerobot_parquet(path.name, array, fps, episode_index, task_index)
        return write_bytes_atomic(path, data, overwrite=overwrite)
    if suffix != ".json":
        raise ValidationError("path", f"{path.name}: trajectories are saved as .json, .npz or .parquet.",
                              "change the suffix.")
    return write_bytes_atomic(path, (json.dumps(array.tolist()) + "\n").encode(), overwrite=overwrite)


def _lerobot_parquet(name: str, array: np.ndarray, fps: float | None, episode_index: int, task_index: int) -> bytes:
    """The bytes of a one-episode LeRobot data file, as ``LeRobotDataset`` writes it (``index`` from 0)."""
    if array.ndim != 2 or not array.shape[0] or not array.shape[1]:
        raise ValidationError("actions", f"shape {array.shape} is not a (T, D) trajectory.", "pass a (T, D) array.")
    if fps is None or not math.isfinite(fps) or fps <= 0:
        raise ValidationError("fps", f"{name}: a LeRobot file needs the frame rate (got {fps!r}).",
                              "pass fps= the rate the actions were recorded at, e.g. fps=10.")
    pa, pq = _pyarrow("path", f"{name}: writing")
    frames, (count, width) = np.arange(array.shape[0], dtype=np.int64), array.shape
    action = pa.FixedSizeListArray.from_arrays(pa.array(array.reshape(-1), type=pa.float32()), width)
    columns = {"action": action, "timestamp": pa.array((frames / float(fps)).astype(np.float32)),
               "frame_index": pa.array(frames), "episode_index": pa.array(np.full(count, episode_index, np.int64)),
               "index": pa.array(frames), "task_index": pa.array(np.full(count, task_index, np.int64))}
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.table(columns), buffer, compression="snappy")
    return buffer.getvalue().to_pybytes()


def rot6d_to_matrix(rot6d: np.ndarray) -> np.ndarray:
    """``(..., 6)`` -> ``(..., 3, 3)`` by Gram-Schmidt on the two stored columns (Zhou et al. 2019)."""
    r = np.asarray(rot6d, dtype=np.float64)
    a, b = r[..., :3], r[..., 3:6]
    x = a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), 1e-12)
    b = b - (x * b).sum(-1, keepdims=True) * x
    y = b / np.maximum(np.linalg.norm(b, axis=-1, keepdims=True), 1e-12)
    return np.stack([x, y, np.cross(x, y)], axis=-1)


def matrix_to_rot6d(matrix: np.ndarray) -> np.ndarray:
    """``(..., 3, 3)`` -> ``(..., 6)``: first column, then second (the framework's ``rot6d`` layout)."""
    m = np.asarray(matrix, dtype=np.float64)
    return np.concatenate([m[..., :, 0], m[..., :, 1]], axis=-1)


def matrix_to_quaternion(matrix: np.ndarray) -> np.ndarray:
    """``(..., 3, 3)`` -> unit quaternions ``(..., 4)`` as ``(x, y, z, w)`` with ``w >= 0``."""
    from scipy.spatial.transform import Rotation

    m = np.asarray(matrix, dtype=np.float64)
    return Rotation.from_matrix(m.reshape(-1, 3, 3)).as_quat(canonical=True).reshape(m.shape[:-2] + (4,))


def quaternion_to_matrix(quat: np.ndarray) -> np.ndarray:
    """``(..., 4)`` ``(x, y, z, w)`` -> ``(..., 3, 3)``."""
    from scipy.spatial.transform import Rotation

    q = np.asarray(quat, dtype=np.float64)
    return Rotation.from_quat(q.reshape(-1, 4)).as_matrix().reshape(q.shape[:-1] + (3, 3))


def yaw_matrix(yaw: np.ndarray) -> np.ndarray:
    """Rotations about the up (z) axis by ``yaw`` radians."""
    yaw = np.asarray(yaw, dtype=np.float64)
    c, s, zero, one = np.cos(yaw), np.sin(yaw), np.zeros_like(yaw), np.ones_like(yaw)
    return np.stack([np.stack([c, -s, zero], -1), np.stack([s, c, zero], -1), np.stack([zero, zero, one], -1)], -2)


def pose_deltas(translations: np.ndarray, rotations: np.ndarray, grasp: np.ndarray | None = None) -> np.ndarray:
    """Rows ``[translation(3), rot6d(6), grasp...]`` from per-step translations ``(T, 3)`` (in the previous
    pose's frame) and rotation matrices ``(T, 3, 3)``."""
    parts = [np.asarray(translations, dtype=np.float64), matrix_to_rot6d(rotations)]
    if grasp is not None:
        g = np.asarray(grasp, dtype=np.float64)
        parts.append(g[:, None] if g.ndim == 1 else g)
    return np.concatenate(parts, axis=-1).astype(np.float32)


def integrate_poses(actions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Absolute poses from the start: positions ``(T + 1, 3)`` and rotations ``(T + 1, 3, 3)``, chaining each row's
    pose delta (translation and rotation in the moving frame)."""
    a = np.asarray(actions, dtype=np.float64)
    position, rotation = np.zeros(3), np.eye(3)
    positions, rotations = [position], [rotation]
    for row in a:
        position = position + rotation @ row[proto.TRANSLATION]
        rotation = rotation @ rot6d_to_matrix(row[proto.ROTATION_6D])
        positions.append(position)
        rotations.append(rotation)
    return np.asarray(positions), np.asarray(rotations)


def integrate(actions: np.ndarray) -> np.ndarray:
    """Absolute positions ``(T + 1, 3)`` from the start (:func:`integrate_poses`)."""
    return integrate_poses(actions)[0]


def step_errors(predicted: np.ndarray, given: np.ndarray) -> dict[str, np.ndarray]:
    """Per-step errors of a predicted trajectory against the given one (same shape): translation (L2),
    rotation (angle between the rotations, degrees), grasp (absolute), and the end-point drift of the paths."""
    p, g = np.asarray(predicted, dtype=np.float64), np.asarray(given, dtype=np.float64)
    if p.shape != g.shape:
        raise ValidationError("predicted", f"shape {p.shape} differs from the given trajectory's {g.shape}.",
                              "compare trajectories of the same embodiment and length.")
    errors = {"translation": np.linalg.norm(p[:, proto.TRANSLATION] - g[:, proto.TRANSLATION], axis=-1)}
    if p.shape[1] >= proto.POSE_DIM:
        rp, rg = rot6d_to_matrix(p[:, proto.ROTATION_6D]), rot6d_to_matrix(g[:, proto.ROTATION_6D])
        cos = (np.trace(np.swapaxes(rp, -1, -2) @ rg, axis1=-2, axis2=-1) - 1.0) / 2.0
        errors["rotation_deg"] = np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))
        errors["path"] = np.linalg.norm(integrate(p)[1:] - integrate(g)[1:], axis=-1)
    if p.shape[1] > proto.POSE_DIM:
        errors["grasp"] = np.abs(p[:, proto.POSE_DIM:] - g[:, proto.POSE_DIM:]).mean(axis=-1)
    return errors


def normalize(actions: np.ndarray, stats: dict[str, Any], method: str = "quantile") -> np.ndarray:
    """Scale raw actions as the framework's training data was: ``quantile`` maps ``q01..q99`` to -1..1, ``minmax``
    ``min..max``, ``meanstd`` standardises. Inference takes raw actions: this is for comparing with training data."""
    a = np.asarray(actions, dtype=np.float64)
    if method == "meanstd":
        return ((a - _stat(stats, "mean", a)) / np.maximum(_stat(stats, "std", a), 1e-8)).astype(np.float32)
    lo, hi = _bounds(stats, method, a)
    return (2.0 * (a - lo) / np.maximum(hi - lo, 1e-8) - 1.0).astype(np.float32)


def denormalize(actions: np.ndarray, stats: dict[str, Any], method: str = "quantile") -> np.ndarray:
    """The inverse of :func:`normalize`."""
    a = np.asarray(actions, dtype=np.float64)
    if method == "meanstd":
        return (a * _stat(stats, "std", a) + _stat(stats, "mean", a)).astype(np.float32)
    lo, hi = _bounds(stats, method, a)
    return (0.5 * (a + 1.0) * (hi - lo) + lo).astype(np.float32)


def _bounds(stats: dict[str, Any], method: str, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if method not in proto.NORMALIZATION:
        raise ValidationError("method", f"unknown normalisation {method!r}.",
                              f"use one of {', '.join(proto.NORMALIZATION)}.")
    low, high = ("q01", "q99") if method == "quantile" else ("min", "max")
    return _stat(stats, low, a), _stat(stats, high, a)


def _stat(stats: dict[str, Any], key: str, a: np.ndarray) -> np.ndarray:
    if key not in stats:
        raise ValidationError("stats", f"the statistics have no {key!r} (they have {sorted(stats)}).",
                              "pass the embodiment's normalizer stats file (q01/q99, min/max or mean/std).")
    value = np.asarray(stats[key], dtype=np.float64)
    if value.shape[-1] != a.shape[-1]:
        raise ValidationError("stats", f"{key!r} has {value.shape[-1]} values; the rows have {a.shape[-1]}.",
                              "use the statistics of this embodiment.")
    return value
