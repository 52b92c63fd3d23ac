"""Still images: reading, checking before any work, encoding, and the conversions every frame goes through."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ValidationError
from .atomic import write_bytes_atomic

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".bmp")


def load_image(source: Any):
    """An RGB PIL image from a path, a PIL image or an ``HxWx3`` (or ``HxW``) array."""
    from PIL import Image
    if isinstance(source, (str, Path)):
        with Image.open(source) as img:
            return img.convert("RGB")
    if isinstance(source, Image.Image):
        return source.convert("RGB")
    if isinstance(source, np.ndarray):
        return Image.fromarray(to_uint8(source if source.ndim == 3 else source[..., None].repeat(3, -1)))
    raise TypeError(f"cannot read an image from {type(source).__name__}")


def check_image(source: Any, *, field: str = "image") -> None:
    """Fail now, with the field named, if ``source`` cannot become an RGB image."""
    from PIL import Image, UnidentifiedImageError
    if isinstance(source, (str, Path)):
        path = _existing(source, field, "image")
        try:
            with Image.open(path) as img:
                img.verify()
        except (UnidentifiedImageError, OSError, SyntaxError) as exc:
            raise ValidationError(field, f"{path} is not a readable image ({exc}).",
                                  "give a PNG, JPEG or WebP file.") from None
        return
    if isinstance(source, Image.Image):
        return
    if isinstance(source, np.ndarray):
        if (source.ndim == 3 and source.shape[-1] in (3, 4)) or source.ndim == 2:
            if min(source.shape[:2]) < 1:
                raise ValidationError(field, f"the image array is empty ({source.shape}).", "pass an HxWx3 array.")
            return
        raise ValidationError(field, f"an image array must be HxWx3, got shape {source.shape}.",
                              "pass an HxWx3 uint8 array (or a PIL image / file path).")
    raise ValidationError(field, f"cannot use a {type(source).__name__} as an image.",
                          "pass a file path, a PIL image or an HxWx3 uint8 array.")


def _existing(source: str | Path, field: str, kind: str) -> Path:
    path = Path(source)
    if not path.is_file():
        raise ValidationError(field, f"{kind} file {path} does not exist.",
                              f"check the path (relative paths are resolved from {Path.cwd()}).")
    return path


def image_bytes(frame: np.ndarray, fmt: str = "PNG", *, quality: int = 95) -> bytes:
    """One frame encoded as PNG, JPEG or WebP (``quality`` for the lossy ones)."""
    from PIL import Image
    buffer = io.BytesIO()
    options = {} if fmt.upper() == "PNG" else {"quality": int(quality)}
    Image.fromarray(to_uint8(frame)).save(buffer, format=fmt.upper(), **options)
    return buffer.getvalue()


def write_png(path: str | Path, frame: np.ndarray, *, overwrite: bool = False) -> Path:
    return write_bytes_atomic(path, image_bytes(frame, "PNG"), overwrite=overwrite)


def read_image(path: str | Path) -> np.ndarray:
    """A still image file as uint8 ``(H, W, 3)``."""
    return np.asarray(load_image(path))


def to_uint8(array: np.ndarray) -> np.ndarray:
    """Float frames in [0, 1] become uint8 the way diffusers' PIL output does (round half to even x 255)."""
    array = np.asarray(array)
    if array.dtype == np.uint8:
        return array
    if np.issubdtype(array.dtype, np.floating):
        return np.clip(np.round(array * 255.0), 0, 255).astype(np.uint8)
    return np.clip(array, 0, 255).astype(np.uint8)


def center_crop_to_aspect(image, width: int, height: int):
    """Crop a PIL image to the target aspect (centre), keeping as many pixels as possible, so a server that
    stretches an input to ``WxH`` leaves it undistorted."""
    src_w, src_h = image.size
    target = width / height
    if abs(src_w / src_h - target) < 1e-3:
        return image
    new_w, new_h = min(src_w, max(1, round(src_h * target))), min(src_h, max(1, round(src_w / target)))
    left, top = (src_w - new_w) // 2, (src_h - new_h) // 2
    return image.crop((left, top, left + new_w, top + new_h))
