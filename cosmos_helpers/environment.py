"""What this machine can run: versions, device, guardrails, cache — printed at the top of every cookbook.

Half of all notebook failures are environment failures; showing the facts first makes them obvious.
"""

from __future__ import annotations

import platform
from typing import Any

from .models.tiny import cache_root
from .result import package_versions


def environment_report(*, verbose: bool = True) -> dict[str, Any]:
    """Collect (and by default print) Python, package versions, accelerator and guardrail status."""
    report: dict[str, Any] = {**package_versions(missing="not installed"), "platform": platform.platform(terse=True)}
    try:
        import torch

        cuda = torch.cuda.is_available()
        report.update(cuda=cuda, device=torch.cuda.get_device_name(0) if cuda else
                      f"cpu ({torch.get_num_threads()} threads)", gpus=torch.cuda.device_count())
    except ImportError:
        report.update(cuda=False, device="unknown (torch missing)", gpus=0)
    try:
        from diffusers.utils import is_cosmos_guardrail_available

        report["cosmos_guardrail"] = bool(is_cosmos_guardrail_available())
    except ImportError:
        report["cosmos_guardrail"] = False
    report["model_cache"] = str(cache_root())
    if verbose:
        width = max(map(len, report))
        for key, value in report.items():
            print(f"{key:<{width}}  {value}")
    return report
