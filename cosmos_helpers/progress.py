"""One progress-bar factory for denoising, server waits, job polling and framework logs.

Live: a tqdm bar. In static runs (``display.is_static``) a widget would be saved as a placeholder and a text bar as
half-drawn bars, so progress is a log line every ``STATIC_INTERVAL_S`` seconds and a summary line at the end.
``COSMOS_HELPERS_NO_PROGRESS=1`` turns it off (callers still get a bar, one that shows nothing).
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import AbstractContextManager
from typing import Any

from .display import is_static

STATIC_INTERVAL_S = 30.0


def progress_bar(total: float | None = None, desc: str = "", unit: str = "it", *, enabled: bool = True,
                 leave: bool = False, **kwargs: Any):
    """A tqdm bar in a live notebook or terminal, a log-line reporter in static runs, or a :class:`NullProgress`
    when off: always a bar with tqdm's methods that callers use, and a context manager that closes it."""
    if not enabled or os.environ.get("COSMOS_HELPERS_NO_PROGRESS"):
        return NullProgress(total=total, desc=desc, unit=unit)
    if is_static() and not sys.stderr.isatty():
        return LineProgress(total=total, desc=desc, unit=unit)
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit=unit, leave=leave, **kwargs)


class NullProgress(AbstractContextManager):
    """The subset of tqdm's interface our callers use, counting and showing nothing (progress turned off)."""

    def __init__(self, total: float | None = None, desc: str = "", unit: str = "it") -> None:
        self.total, self.desc, self.unit = total, desc, unit
        self.n: float = 0
        self.postfix = ""

    def update(self, amount: float = 1) -> None:
        self.n += amount
        self.refresh()

    def set_postfix_str(self, text: str = "", refresh: bool = True) -> None:
        self.postfix = text
        self.refresh()

    def set_description(self, desc: str | None = None, refresh: bool = True) -> None:
        self.desc = desc or ""
        self.refresh()

    def refresh(self) -> None:
        pass

    def close(self) -> None:
        pass

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LineProgress(NullProgress):
    """Progress reported as occasional plain lines on stdout, and one summary line when closed."""

    def __init__(self, total: float | None = None, desc: str = "", unit: str = "it") -> None:
        super().__init__(total, desc, unit)
        self._start = self._last = time.monotonic()
        self._closed = False

    def refresh(self) -> None:
        now = time.monotonic()
        if now - self._last >= STATIC_INTERVAL_S:
            self._last = now
            print(self._line(now), flush=True)

    def _line(self, now: float) -> str:
        done = f"{self.n:g}/{self.total:g}" if self.total else f"{self.n:g}"
        extra = f", {self.postfix}" if self.postfix else ""
        return f"{self.desc}: {done} {self.unit} in {now - self._start:.1f} s{extra}"

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            print(self._line(time.monotonic()), flush=True)
