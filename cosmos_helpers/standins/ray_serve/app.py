"""The stand-in's Ray Serve application, shaped as ``cosmos_framework/inference/ray/serve.py`` at 5eee9ed: a FastAPI
ingress router handing each sample to the model's deployment, whose replicas each hold a ``DiffusersBackend`` instead
of a placement group of GPU workers (``max_ongoing_requests=1``: the framework batches one sample per call)."""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import fastapi
from fastapi.staticfiles import StaticFiles
from ray import serve

from ...presets import model_for
from ...protocol import ray_serve as rs
from .samples import BANNER, SampleSetup, run_sample

fastapi_app = fastapi.FastAPI(title="cosmos-helpers stand-in of the Cosmos Framework's Ray Serve app")


class StandinModel:
    """One replica of the model's deployment: the tiny weights in this process, one sample at a time."""

    def __init__(self, setup: SampleSetup, output_dir: str, threads: int = 1) -> None:
        import torch

        from ...backends.diffusers import DiffusersBackend

        torch.set_num_threads(max(1, threads))
        self.setup, self.output_dir = setup, Path(output_dir)
        self.backend = DiffusersBackend(progress=False)
        self.backend.pipeline(model_for(setup.profile))  # load now: the replica is ready when the model is
        self._lock = asyncio.Lock()

    async def generate(self, item: dict[str, Any], folder: str) -> dict[str, Any]:
        async with self._lock:  # one generation at a time, as the framework's batch of one
            work = asyncio.to_thread(run_sample, item, output_dir=self.output_dir, folder=folder,
                                     backend=self.backend, setup=self.setup)
            return await asyncio.wait_for(work, timeout=rs.BATCH_TIMEOUT_S)


@serve.ingress(fastapi_app)
class StandinRouter:
    def __init__(self, models: dict[str, Any], output_dir: str, setup: dict[str, Any]) -> None:
        self.output_dir = Path(output_dir)
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.models, self.setup = models, setup
        fastapi_app.mount(rs.OUTPUTS, StaticFiles(directory=self.output_dir), name="outputs")

    @fastapi_app.get(rs.MODELS)
    async def list_models(self) -> list[str]:
        return list(self.models)

    @fastapi_app.get(rs.INFO)
    async def info(self) -> dict[str, Any]:
        return {"environment": {"cosmos3_version": None, "commit_sha": None}, "models": list(self.models),
                "output_dir": str(self.output_dir), "standin": {"what": BANNER, "setup": self.setup}}

    @fastapi_app.post(rs.GENERATE)
    async def generate(self, body: dict[str, Any] = fastapi.Body(...)) -> dict[str, Any]:
        from .samples import validated  # the handler travels by value (serve.ingress); its helpers by import

        sample = validated(body)
        name = sample.get("model") or next(iter(self.models))
        if name not in self.models:
            raise fastapi.HTTPException(status_code=rs.UNKNOWN_MODEL_STATUS, detail=f"Model '{name}' not found. "
                                        f"Available models: {list(self.models)}")
        folder = f"{rs.OUTPUT_FOLDER_PREFIX}{datetime.now().strftime(rs.TIMESTAMP_FORMAT)}_{uuid.uuid4().hex[:4]}"
        sample["output_dir"] = str(self.output_dir / folder)
        if sample.get("seed") is None:
            sample["seed"] = random.randint(*rs.SEED_RANGE)
        return await self.models[name].generate.remote(sample, folder)


def build_app(output_dir: str | Path, *, profile: str = "tiny", replicas: int = 2, num_cpus: float = 1,
              num_gpus: float = 0, keep_going: bool = False, skip_invalid_samples: bool = False) -> Any:
    """The bound application: ``serve.run(build_app(...))`` deploys it on the Ray cluster this process joined."""
    model = model_for(profile)
    setup = SampleSetup(profile=profile, keep_going=keep_going, skip_invalid_samples=skip_invalid_samples)
    deployment = serve.deployment(StandinModel, name=model, num_replicas=replicas, max_ongoing_requests=1,
                                  ray_actor_options={"num_cpus": num_cpus, "num_gpus": num_gpus},
                                  health_check_timeout_s=rs.HEALTH_CHECK_TIMEOUT_S, max_constructor_retry_count=2)
    router = serve.deployment(StandinRouter, name="router", num_replicas=1, ray_actor_options={"num_cpus": 0})
    facts = {"profile": profile, "replicas": replicas, "num_cpus": num_cpus, "num_gpus": num_gpus,
             "keep_going": keep_going, "skip_invalid_samples": skip_invalid_samples, "diffusion_cache": False,
             "guardrails": False}
    return router.bind({model: deployment.bind(setup, str(output_dir), max(1, int(num_cpus)))}, str(output_dir),
                       facts)
