"""Progress: widgets live, one readable line in executed notebooks, nothing when turned off."""

from cosmos_helpers import progress


def test_static_runs_get_a_summary_line_instead_of_a_bar(monkeypatch, capsys):
    monkeypatch.delenv("COSMOS_HELPERS_NO_PROGRESS", raising=False)
    monkeypatch.setenv("COSMOS_HELPERS_STATIC", "1")
    bar = progress.progress_bar(4, "text2video denoising", "step")
    assert isinstance(bar, progress.LineProgress)
    for _ in range(4):
        bar.update(1)
    bar.close()
    bar.close()
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("text2video denoising: 4/4 step in ")


def test_long_static_runs_report_a_heartbeat(monkeypatch, capsys):
    monkeypatch.setattr(progress, "STATIC_INTERVAL_S", 0.0)
    bar = progress.LineProgress(total=100, desc="job", unit="%")
    bar.n = 40
    bar.set_postfix_str("in_progress")
    assert "job: 40/100 % in" in capsys.readouterr().out and "in_progress" in bar._line(0)


def test_progress_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("COSMOS_HELPERS_NO_PROGRESS", "1")
    assert progress.progress_bar(10, "x") is None
    monkeypatch.delenv("COSMOS_HELPERS_NO_PROGRESS")
    assert progress.progress_bar(10, "x", enabled=False) is None
