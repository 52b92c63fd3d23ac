"""The Cosmos Framework's Ray Serve app as data: ``refresh_contracts.py --only ray-serve`` writes its fixture.

Read from one framework revision (a checkout or a bare git repository, through ``refresh_contracts.FrameworkFiles``):

* ``inference/ray/serve.py`` with ``ast``: the router's routes (method, path, the body and reply models named by the
  handler's annotations), the ``/outputs`` static mount, the keys ``/info`` answers with, the unknown-model answer
  (status and message template), the seed drawn for a sample without one, the per-request output folder, the
  deployment decorators' settings (router replicas, health-check timeout, ``@serve.batch`` size and wait, the
  workers' GPUs and placement bundles, the per-batch timeout) and the application name;
* the **JSON schemas** of ``SampleOutputs`` / ``SampleOutput`` (``inference/common/args.py``) and of the deployment
  arguments ``OmniAppArgs``, ``OmniModelDeploymentUserConfig``, ``OmniModelDeploymentArgs`` and
  ``OmniRouterDeploymentArgs`` (``serve.py``). The framework needs Python >= 3.12 and GPU packages, so it is not
  imported: the class definitions are cut out of their modules with ``ast`` and executed alone under the real
  ``pydantic``, with three names standing in for what they import (``tyro.conf.arg`` as inert metadata,
  ``OmniSetupOverrides`` as an open object whose fields are listed separately, ``AutoscalingConfig`` from the
  installed ``ray``, whose version is recorded). The fixture says so in ``derivation``;
* the fields and defaults of ``OmniSetupOverrides`` and its bases (``diffusion_cache``, ``guardrails``,
  ``keep_going`` ...) with ``ast`` (literal defaults only);
* both deploy configs ``inference/ray/configs/{latency,throughput}.yaml`` as parsed YAML;
* ``AutoscalingConfig()``'s defaults from the installed ray (the framework's ``serve`` extra does not pin ray).

The sample model (``OmniSampleOverrides``, the ``/generate`` body) is not derived again: its schema is the package
data file of the framework's sample schema of the same commit, which the fixture names.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

SERVE = "cosmos_framework/inference/ray/serve.py"
SUBMIT = "cosmos_framework/inference/ray/submit.py"
COMMON_ARGS = "cosmos_framework/inference/common/args.py"
OMNI_ARGS = "cosmos_framework/inference/args.py"
CONFIGS = "cosmos_framework/inference/ray/configs"
_OUTPUT_MODELS = ("ArgsBase", "SampleOutput", "SampleOutputs")
_DEPLOYMENT_MODELS = ("OmniAppArgs", "OmniModelDeploymentUserConfig", "OmniModelDeploymentArgs",
                      "OmniRouterDeploymentArgs")
_SETUP_CLASSES = ("OmniSetupOverrides", "SetupOverrides", "CheckpointOverrides", "ConfigOverrides",
                  "ParallelismOverrides", "QuantizationOverrides", "GuardrailOverrides")


def ray_serve_contract(files: Any, sample_schema: str) -> dict[str, Any]:
    """The fixture's data (see the module docstring); ``sample_schema`` names the package data file holding the sample
    schema of the same commit."""
    import ray

    serve = files.tree(SERVE)
    commit = files.commit()
    if not sample_schema.endswith(f"-{commit}.json"):
        raise ValueError(f"{sample_schema} is not of commit {commit}: refresh the framework fixture first")
    return {
        "package": "cosmos-framework", "commit": commit, "source": SERVE, "ray_version": ray.__version__,
        "sample_overrides_schema": {"package_data": sample_schema},
        "routes": _routes(serve), "info_keys": _info_keys(serve), "unknown_model": _unknown_model(serve),
        "seed_drawn": _seed_range(serve), "output_folder": _output_folder(serve),
        "deployment": _deployment(serve), "app_name": _app_name(serve),
        "schemas": _schemas(files), "setup_overrides_defaults": _setup_defaults(files),
        "autoscaling_defaults": _autoscaling_defaults(), "configs": _configs(files),
        "submit_defaults": _class_defaults(files.tree(SUBMIT), "Args"),
        "derivation": ("schemas: class definitions cut out of serve.py and common/args.py with ast and run under "
                       f"pydantic {_pydantic_version()} (the framework needs Python >= 3.12 and GPU packages, so it "
                       "is not imported); tyro.conf.arg is inert metadata, OmniSetupOverrides an open object (its "
                       f"fields: setup_overrides_defaults), AutoscalingConfig is ray {ray.__version__}'s"),
    }


# ---------------------------------------------------------------------------------------------- serve.py by ast


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)


def _decorator_call(node: ast.AST, attr: str) -> ast.Call | None:
    for decorator in getattr(node, "decorator_list", []):
        if isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute) \
                and decorator.func.attr == attr:
            return decorator
    return None


def _routes(tree: ast.Module) -> list[dict[str, Any]]:
    """Every ``@fastapi_app.<method>(path)`` handler of the router, and the static mount."""
    router = _class(tree, "OmniRouterDeployment")
    routes = []
    for node in router.body:
        for method in ("get", "post", "put", "delete"):
            call = _decorator_call(node, method)
            if call is None:
                continue
            body = [a for a in node.args.args if a.arg != "self"]
            routes.append({"method": method.upper(), "path": ast.literal_eval(call.args[0]), "handler": node.name,
                           "body": ast.unparse(body[0].annotation) if body else None,
                           "reply": ast.unparse(node.returns) if node.returns else None})
    for node in ast.walk(router):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "mount":
            routes.append({"method": "GET", "path": ast.literal_eval(node.args[0]) + "/{path}",
                           "handler": ast.unparse(node.args[1].func), "body": None, "reply": "file",
                           "name": next(ast.literal_eval(k.value) for k in node.keywords if k.arg == "name")})
    return routes


def _function(tree: ast.AST, name: str) -> ast.AsyncFunctionDef | ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == name)


def _router_generate(tree: ast.Module) -> ast.AsyncFunctionDef | ast.FunctionDef:
    return _function(_class(tree, "OmniRouterDeployment"), "generate")


def _info_keys(tree: ast.Module) -> dict[str, list[str]]:
    """The keys of the ``/info`` answer and of its ``environment``."""
    answer = next(n.value for n in ast.walk(_function(tree, "info")) if isinstance(n, ast.Return))
    environment = next(n.value for n in ast.walk(_function(tree, "_get_environment_info"))
                       if isinstance(n, ast.Return) and isinstance(n.value, ast.Dict))
    return {"info": [ast.literal_eval(k) for k in answer.keys],
            "environment": [ast.literal_eval(k) for k in environment.keys]}


def _unknown_model(tree: ast.Module) -> dict[str, Any]:
    call = next(n for n in ast.walk(_router_generate(tree)) if isinstance(n, ast.Call)
                and getattr(n.func, "attr", "") == "HTTPException")
    keywords = {k.arg: k.value for k in call.keywords}
    return {"status": ast.literal_eval(keywords["status_code"]), "detail_template": ast.unparse(keywords["detail"])}


def _seed_range(tree: ast.Module) -> list[int]:
    call = next(n for n in ast.walk(_router_generate(tree)) if isinstance(n, ast.Call)
                and getattr(n.func, "attr", "") == "randint")
    return [ast.literal_eval(a) for a in call.args]


def _output_folder(tree: ast.Module) -> dict[str, str]:
    generate = _router_generate(tree)
    stamp = next(n for n in ast.walk(generate) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "strftime")
    folder = next(n for n in ast.walk(generate) if isinstance(n, ast.JoinedStr)
                  and "generate_" in ast.unparse(n))
    return {"template": ast.unparse(folder), "timestamp_format": ast.literal_eval(stamp.args[0]),
            "relative_to": "the app's output_dir (SampleOutputs.map_files(p.relative_to(output_dir)))"}


def _keywords(call: ast.Call | None, namespace: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for keyword in (call.keywords if call else []):
        try:
            out[keyword.arg] = _literal(keyword.value, namespace)
        except ValueError:
            out[keyword.arg] = ast.unparse(keyword.value)
    return out


def _literal(node: ast.AST, namespace: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in namespace:
        return namespace[node.id]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _literal(node.left, namespace) * _literal(node.right, namespace)
    return ast.literal_eval(node)


def _constants(tree: ast.Module) -> dict[str, Any]:
    out = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                out[node.targets[0].id] = ast.unparse(node.value)
    return out


def _deployment(tree: ast.Module) -> dict[str, Any]:
    """The settings written on the deployments, the workers, the batch decorator and the batch wait."""
    constants = _constants(tree)
    model, router, worker = (_class(tree, n) for n in ("OmniModelDeployment", "OmniRouterDeployment",
                                                         "OmniModelWorker"))
    batch = _function(model, "_generate_batch")
    wait = next(n for n in ast.walk(batch) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "wait_for")
    bundle = next(n for n in ast.walk(model) if isinstance(n, ast.Call)
                  and getattr(n.func, "attr", "") == "placement_group")
    return {"model": _keywords(_decorator_call(model, "deployment"), constants),
            "router": _keywords(_decorator_call(router, "deployment"), constants),
            "worker": _keywords(_decorator_call(worker, "remote"), constants),
            "batch": _keywords(_decorator_call(batch, "batch"), constants),
            "batch_timeout_s": _keywords(wait, constants)["timeout"],
            "placement_bundle": ast.literal_eval(bundle.args[0].elt),
            "module_defaults": {k: v for k, v in constants.items() if k.startswith("DEFAULT_")}}


def _app_name(tree: ast.Module) -> str:
    call = next(n for n in ast.walk(_function(tree, "main")) if isinstance(n, ast.Call)
                and ast.unparse(n.func) == "ray.serve.run")
    return next(ast.literal_eval(k.value) for k in call.keywords if k.arg == "name")


# ---------------------------------------------------------------------------------------------- schemas


def _schemas(files: Any) -> dict[str, Any]:
    """The reply and deployment models' JSON schemas, from their class definitions run under pydantic."""
    common = files.tree(COMMON_ARGS)
    serve = files.tree(SERVE)
    resolved = [n for n in common.body if _defines(n, {"_resolve_path", "ResolvedPath"})]
    outputs = [n for n in common.body if isinstance(n, ast.ClassDef) and n.name in _OUTPUT_MODELS]
    deployment = [n for n in serve.body if _defines(n, {"DEFAULT_MAX_BATCH_SIZE", "DEFAULT_BATCH_WAIT_TIMEOUT_S",
                                                        "DEFAULT_AUTOSCALING_CONFIG", *_DEPLOYMENT_MODELS})]
    module = _run_module(_HEADER, [*resolved, *outputs, *deployment])
    return {name: getattr(module, name).model_json_schema() for name in ("SampleOutputs", "SampleOutput",
                                                                          *_DEPLOYMENT_MODELS)}


def _defines(node: ast.stmt, names: set[str]) -> bool:
    if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
        return node.name in names
    targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
    return any(isinstance(t, ast.Name) and t.id in names for t in targets)


_HEADER = '''
from __future__ import annotations
from pathlib import Path
from typing import Annotated, Any, Callable, Literal
import types
import pydantic
from typing_extensions import Self
from ray.serve.config import AutoscalingConfig


class _TyroArg:
    """Stand-in for tyro.conf.arg(...): command-line metadata, inert for pydantic."""

    def __init__(self, **kwargs):
        self.kwargs = kwargs


tyro = types.SimpleNamespace(conf=types.SimpleNamespace(arg=_TyroArg))


class OmniSetupOverrides(pydantic.BaseModel):
    """Stand-in for the framework's setup overrides (fields: the fixture's setup_overrides_defaults)."""

    model_config = pydantic.ConfigDict(extra="allow")
'''


def _run_module(header: str, nodes: list[ast.stmt]) -> types.ModuleType:
    """The nodes under ``header`` as a real module file (pydantic reads attribute docstrings from the source)."""
    source = header + "\n\n" + "\n\n".join(ast.unparse(n) for n in nodes) + "\n"
    folder = Path(tempfile.mkdtemp(prefix="ray-serve-contract-"))
    path = folder / "framework_ray_models.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("framework_ray_models", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _pydantic_version() -> str:
    import pydantic

    return pydantic.VERSION


# ---------------------------------------------------------------------------------------------- setup and configs


def _class_defaults(tree: ast.Module, name: str) -> dict[str, Any]:
    """Annotated fields of one class with their literal defaults (``None`` for a default built by code)."""
    out = {}
    for node in _class(tree, name).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            try:
                out[node.target.id] = ast.literal_eval(node.value)
            except ValueError:
                out[node.target.id] = {"code": ast.unparse(node.value)}
    return out


def _setup_defaults(files: Any) -> dict[str, Any]:
    """``OmniSetupOverrides``'s fields and defaults, its own over its bases' (the classes of ``_SETUP_CLASSES``)."""
    trees = {COMMON_ARGS: files.tree(COMMON_ARGS), OMNI_ARGS: files.tree(OMNI_ARGS)}
    merged: dict[str, Any] = {}
    for name in reversed(_SETUP_CLASSES):
        tree = next(t for t in trees.values() if any(isinstance(n, ast.ClassDef) and n.name == name for n in t.body))
        merged.update(_class_defaults(tree, name))
    return merged


def _autoscaling_defaults() -> dict[str, Any]:
    from ray.serve.config import AutoscalingConfig

    return json.loads(json.dumps(AutoscalingConfig().dict(), default=str))


def _configs(files: Any) -> dict[str, Any]:
    import yaml

    return {Path(path).name: yaml.safe_load(files.read(path)) for path in files.listing(CONFIGS)
            if path.endswith(".yaml")}
