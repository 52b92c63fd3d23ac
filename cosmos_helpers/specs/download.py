"""Downloading a URL, streamed (never whole in memory), with an optional size cap checked as the bytes arrive: for the
remote inputs of framework input files and the references the vLLM-Omni stand-in fetches."""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import httpx

from ..progress import progress_bar


class TooLarge(Exception):
    """The answer passed ``max_bytes`` (deliberately not a ``ValueError``: callers map it to its own answer)."""


def download(url: str, sink: BinaryIO, *, timeout: float, max_bytes: int | None = None,
             progress: bool = False) -> int:
    """Stream ``url`` into ``sink``; returns the bytes written. Raises ``httpx`` errors and :class:`TooLarge`."""
    size = 0
    with httpx.stream("GET", url, follow_redirects=True, timeout=timeout) as response:
        response.raise_for_status()
        total = int(response.headers.get("content-length") or 0) or None
        with progress_bar(total, f"download {Path(url).name}", "B", enabled=progress, unit_scale=True) as bar:
            for chunk in response.iter_bytes(1 << 16):
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise TooLarge(f"{url} is larger than {max_bytes} bytes")
                sink.write(chunk)
                bar.update(len(chunk))
    return size
