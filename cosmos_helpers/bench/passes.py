"""What a computed and a cached guidance pass cost, from one call's step times and its pass schedule.

With step caching a step runs 0, 1 or 2 decoder stacks (two guidance branches, each decided on its own), so step
times fall into groups by how many passes computed; a least-squares line through (computed passes, step seconds)
gives the cost of one computed pass (the slope) and of a step whose passes were all cached (the intercept, which
holds the scheduler step and the embedding / prediction heads of both branches).
"""

from __future__ import annotations

from typing import Sequence


def pass_costs(step_s: Sequence[float], schedule: str) -> dict[str, float | int | None]:
    """``step_s``: seconds of each denoising step (device synchronised); ``schedule``: the manifest's pass schedule
    (``C`` computed, ``.`` cached, in call order). Step 1 is left out (it also packs the prompts). Needs the same
    number of passes in every step (no guidance interval); otherwise only the counts are returned."""
    steps = len(step_s)
    out: dict[str, float | int | None] = {"passes": len(schedule), "passes_computed": schedule.count("C"),
                                          "computed_pass_s": None, "cached_pass_s": None}
    if not steps or len(schedule) % steps:
        return out
    per_step = len(schedule) // steps
    points = [(schedule[i * per_step:(i + 1) * per_step].count("C"), t) for i, t in enumerate(step_s)][1:]
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return out
    mean_x, mean_y = sum(xs) / len(xs), sum(t for _, t in points) / len(points)
    slope = sum((x - mean_x) * (t - mean_y) for x, t in points) / sum((x - mean_x) ** 2 for x in xs)
    intercept = mean_y - slope * mean_x
    out.update(computed_pass_s=round(slope, 4), cached_pass_s=round(intercept / per_step, 4),
               cached_to_computed=round(intercept / per_step / slope, 4) if slope > 0 else None)
    return out
