"""The job lifecycle and the serial worker, over HTTP against the model-free double (which records what ran and
when): one generation at a time in arrival order, queued and running jobs deleted, the sync timeout counting the
queue, a failure inside the worker, pagination."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest

from cosmos_helpers.errors import GuardrailError

from .conftest import assert_envelope, instant_server, multipart, wait_status
from .doubles import InstantBackend

FORM = {"prompt": "a robot", "size": "32x32", "num_frames": "5", "num_inference_steps": "1", "seed": "1"}


class Gated(InstantBackend):
    """Generations wait for ``gate`` and ignore cancellation meanwhile (a step that never ends)."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()

    def generate(self, request, progress=None, **kwargs):
        self.gate.wait(60)
        return super().generate(request, progress=progress)


def test_jobs_run_one_at_a_time_in_arrival_order(tmp_path):
    backend = Gated()
    with instant_server(tmp_path, backend) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        jobs = [http.post("/v1/videos", files=multipart({**FORM, "seed": str(seed)})).json() for seed in range(8)]
        backend.gate.set()  # the first was waiting at the gate, the others in the queue
        for job in jobs:
            wait_status(http, job["id"], {"completed"})
        assert [run.request.seed for run in backend.runs] == list(range(8))
        for earlier, later in zip(backend.runs, backend.runs[1:]):
            assert later.started >= earlier.finished  # never two at once


def test_concurrent_requests_are_all_served(tmp_path):
    backend = InstantBackend(step_seconds=0.01)
    with instant_server(tmp_path, backend) as server:
        async def scenario() -> list[int]:
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as http:
                sync = [http.post("/v1/videos/sync", files=multipart({**FORM, "seed": str(seed)})) for seed in range(4)]
                images = [http.post("/v1/images/generations", json={"prompt": "x", "size": "32x32", "seed": seed,
                                                                    "num_inference_steps": 1}) for seed in range(4, 8)]
                return [response.status_code for response in await asyncio.gather(*sync, *images)]

        assert asyncio.run(scenario()) == [200] * 8
        assert sorted(run.request.seed for run in backend.runs) == list(range(8))
        ordered = sorted(backend.runs, key=lambda run: run.started)
        for earlier, later in zip(ordered, ordered[1:]):
            assert later.started >= earlier.finished


def test_queued_and_running_jobs_are_deleted(tmp_path):
    backend = InstantBackend(step_seconds=0.05)
    with instant_server(tmp_path, backend) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        running = http.post("/v1/videos", files=multipart({**FORM, "num_inference_steps": "200", "seed": "7"})).json()
        queued = http.post("/v1/videos", files=multipart({**FORM, "seed": "8"})).json()
        wait_status(http, running["id"], {"in_progress"})
        assert http.get(f"/v1/videos/{queued['id']}").json()["status"] == "queued"
        for job in (running, queued):
            assert_envelope(http.get(f"/v1/videos/{job['id']}/content"), 404, "Generation is still in-progress")
        assert http.delete(f"/v1/videos/{queued['id']}").json()["deleted"] is True  # never runs
        assert http.delete(f"/v1/videos/{running['id']}").json()["deleted"] is True  # stops at its next step
        assert http.get(f"/v1/videos/{running['id']}").status_code == 404
        assert http.get("/v1/videos").json()["data"] == []
        after = http.post("/v1/videos", files=multipart({**FORM, "seed": "9"})).json()
        wait_status(http, after["id"], {"completed"})
        assert [run.request.seed for run in backend.runs] == [9]  # 7 was stopped, 8 never ran
        assert not (tmp_path / f"{running['id']}.mp4").exists()


@pytest.mark.slow
def test_a_job_that_does_not_stop_answers_409_then_deletes(tmp_path):
    backend = Gated()
    with instant_server(tmp_path, backend) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        job = http.post("/v1/videos", files=multipart(FORM)).json()
        wait_status(http, job["id"], {"in_progress"})
        assert_envelope(http.delete(f"/v1/videos/{job['id']}"), 409, "Cancellation in progress")  # after 4 s
        backend.gate.set()
        deadline = time.monotonic() + 30
        while (answer := http.delete(f"/v1/videos/{job['id']}")).status_code == 409:
            assert time.monotonic() < deadline
        assert answer.json() == {"id": job["id"], "deleted": True, "object": "video.deleted"}


def test_sync_timeout_counts_queueing(tmp_path):
    backend = Gated()
    with instant_server(tmp_path, backend, sync_timeout=0.3) as server, httpx.Client(base_url=server.url,
                                                                                     timeout=30) as http:
        holder = http.post("/v1/videos", files=multipart(FORM)).json()  # holds the worker until the gate opens
        wait_status(http, holder["id"], {"in_progress"})
        assert_envelope(http.post("/v1/videos/sync", files=multipart(FORM)), 504,
                        "Video generation timed out after 0.3s.")
        assert_envelope(http.post("/v1/images/generations", json={"prompt": "x", "size": "32x32"}), 504,
                        "Image generation timed out after 0.3s.")
        backend.gate.set()
        after = http.post("/v1/videos", files=multipart(FORM)).json()  # queued behind the abandoned ones
        wait_status(http, after["id"], {"completed"})
        assert list((tmp_path / "sync").glob("*")) == []  # the abandoned sync output went when its work ended
        assert [run.request.mode for run in backend.runs] == ["text2video", "text2video", "text2image", "text2video"]


def test_failures_inside_the_worker(tmp_path, rgb_video):
    """A transfer runner (or backend) failing while it runs: sync 500 "Video generation failed: ..."; a job ends
    failed with code 500 and the exception's own text; its GET answers 500 with the job."""
    from .conftest import mp4_bytes

    def runner(form_fields, extra_params, rgb_video_path, control_paths):
        raise RuntimeError("control video has no frames")

    class Blocking(InstantBackend):
        def generate(self, request, progress=None, **kwargs):
            raise GuardrailError("blocked")

    with instant_server(tmp_path, Blocking(), transfer_runner=runner) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        fields = {**FORM, "extra_params": '{"edge": true}'}
        files = {"input_reference": ("rgb.mp4", mp4_bytes(tmp_path, rgb_video[:, :32, :32]), "video/mp4")}
        assert_envelope(http.post("/v1/videos/sync", files=multipart(fields, files)), 500,
                        "Video generation failed: control video has no frames", type_="Internal Server Error")
        job = http.post("/v1/videos", files=multipart(fields, files)).json()
        failed = wait_status(http, job["id"], {"failed"})
        assert failed["error"] == {"code": 500, "message": "control video has no frames"}
        assert http.get(f"/v1/videos/{job['id']}").status_code == 500
        blocked = http.post("/v1/videos/sync", files=multipart(FORM))  # a backend's GuardrailError: vLLM's 400
        assert_envelope(blocked, 400, "Input was blocked by Cosmos3 guardrails.")


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_list_pagination(tmp_path, order):
    with instant_server(tmp_path) as server, httpx.Client(base_url=server.url, timeout=30) as http:
        ids = [http.post("/v1/videos", files=multipart(FORM)).json()["id"] for _ in range(5)]
        for job_id in ids:
            wait_status(http, job_id, {"completed"})
        page = http.get("/v1/videos", params={"limit": 2, "order": order}).json()
        assert page["object"] == "list" and len(page["data"]) == 2 and page["has_more"] is True
        assert page["first_id"] == page["data"][0]["id"] and page["last_id"] == page["data"][1]["id"]
        everything, after = [], None
        while True:
            params = {"limit": 2, "order": order, **({"after": after} if after else {})}
            chunk = http.get("/v1/videos", params=params).json()
            everything += [job["id"] for job in chunk["data"]]
            if not chunk["has_more"]:
                break
            after = chunk["last_id"]
        assert everything == [job["id"] for job in http.get("/v1/videos", params={"order": order}).json()["data"]]
        assert sorted(everything) == sorted(ids)
        assert http.get("/v1/videos", params={"after": "video_gen_unknown"}).json()["data"] == []


@pytest.mark.parametrize("step_progress", [True, False])
def test_job_progress_per_step_only_when_asked(tmp_path, step_progress):
    """``step_progress`` reports each denoising step (0 < progress < 100 while running); without it the job jumps
    from 0 to 100, as on vLLM-Omni."""
    backend = InstantBackend(step_seconds=0.05)
    with instant_server(tmp_path, backend, step_progress=step_progress) as server, \
            httpx.Client(base_url=server.url, timeout=30) as http:
        job = http.post("/v1/videos", files=multipart({**FORM, "num_inference_steps": "20"})).json()
        seen = set()
        deadline = time.monotonic() + 30
        while (state := http.get(f"/v1/videos/{job['id']}").json())["status"] != "completed":
            assert time.monotonic() < deadline
            seen.add(state["progress"])
            time.sleep(0.02)
    assert state["progress"] == 100
    assert any(0 < value < 100 for value in seen) is step_progress, seen
