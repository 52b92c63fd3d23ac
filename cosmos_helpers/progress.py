"""One progress-bar factory for denoising, server waits, job polling and framework logs.

In a live Jupyter kernel a widget bar is nicest; in papermill/nbconvert runs (``COSMOS_HELPERS_STATIC=1``)
a widget would be saved as an unrenderable placeholder, so plain text bars are used there instead.
``COSMOS_HELPERS_NO_PROGRESS=1`` turns bars off entirely (tests, logs).
"""

from __future__ import annotations

import os
from typing import Any


def progress_enabled() -> bool:
    return not os.environ.get("COSMOS_HELPERS_NO_PROGRESS")


def progress_bar(total: float | None = None, desc: str = "", unit: str = "it", *, enabled: bool = True, **kwargs: Any):
    """A tqdm bar (widget in a live notebook, text elsewhere), or ``None`` when progress is off."""
    if not enabled or not progress_enabled():
        return None
    if os.environ.get("COSMOS_HELPERS_STATIC"):
        from tqdm import tqdm
    else:
        from tqdm.auto import tqdm
    return tqdm(total=total, desc=desc, unit=unit, leave=False, **kwargs)
