"""What a conditioning input was, for manifests and fingerprints: its path, or its shape, and a content hash."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from .atomic import file_sha256
from .image import load_image
from .video import load_video_frames


def describe_media(source: Any) -> dict[str, Any]:
    """A JSON-safe description of a conditioning input: its path (if any) and a content hash."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        return {"path": str(path), "sha256": file_sha256(path) if path.is_file() else None}
    if isinstance(source, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(source).tobytes()).hexdigest()
        return {"array": list(source.shape), "sha256": digest}
    try:
        array = np.asarray(load_image(source))
    except TypeError:
        array = load_video_frames(source)[0]
    return {"array": list(array.shape), "sha256": hashlib.sha256(array.tobytes()).hexdigest()}
