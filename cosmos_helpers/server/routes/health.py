"""``GET /health`` and ``GET /v1/models`` (api_server.py:1937-1979): ready means the model is loaded."""

from __future__ import annotations

import uuid

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ...protocol.vllm_omni import HEALTH, MODELS
from ..state import State

router = APIRouter(tags=["health"])


@router.get(HEALTH)
async def health(state: State):
    if not state.worker.alive:
        return JSONResponse({"status": "unhealthy", "reason": "the generation worker is not running"},
                            status_code=503)
    return {"status": "healthy"}


@router.get(MODELS)
async def models(state: State):
    created = int(state.started_at)
    permission = {"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission", "created": created,
                  "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                  "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                  "organization": "*", "group": None, "is_blocking": False}
    return {"object": "list", "data": [{"id": state.served_model_name, "object": "model", "created": created,
                                        "owned_by": "vllm", "root": state.model, "parent": None,
                                        "max_model_len": None, "permission": [permission]}]}
