"""``cosmos-helpers caption`` and ``cosmos-helpers upsample``."""

from __future__ import annotations

import json

import pytest

from cosmos_helpers import cli
from cosmos_helpers.prompting import blank_caption, check_caption
from cosmos_helpers.standins.chat import ChatStandin


def _main(capsys, *args):
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_caption_check_exit_codes(tmp_path, capsys):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(blank_caption("video")))
    bad.write_text(json.dumps({**blank_caption("video"), "fps": 25}))
    code, out, _ = _main(capsys, "caption", "--check", str(good))
    assert code == 0 and "complete video caption" in out
    code, out, _ = _main(capsys, "caption", "--check", str(bad), "--kind", "video")
    assert code == 1 and "fps: 25 is not an allowed value" in out
    code, out, _ = _main(capsys, "caption", "--check", str(good), "--require-metadata")
    assert code == 1 and "resolution: missing" in out
    code, _, err = _main(capsys, "caption", "--check", str(tmp_path / "none.json"))
    assert code == 1 and "does not exist" in err and len(err.strip().splitlines()) == 1


def test_caption_schema_blank_and_precheck(tmp_path, capsys, monkeypatch):
    code, out, _ = _main(capsys, "caption", "--schema", "image")
    assert code == 0 and json.loads(out)["title"] == "Cosmos3 image caption"
    code, out, _ = _main(capsys, "caption", "--blank", "video")
    assert code == 0 and check_caption(json.loads(out), "video").ok
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))  # no downloaded lists: the known subset
    code, out, _ = _main(capsys, "caption", "--precheck", "the scene feels lifeless")
    assert code == 1 and "'lifeless' matches" in out and "a sample" in out
    folder = tmp_path / "lists"
    (folder / "custom").mkdir(parents=True)
    (folder / "custom" / "words.txt").write_text("sterile\n")
    code, out, _ = _main(capsys, "caption", "--precheck", "the scene feels lifeless", "--blocklist", str(folder))
    assert code == 0 and "no blocklisted words" in out
    with pytest.raises(SystemExit):
        cli.main(["caption"])  # one of --check/--schema/--blank/--precheck is required


def test_upsample_prints_or_writes_and_never_overwrites(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PROMPT_UPSAMPLER_ENDPOINT_URL", raising=False)
    code, _, err = _main(capsys, "upsample", "A red kettle.")
    assert code == 1 and "--endpoint" in err and "PROMPT_UPSAMPLER_ENDPOINT_URL" in err
    with ChatStandin() as server:
        code, out, _ = _main(capsys, "upsample", "A red kettle.", "--endpoint", server.url, "--kind", "image",
                             "--aspect-ratio", "1,1")
        assert code == 0 and json.loads(out)["aspect_ratio"] == "1,1"
        target = tmp_path / "kettle.json"
        assert _main(capsys, "upsample", "A red kettle.", "--endpoint", server.url, "--out", str(target))[0] == 0
        assert check_caption(target, require_metadata=True).ok
        before = target.read_text()
        code, _, err = _main(capsys, "upsample", "Another.", "--endpoint", server.url, "--out", str(target))
        assert code == 1 and "exists" in err and target.read_text() == before
        code, _, err = _main(capsys, "upsample", "A red kettle.", "--endpoint", server.url, "--fps", "25")
        assert code == 1 and "fps: 25 is not allowed" in err


def test_generate_precheck_refuses_before_any_model_loads(tmp_path, capsys, monkeypatch):
    import sys

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    torch_loaded = "torch" in sys.modules
    code, _, err = _main(capsys, "generate", "--mode", "text2image", "--prompt", "a lifeless street",
                         "--precheck", "refuse", "--out", str(tmp_path))
    assert code == 1 and "'lifeless' matches" in err and "nothing sent" in err
    assert list(tmp_path.glob("*.png")) == [] and ("torch" in sys.modules) == torch_loaded
