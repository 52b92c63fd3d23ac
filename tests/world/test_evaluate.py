"""The held-out evaluation runs through a real backend and reports what it measured (on the random tiny model the
rates mean nothing; the trained model's targets are for issue 16's meaning tests)."""

from __future__ import annotations

import math

import pytest

from cosmos_helpers.world.evaluate import evaluate


@pytest.mark.slow
def test_every_check_runs_and_reports(tiny_backend):
    report = evaluate(tiny_backend, n=2, seed=0)
    summary = report.summary()
    assert set(report.rows) == {"text2video", "image2video", "video2video", "transfer"}
    assert all(len(rows) == 2 for rows in report.rows.values())
    assert all(row["frames"].shape == (9, 96, 160, 3) for rows in report.rows.values() for row in rows)
    assert 0 <= summary["t2v_colour"] <= 1 and not math.isnan(summary["v2v_join_over_step"])
    assert 0 <= summary["transfer_f1_shuffled"] <= 1 and summary["i2v_first_frame_psnr_min"] > 0
