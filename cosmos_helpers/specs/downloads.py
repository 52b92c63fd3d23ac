"""URL inputs, fetched the way the framework fetches them, into the same cache, so both find the same file.

The framework downloads a ``vision_path`` (``sound_path``, ``action_path``, a hint's ``control_path``) URL to
``$COSMOS_DOWNLOAD_CACHE_DIR/<sha256(url)[:16]>-vision<ext>`` and marks it finished with a ``.done`` file next to
it (``protocol.framework.download_cache_path``). Here a finished cached file is used as it is; a missing one is
downloaded with httpx (with a progress bar) to a temporary name and published with its marker. Without the
variable the cache is ``~/.cache/cosmos-helpers/downloads`` (the framework then uses a fresh temporary folder per
run: set the variable to share one cache). Offline, the error names the URL, the file to place and the variable.
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import media
from ..errors import ValidationError
from ..progress import progress_bar
from ..protocol import framework as fw

DEFAULT_CACHE = Path("~/.cache/cosmos-helpers/downloads")
TIMEOUT_S = 60.0


def cache_dir() -> Path:
    """``$COSMOS_DOWNLOAD_CACHE_DIR``, else this project's default cache folder."""
    return Path(os.environ.get(fw.DOWNLOAD_CACHE_ENV) or DEFAULT_CACHE).expanduser()


def cache_path(url: str, field: str) -> Path:
    """Where ``url`` given in ``field`` (``vision_path``, ``edge.control_path``, ...) is cached."""
    name = fw.DOWNLOAD_NAMES[field.split(".")[-1]] + Path(url.split("?")[0]).suffix.lower()
    path = fw.download_cache_path(url, name, cache_dir())
    assert path is not None
    return path


def fetch(url: str, field: str, *, progress: bool = True) -> Path:
    """The local copy of ``url``: the cached file, or a fresh download into the cache."""
    target = cache_path(url, field)
    marker = Path(f"{target}.done")
    if target.is_file() and marker.is_file():
        return target
    if url.startswith("s3://"):
        raise _offline(url, field, target, "s3:// URLs are fetched by the framework's object store client only")
    try:
        _download(url, target, progress)
    except Exception as exc:  # httpx's transport and status errors, a full disk
        raise _offline(url, field, target, f"{type(exc).__name__}: {exc}") from None
    marker.write_text(url, encoding="utf-8")
    return target


def _download(url: str, target: Path, progress: bool) -> None:
    import httpx

    target.parent.mkdir(parents=True, exist_ok=True)
    with media.atomic_path(target, overwrite=True) as tmp, httpx.stream(
            "GET", url, follow_redirects=True, timeout=TIMEOUT_S) as response:
        response.raise_for_status()
        total = int(response.headers.get("content-length") or 0) or None
        bar = progress_bar(total, f"download {Path(url).name}", "B", enabled=progress, unit_scale=True)
        try:
            with open(tmp, "wb") as handle:
                for chunk in response.iter_bytes():
                    handle.write(chunk)
                    if bar is not None:
                        bar.update(len(chunk))
        finally:
            if bar is not None:
                bar.close()


def _offline(url: str, field: str, target: Path, reason: str) -> ValidationError:
    return ValidationError(
        field, f"cannot download {url} ({reason}).",
        f"place the file at {target} and create an empty {target.name}.done beside it (that is the framework's "
        f"cache layout; ${fw.DOWNLOAD_CACHE_ENV} chooses the folder), or give a local path instead of the URL.")


__all__ = ["DEFAULT_CACHE", "cache_dir", "cache_path", "fetch"]
