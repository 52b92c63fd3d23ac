"""Reading a framework run's log as it streams: the step counters it prints move a progress bar."""

from __future__ import annotations

import re
from typing import Any, Sequence

_STEP_PATTERN = re.compile(r"(?<![\d.])(\d{1,5})\s*/\s*(\d{1,5})(?![\d.])")


class StepProgress:
    """Moves a bar by the run log's step counters (the last ``done/total`` of a line).

    One sample: the bar follows whatever counter the log shows. A batch (``steps``: each sample's step count, in
    order): the samples run one after another and each counts its own steps from the start, so the bar covers
    them all; a counter that goes back is the next sample's, and counters of another size (loading) are skipped.
    """

    def __init__(self, bar: Any, steps: Sequence[int] = ()) -> None:
        self.bar, self.steps = bar, list(steps)
        self.done_before = self.last = self.last_total = 0
        if bar is not None and len(self.steps) > 1:
            bar.total = sum(self.steps)

    def update(self, line: str) -> None:
        for done, total in _STEP_PATTERN.findall(line)[-1:] if self.bar is not None else ():
            done_i, total_i = int(done), int(total)
            if not (0 < total_i < 10000 and 0 <= done_i <= total_i):
                continue
            if len(self.steps) <= 1:
                if self.bar.total != total_i:
                    self.bar.total, self.bar.n = total_i, 0
                self.bar.n = done_i
            elif total_i in self.steps:
                if done_i < self.last:
                    self.done_before += self.last_total
                self.last, self.last_total = done_i, total_i
                self.bar.n = min(self.done_before + done_i, self.bar.total)
            else:
                continue
            self.bar.refresh()


