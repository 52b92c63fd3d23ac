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


def test_progress_can_be_turned_off(monkeypatch, capsys):
    """Off is still a bar (callers need no ``None`` checks) that counts, closes and prints nothing."""
    monkeypatch.setenv("COSMOS_HELPERS_NO_PROGRESS", "1")
    with progress.progress_bar(10, "x") as bar:
        bar.update(3)
        bar.set_postfix_str("busy")
    assert type(bar) is progress.NullProgress and bar.n == 3
    monkeypatch.delenv("COSMOS_HELPERS_NO_PROGRESS")
    assert type(progress.progress_bar(10, "x", enabled=False)) is progress.NullProgress
    assert capsys.readouterr() == ("", "")


def test_line_progress_has_every_method_the_package_calls_on_a_bar():
    """Static runs (papermill, ``run-cookbooks``) get a LineProgress where live ones get tqdm: any tqdm method
    our code calls on a bar must exist on it too, or the cookbook fails only in batch runs."""
    import re
    from pathlib import Path

    import cosmos_helpers

    root = Path(cosmos_helpers.__file__).parent
    called = set()
    for path in root.rglob("*.py"):
        called |= set(re.findall(r"\bbar\.([a-z_]+)\(", path.read_text()))
    called -= {"get_x", "get_width", "get_height"}  # matplotlib bars in the benchmark chart
    assert called, "the scan found no progress-bar calls: the pattern no longer matches the code"
    for kind in (progress.LineProgress, progress.NullProgress):
        missing = sorted(name for name in called if not callable(getattr(kind, name, None)))
        assert not missing, f"{kind.__name__} lacks {missing}"


def test_set_description_shows_in_the_summary_line(capsys):
    bar = progress.LineProgress(total=4, desc="transfer", unit="step")
    bar.set_description("transfer chunk 2/2")
    bar.update(4)
    bar.close()
    assert capsys.readouterr().out.startswith("transfer chunk 2/2: 4/4 step in ")
