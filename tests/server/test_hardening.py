"""Server hardening: size/pixel/frame/prompt limits, the bounded queue (429 + Retry-After, a stand-in feature),
job expiry and deletion, job-id validation, server-local paths only under the allowed media root, the API key
and the loopback-binding warning. Each server here is in-process (ThreadedServer) on 127.0.0.1, on the
model-free double unless the test says otherwise."""

from __future__ import annotations

import io
import json
import os
import time

import httpx
import numpy as np
import pytest

from cosmos_helpers import Generation, media
from cosmos_helpers.standins.vllm_omni.settings import ServerLimits, binding_warning, is_loopback
from cosmos_helpers.standins.vllm_omni.local import ThreadedServer

from .doubles import InstantBackend

FORM = {"prompt": "a robot", "size": "32x32", "num_frames": "5", "num_inference_steps": "1", "seed": "1"}


def parts(fields: dict, files: dict | None = None) -> list:
    return [(k, (None, v)) for k, v in fields.items()] + list((files or {}).items())


def envelope(response, status: int, text: str = "") -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status and text in error["message"], error
    assert {"message", "type", "param", "code"} <= set(error)
    return error


def png(width: int, height: int) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (width, height), (10, 200, 30)).save(buffer, "PNG")
    return buffer.getvalue()


def mp4(tmp_path, frames: int, fps: float = 24, side: int = 32) -> bytes:
    path = tmp_path / f"v{frames}_{side}.mp4"
    media.write_mp4(path, np.zeros((frames, side, side, 3), dtype=np.uint8), fps)
    return path.read_bytes()


@pytest.fixture(scope="module")
def media_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("media-root")
    outside = tmp_path_factory.mktemp("outside")
    (outside / "secret.mp4").write_bytes(b"secret")
    (outside / "secret.txt").write_text("the secret prompt")
    media.write_mp4(root / "edge.mp4", np.zeros((5, 32, 32, 3), dtype=np.uint8), 24)
    (root / "ball.png").write_bytes(png(32, 32))
    (root / "caption.txt").write_text("a robot from a prompt file")
    os.symlink(outside / "secret.mp4", root / "link.mp4")
    return root, outside


@pytest.fixture(scope="module")
def strict(tmp_path_factory, media_root):
    """Tight limits, a recording transfer runner, an allowed media root."""
    seen: list = []

    def runner(form, extra, rgb, controls):
        seen.append(controls)
        return Generation(frames=media.read_video(next(iter(controls.values()))).frames, fps=24.0, seed=0)

    limits = ServerLimits(max_request_bytes=512 * 1024, max_field_bytes=16 * 1024, max_image_pixels=64 * 64,
                          max_video_frames=9, max_video_seconds=0.5, max_prompt_chars=100,
                          max_output_pixels=64 * 64, max_output_frames=17, max_queue=8, job_ttl=0,
                          allowed_local_media_paths=(str(media_root[0]),))
    with ThreadedServer(InstantBackend(), storage_dir=tmp_path_factory.mktemp("strict"), limits=limits,
                        transfer_runner=runner) as server:
        server.seen = seen
        yield server


# sizes, pixels, frames, prompts ------------------------------------------------------------------------------


def test_body_limits_are_413_and_field_limits_400(strict):
    url = strict.url
    envelope(httpx.post(f"{url}/v1/videos/sync", files=parts(FORM, {"input_reference": ("x.mp4", b"\0" * 600_000)})),
             413, "larger than the limit of 524288 bytes")
    # a text part over its cap: Starlette's multipart answer, as on vLLM-Omni (whose cap is Starlette's 1 MiB)
    envelope(httpx.post(f"{url}/v1/videos", files=parts({**FORM, "negative_prompt": "n" * 20_000})), 400,
             "Part exceeded maximum size of 16KB")
    envelope(httpx.post(f"{url}/v1/images/generations", json={"prompt": "x", "extra_params": {"a": "b" * 20_000}}),
             413, "limit of 16384")
    assert httpx.get(f"{url}/health").status_code == 200  # the server is fine afterwards


def test_decoded_media_limits_are_400(strict, tmp_path):
    url = strict.url
    sync = f"{url}/v1/videos/sync"
    envelope(httpx.post(sync, files=parts(FORM, {"input_reference": ("big.png", png(80, 80))})), 400,
             "above the limit of 4096")
    envelope(httpx.post(sync, files=parts(FORM, {"input_reference": ("long.mp4", mp4(tmp_path, 13))})), 400,
             "13 frames, above the limit of 9")
    envelope(httpx.post(sync, files=parts(FORM, {"input_reference": ("slow.mp4", mp4(tmp_path, 9, fps=8))})), 400,
             "above the limit of 0.5 s")
    envelope(httpx.post(sync, files=parts(FORM, {"input_reference": ("wide.mp4", mp4(tmp_path, 5, side=96))})), 400,
             "pixels")
    ok = httpx.post(sync, files=parts(FORM, {"input_reference": ("ok.png", png(32, 32))}), timeout=30)
    assert ok.status_code == 200, ok.text


def test_prompt_and_output_limits_are_400(strict):
    url = strict.url
    envelope(httpx.post(f"{url}/v1/videos/sync", files=parts({**FORM, "prompt": "p" * 101})), 400,
             "101 characters, above the limit of 100")
    envelope(httpx.post(f"{url}/v1/images/generations", json={"prompt": "p" * 101}), 400, "limit of 100")
    caption = '{"a":' + "[" * 33 + "]" * 33 + "}"  # a JSON caption nested 34 deep (limit 32), 72 characters
    envelope(httpx.post(f"{url}/v1/videos/sync", files=parts({**FORM, "prompt": caption})), 400,
             "nested deeper than 32")
    envelope(httpx.post(f"{url}/v1/videos/sync", files=parts({**FORM, "size": "128x128"})), 400,
             "above the limit of 4096")
    envelope(httpx.post(f"{url}/v1/videos/sync", files=parts({**FORM, "num_frames": "21"})), 400,
             "above the limit of 17 frames")
    envelope(httpx.post(f"{url}/v1/videos/sync", files=parts({**FORM, "num_frames": "", "seconds": "999999999"})),
             400, "above the limit of 17 frames")
    envelope(httpx.post(f"{url}/v1/images/generations", json={"prompt": "x", "size": "4096x4096"}), 400, "pixels")


# local paths ---------------------------------------------------------------------------------------------------


def test_local_paths_only_under_the_allowed_root(strict, media_root, tmp_path):
    root, outside = media_root
    sync = f"{strict.url}/v1/videos/sync"
    rgb = {"input_reference": ("rgb.mp4", mp4(tmp_path, 5))}

    def transfer(hint):
        return httpx.post(sync, files=parts({**FORM, "extra_params": json.dumps({"edge": hint})}, rgb), timeout=30)

    for hint in [str(outside / "secret.mp4"), {"control_path": str(outside / "secret.mp4")},
                 {"control_path": str(root / ".." / outside.name / "secret.mp4")},  # '..' out of the root
                 {"control_path": str(root / "link.mp4")},  # a symlink inside pointing outside
                 "/etc/passwd", {"control_path": str(root / "missing.mp4")}]:
        error = envelope(transfer(hint), 400)
        assert "allowed media path" in error["message"], error
    allowed = transfer({"control_path": str(root / "sub" / ".." / "edge.mp4")})
    assert allowed.status_code == 200, allowed.text
    assert strict.seen[-1]["edge"] == (root / "edge.mp4").resolve()  # the runner got the resolved path

    def by_url(url):
        return httpx.post(sync, files=parts({**FORM, "image_reference": json.dumps({"image_url": url})}), timeout=30)

    envelope(by_url(f"file://{outside / 'secret.mp4'}"), 400, "outside the allowed media path")
    envelope(by_url(f"file://{root}/../{outside.name}/secret.mp4"), 400, "outside the allowed media path")
    assert by_url(f"file://{root / 'ball.png'}").status_code == 200


def test_no_local_paths_without_a_root(tmp_path, media_root):
    _, outside = media_root
    with ThreadedServer(InstantBackend(), storage_dir=tmp_path, transfer_runner=lambda *a: None) as server:
        response = httpx.post(f"{server.url}/v1/videos/sync", files=parts(
            {**FORM, "extra_params": json.dumps({"edge": {"control_path": str(outside / "secret.mp4")}})},
            {"input_reference": ("rgb.mp4", mp4(tmp_path, 5))}))
        envelope(response, 400, "server-local paths are not accepted")
        by_url = {**FORM, "image_reference": json.dumps({"image_url": f"file://{outside / 'secret.mp4'}"})}
        envelope(httpx.post(f"{server.url}/v1/videos/sync", files=parts(by_url)), 400,
                 "server-local paths are not accepted")


def test_remote_urls_are_fetched_only_when_allowed(tmp_path):
    """By default the server never fetches a URL for a client (no SSRF); --allow-url-fetch matches vLLM-Omni."""
    import http.server
    import threading

    served = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            served.append(self.path)
            body = png(32, 32)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    origin = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=origin.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{origin.server_address[1]}/internal.png"
    form = {**FORM, "image_reference": json.dumps({"image_url": url})}
    try:
        with ThreadedServer(InstantBackend(), storage_dir=tmp_path / "a") as server:
            envelope(httpx.post(f"{server.url}/v1/videos/sync", files=parts(form), timeout=30), 400,
                     "does not fetch URLs")
        assert served == []
        with ThreadedServer(InstantBackend(), storage_dir=tmp_path / "b",
                            limits=ServerLimits(allow_url_fetch=True)) as server:
            assert httpx.post(f"{server.url}/v1/videos/sync", files=parts(form), timeout=30).status_code == 200
        assert served == ["/internal.png"]
    finally:
        origin.shutdown()
        origin.server_close()


def test_limits_resolve_roots_with_realpath(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "a.mp4").write_bytes(b"x")
    os.symlink(tmp_path / "root", tmp_path / "alias")
    limits = ServerLimits(allowed_local_media_paths=(str(tmp_path / "alias"),))
    assert limits.local_path(str(tmp_path / "root" / "a.mp4"), "x") == (tmp_path / "root" / "a.mp4").resolve()
    with pytest.raises(PermissionError):
        limits.local_path(str(tmp_path / "rootx" / "a.mp4"), "x")  # a sibling sharing the prefix
    with pytest.raises(PermissionError):
        limits.local_path("a.mp4\x00", "x")


# queue, jobs ---------------------------------------------------------------------------------------------------


def test_bounded_queue_answers_429_with_retry_after(tmp_path):
    with ThreadedServer(InstantBackend(step_seconds=0.05), storage_dir=tmp_path, max_queue=1) as server:
        url = server.url
        running = httpx.post(f"{url}/v1/videos", files=parts({**FORM, "num_inference_steps": "200"})).json()
        deadline = time.monotonic() + 10
        while httpx.get(f"{url}/v1/videos/{running['id']}").json()["status"] != "in_progress":
            assert time.monotonic() < deadline
            time.sleep(0.01)
        waiting = httpx.post(f"{url}/v1/videos", files=parts({**FORM, "num_inference_steps": "2"}))
        assert waiting.status_code == 200
        for route in ("/v1/videos", "/v1/videos/sync"):
            rejected = httpx.post(f"{url}{route}", files=parts(FORM, {"input_reference": ("a.png", png(32, 32))}))
            error = envelope(rejected, 429, "Server busy: 1 generations are already queued (limit 1)")
            assert error["type"] == "Too Many Requests" and int(rejected.headers["retry-after"]) >= 1
        envelope(httpx.post(f"{url}/v1/images/generations", json={"prompt": "x", "size": "32x32"}), 429)
        listed = httpx.get(f"{url}/v1/videos").json()["data"]
        assert {job["id"] for job in listed} == {running["id"], waiting.json()["id"]}  # no record for a 429
        uploads = server.app.state.server.upload_dir
        assert not uploads.exists() or list(uploads.iterdir()) == []  # rejected uploads removed
        for job in (running, waiting.json()):
            assert httpx.delete(f"{url}/v1/videos/{job['id']}", timeout=10).status_code == 200


def test_unbounded_queue_like_vllm(tmp_path):
    """``max_queue=0``: every request is accepted and waits its turn, as on vLLM-Omni (no 429 anywhere)."""
    with ThreadedServer(InstantBackend(step_seconds=0.01), storage_dir=tmp_path, max_queue=0) as server:
        jobs = [httpx.post(f"{server.url}/v1/videos", files=parts({**FORM, "num_inference_steps": "5"}))
                for _ in range(40)]
        assert {response.status_code for response in jobs} == {200}
        for response in jobs:
            httpx.delete(f"{server.url}/v1/videos/{response.json()['id']}", timeout=10)


@pytest.mark.slow
def test_job_files_removed_on_delete_and_expired_after_ttl(tmp_path):
    storage = tmp_path / "store"
    storage.mkdir()
    stale = storage / ("video_gen_" + "a" * 32 + ".mp4")
    stale.write_bytes(b"left by an earlier server")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    # 5 s: long enough that the first job outlives the checks before its DELETE on a loaded machine
    with ThreadedServer(InstantBackend(), storage_dir=storage, job_ttl=5.0) as server:
        url = server.url
        assert not stale.exists()  # swept at startup: older than the TTL, owned by no job
        first = httpx.post(f"{url}/v1/videos", files=parts(FORM)).json()
        second = httpx.post(f"{url}/v1/videos", files=parts(FORM)).json()
        done = {}
        for job in (first, second):
            deadline = time.monotonic() + 20
            while (state := httpx.get(f"{url}/v1/videos/{job['id']}").json())["status"] != "completed":
                assert time.monotonic() < deadline
                time.sleep(0.02)
            done[job["id"]] = state
            assert (storage / f"{job['id']}.mp4").is_file()
            assert state["expires_at"] is not None and state["expires_at"] >= state["completed_at"]
        assert httpx.delete(f"{url}/v1/videos/{first['id']}").json()["deleted"] is True
        assert not (storage / f"{first['id']}.mp4").exists()
        deadline = time.monotonic() + 30
        while httpx.get(f"{url}/v1/videos/{second['id']}").status_code != 404:
            assert time.monotonic() < deadline, "the job never expired"
            time.sleep(0.1)
        assert not (storage / f"{second['id']}.mp4").exists()
        envelope(httpx.get(f"{url}/v1/videos/{second['id']}/content"), 404, "Video not found")


def test_a_server_without_a_storage_folder_cleans_up_its_own(monkeypatch, tmp_path):
    """The scratch folder a server makes for itself goes with it; a folder it was given stays."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    with ThreadedServer(InstantBackend()) as server:
        scratch = server.app.state.server.storage
        assert scratch.parent == tmp_path and scratch.is_dir()
        job = httpx.post(f"{server.url}/v1/videos", files=parts(FORM)).json()
        deadline = time.monotonic() + 20  # its video is in the folder before the server goes
        while httpx.get(f"{server.url}/v1/videos/{job['id']}").json()["status"] != "completed":
            assert time.monotonic() < deadline
            time.sleep(0.02)
        assert (scratch / f"{job['id']}.mp4").is_file()
    assert not scratch.exists()
    given = tmp_path / "given"
    with ThreadedServer(InstantBackend(), storage_dir=given):
        pass
    assert given.is_dir()


def test_job_ids_are_validated_before_touching_files(tmp_path):
    from cosmos_helpers.standins.vllm_omni.state import JobStore

    store = JobStore(tmp_path)
    for bad in ["../etc/passwd", "video_gen_" + "0" * 31, "video_gen_" + "G" * 32, "video_gen_" + "0" * 32 + "/x",
                "/abs/video_gen_" + "0" * 32]:
        with pytest.raises(ValueError):
            store.path_for(bad)
    assert store.path_for("video_gen_" + "0" * 32).parent == tmp_path


# key, binding --------------------------------------------------------------------------------------------------


def test_api_key_and_odd_headers(tmp_path):
    with ThreadedServer(InstantBackend(), storage_dir=tmp_path, api_key="s3cret") as locked:
        assert httpx.get(f"{locked.url}/health").status_code == 200  # health is open, as on vLLM
        envelope(httpx.get(f"{locked.url}/v1/models"), 401, "Unauthorized")
        for header in [b"Bearer \xff\xfe", b"Bearer s3cret2", b"bearer", b"Basic czNjcmV0", b"Bearer " + b"x" * 8000,
                       b"Bearer s3cre", b"Bearer  s3cret"]:
            response = httpx.get(f"{locked.url}/v1/models", headers={"Authorization": header})
            envelope(response, 401, "Unauthorized")
        envelope(httpx.post(f"{locked.url}/v1/videos", files=parts(FORM)), 401, "Unauthorized")  # before the body
        assert httpx.get(f"{locked.url}/v1/models", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert httpx.get(f"{locked.url}/v1/models", headers={"Authorization": "bearer s3cret"}).status_code == 200


def test_loopback_default_and_loud_warning(capsys, monkeypatch):
    import uvicorn

    from cosmos_helpers import cli

    assert is_loopback("127.0.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    assert binding_warning("127.0.0.1", None) is None and binding_warning("0.0.0.0", "key") is None
    assert "WITHOUT an API key" in binding_warning("0.0.0.0", None)
    parser = cli.build_parser()
    args = parser.parse_args(["serve"])
    assert args.host == "127.0.0.1" and args.max_queue == 32 and args.job_ttl == 3600
    monkeypatch.setattr(uvicorn.Server, "run", lambda self: None)  # nothing is bound
    monkeypatch.delenv("COSMOS3_VLLM_API_KEY", raising=False)
    args = parser.parse_args(["serve", "--host", "0.0.0.0", "--port", "1", "--max-queue", "3", "--job-ttl", "5",
                              "--allowed-local-media-path", "/tmp", "--api-key", ""])
    from cosmos_helpers.standins.vllm_omni.cli import run

    assert run(args) == 0
    captured = capsys.readouterr()
    assert "WITHOUT an API key" in captured.err
    assert "queue 3" in captured.out and "job TTL 5 s" in captured.out
    with pytest.warns(UserWarning, match="WITHOUT an API key"):
        ThreadedServer(InstantBackend(), host="0.0.0.0", port=1)  # constructed only, never started


def test_serve_help_documents_every_limit():
    from cosmos_helpers import cli

    text = cli.build_parser()._subparsers._group_actions[0].choices["serve"].format_help()
    for flag in ("--max-upload-mb", "--max-field-kb", "--max-image-pixels", "--max-video-frames",
                 "--max-video-seconds", "--max-prompt-chars", "--max-output-pixels", "--max-output-frames",
                 "--max-queue", "--job-ttl", "--allowed-local-media-path", "--allow-url-fetch"):
        assert flag in text
    assert "default" in text and "429" in text and "413" in text


def test_real_tiny_model_behind_the_limits(tmp_path, tiny_backend):
    """The hardened server with the real (tiny) Diffusers model still generates."""
    with ThreadedServer(tiny_backend, storage_dir=tmp_path, max_queue=2, job_ttl=60) as server:
        response = httpx.post(f"{server.url}/v1/videos/sync", files=parts(
            {**FORM, "size": "32x32", "num_frames": "5"}), timeout=120)
        assert response.status_code == 200 and response.headers["content-type"] == "video/mp4"
