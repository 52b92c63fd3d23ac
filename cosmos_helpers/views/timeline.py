"""``batch_timeline``: where and when each item of one or more batches ran, and how long each took."""

from __future__ import annotations

from typing import Any, Sequence

from ..display import present_figure
from .plots import new_figure, shorten


def batch_timeline(*results: Any, labels: Sequence[str] | None = None, figsize: tuple[float, float] = (11, 4.5),
                   dpi: int = 100, display: bool = True):
    """The timeline per worker and the time per item of ``results`` (:class:`~cosmos_helpers.batch.BatchResult`),
    ``labels`` naming them (default: where each ran); ``display=False`` returns the ``Figure``."""
    if not results:
        raise ValueError("batch_timeline needs at least one batch result")
    names = list(labels) if labels is not None else [r.where for r in results]
    fig = new_figure(figsize, dpi)
    timeline, times = fig.subplots(1, 2, width_ratios=(3, 2))
    rows: list[str] = []
    for index, (result, name) in enumerate(zip(results, names)):
        colour = f"C{index}"  # matplotlib's colour cycle
        made = [r for r in result.records if r.status in ("ok", "failed") and r.seconds is not None]
        workers = sorted({str(r.worker) for r in made})
        for worker in workers:
            rows.append(f"{shorten(name, 34)}\n{worker}")
            y = len(rows) - 1
            for record in (r for r in made if str(r.worker) == worker):
                timeline.barh(y, record.seconds, left=record.started, height=0.6, color=colour,
                              edgecolor="white", alpha=1.0 if record.status == "ok" else 0.35)
        offsets = [i + index * 0.8 / len(results) for i in range(len(result.records))]
        times.bar(offsets, [r.seconds or 0 for r in result.records], width=0.8 / len(results), color=colour,
                  label=shorten(name, 34))
    timeline.set_yticks(range(len(rows)), rows, fontsize=7)
    timeline.invert_yaxis()
    timeline.set_xlabel("seconds since the batch began")
    timeline.set_title("items per worker", fontsize=10)
    first = results[0].records
    times.set_xticks(range(len(first)), [r.name for r in first], rotation=90, fontsize=7)
    times.set_ylabel("seconds per item")
    times.set_title("time per item", fontsize=10)
    times.legend(fontsize=7)
    return present_figure(fig, display=display)
