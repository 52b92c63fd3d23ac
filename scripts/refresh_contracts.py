"""Regenerate the contract fixtures in ``tests/contracts/fixtures/`` from the real upstream code.

The real vLLM-Omni server, the Cosmos Framework and the real checkpoints cannot run on a CPU machine, so their
own code is the oracle our tests hold the client, the stand-ins and the spec loader to. This script reads it:

* **vLLM-Omni** (the ``vllm-omni==0.30.0`` wheel from the package index): the JSON schemas of the pydantic
  request/response models of ``/v1/images/generations`` and ``/v1/videos``, the multipart form parser's fields
  (name, type, constraints), where the server reads each field of those request models, and the Cosmos3
  pipeline's facts: the extra-parameter keys it reads with their defaults, its default constants per mode, its
  resolution table and its transfer defaults.
  The protocol modules are loaded from the wheel with small stand-in parents (the real package imports vLLM
  and CUDA torch); everything else is read with ``ast``, never executed.
* **Cosmos Framework** (a checkout given by path, and an interpreter that imports it: Python >= 3.12 with the
  framework's dependencies, e.g. the checkout's ``uv`` environment): the JSON schema of the sample-override
  model every input file is validated with (written into the package, ``cosmos_helpers/protocol/data/``: the
  framework stand-in validates its inputs with it), the per-mode default files, the model configs' defaults, the
  checkpoint names, the command-line flags (from ``--help``) and the example inputs ``inputs/omni/*.json``.
* **diffusers** (the installed version): ``Cosmos3OmniPipeline`` call defaults and config defaults.
* **prompting** (a framework checkout, or a bare git repository with ``--framework-git-dir``; nothing of it
  is executed but ``prompt_upsampling.py``, which needs only ``requests``): the caption templates and upsampler
  prompts as files, the upsampler's system message, resolution table and config defaults, the chat messages
  its own builders make for one sample sentence, the default negative caption, and the blocklist guardrail's
  rules (checkpoint, list folders, partial-match settings, invisible characters, the order of its passes);
  with the ``better-profanity`` wheel's look-alike map and word characters, and where the vllm-omni wheel turns
  the guardrails off (serve flag, per-request key, deploy configs with ``guardrails: false``). Besides the
  fixture it writes ``cosmos_helpers/protocol/prompting.py``, the same facts as a module the package imports
  (tests keep the two equal)::

    python scripts/refresh_contracts.py --only prompting --framework-git-dir ~/cosmos-framework/.git
* **action facts** (``--only action``; all three, one fixture ``action_facts-<diffusers>-<framework>-<vllm-omni>``):
  diffusers' action tables, ``CosmosActionCondition``'s fields, the modular action blocks and their inputs and the
  transformer's action parameters; the framework's embodiment tables, model modes, normalisation methods, stats
  widths and dataset clip timing (from a checkout or a bare git directory: ``--framework-git-dir``, read with
  ``git show``, nothing executed); vLLM-Omni's action modes and embodiment ids (``cosmos_helpers/protocol/action.py``).

* **image editing** (``--only image-edit``; a checkout or ``--framework-git-dir``): the edit system prompt, the
  resize keywords and the edit batch's item count read with ``ast``, and three pure framework functions taken out of
  their modules and run on example inputs (the edit resize, the position rule, which items are clean)::

    python scripts/refresh_contracts.py --only image-edit --framework-git-dir ~/cosmos-framework/.git

* **FP8** (``--only fp8``; diffusers installed, the vllm-omni wheel, a checkout or ``--framework-git-dir``; one fixture
  ``fp8-<diffusers>-<vllm-omni>-<framework>``): the ModelOpt FP8 revision's policy fields, diffusers' mixed-precision
  call arguments and the schedules it resolves, vLLM-Omni's serve flags and ``cosmos3_mixed_precision`` keys, the
  framework's ``--quantization-method`` values and ModelOpt checkpoint marker (``scripts/fp8_facts.py``)::

    python scripts/refresh_contracts.py --only fp8 --framework-git-dir ~/cosmos-framework/.git

* **step caching** (``--only step-cache``; the wheel, the installed diffusers and a checkout or
  ``--framework-git-dir``; one fixture ``step_cache-<diffusers>-<framework>-<vllm-omni>``): each stack's SeaCache
  switches, keys and defaults (``scripts/contracts_step_cache.py``)::

    python scripts/refresh_contracts.py --only step-cache --framework-git-dir ~/cosmos-framework/.git

* **diffusers' behaviour** (``--only diffusers-behaviour``; the installed diffusers, CPU): what
  ``Cosmos3OmniPipeline.__call__`` uses for the options left out (frames, size, fps, steps, guidance, negative
  prompt, system prompt), measured by running it on the embedded tiny model (``scripts/diffusers_behaviour.py``;
  the full-size run stops after ``prepare_latents``), one fixture ``diffusers_behaviour-<diffusers>``::

    python scripts/refresh_contracts.py --only diffusers-behaviour

* **edge/blur goldens** (``--only control-maps``; a checkout or ``--framework-git-dir``): the framework's own edge
  and blur augmentors run on the test clip for every preset, written to
  ``tests/transfer/golden/framework_maps-<commit>.npz`` (``scripts/framework_control_maps.py``)::

    python scripts/refresh_contracts.py --only control-maps --framework-git-dir ~/cosmos-framework/.git

* **the framework's Ray Serve app** (``--only ray-serve``; a checkout or ``--framework-git-dir``): routes, reply and
  deployment models' JSON schemas, setup defaults and the deploy configs (``scripts/ray_serve_contract.py``)::

    python scripts/refresh_contracts.py --only ray-serve --framework-git-dir ~/cosmos-framework/.git

Run it from the repository root; it rewrites the fixtures it was asked for::

    python scripts/refresh_contracts.py --framework ~/cosmos-framework \
        --framework-python ~/cosmos-framework/.venv/bin/python
    python scripts/refresh_contracts.py --only action --framework-git-dir ~/cosmos-framework/.git

Nothing here is imported by the package or the tests; the fixtures are data with the upstream version in their
file name and inside (and ``cosmos_helpers/protocol/prompting.py`` and ``cosmos_helpers/protocol/data/`` are
generated data).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import inspect
import json
import re
import subprocess
import sys
import tempfile
import types
import zipfile
from pathlib import Path
from typing import Any

VLLM_OMNI_VERSION = "0.30.0"
FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "contracts" / "fixtures"
# Generated facts the installed package itself reads (protocol.framework.sample_overrides_schema).
PACKAGE_DATA = Path(__file__).resolve().parents[1] / "cosmos_helpers" / "protocol" / "data"

# ---------------------------------------------------------------------------------------------- vLLM-Omni

_PIPELINE = "vllm_omni/diffusion/models/cosmos3/pipeline_cosmos3.py"
_FORM_PARSER = "vllm_omni/entrypoints/openai/video/generation/helpers.py"


def vllm_omni_contract(wheel: Path) -> dict[str, Any]:
    """Facts of the vLLM-Omni wheel (see the module docstring)."""
    with tempfile.TemporaryDirectory(prefix="vllm-omni-") as folder:
        root = Path(folder)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(root)
        models = _load_protocol_models(root)
        return {
            "package": "vllm-omni",
            "version": _wheel_version(wheel),
            "wheel_sha256": _sha256(wheel),
            "schemas": {name: model.model_json_schema() for name, model in models.items()},
            "video_form_fields": _form_fields(root / _FORM_PARSER, "_parse_video_form"),
            "request_reads": _request_reads(root, ("ImageGenerationRequest", "VideoGenerationRequest")),
            "cosmos3": _cosmos3_facts(root),
        }


def _wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_protocol_models(root: Path) -> dict[str, Any]:
    """Import ``protocol/images.py`` and ``protocol/videos.py`` from the unpacked wheel.

    Their parents (``vllm_omni/__init__`` ...) import vLLM; empty stand-in packages take their place, and
    ``vllm_omni.inputs.data`` (torch, vLLM) is replaced by the one constant the protocol reads from it.
    """
    saved = dict(sys.modules)
    try:
        for name in ("vllm_omni", "vllm_omni.entrypoints", "vllm_omni.entrypoints.openai",
                     "vllm_omni.entrypoints.openai.protocol", "vllm_omni.inputs"):
            package = types.ModuleType(name)
            package.__path__ = []
            sys.modules[name] = package
        data = types.ModuleType("vllm_omni.inputs.data")
        data.DIFFUSION_QUALITY_LEVELS = _module_literal(root / "vllm_omni/inputs/data.py", "DIFFUSION_QUALITY_LEVELS")
        sys.modules["vllm_omni.inputs.data"] = data
        base = root / "vllm_omni/entrypoints/openai"
        _load("vllm_omni.entrypoints.openai.image_api_utils", base / "image_api_utils.py")
        images = _load("vllm_omni.entrypoints.openai.protocol.images", base / "protocol/images.py")
        videos = _load("vllm_omni.entrypoints.openai.protocol.videos", base / "protocol/videos.py")
        return {
            "ImageGenerationRequest": images.ImageGenerationRequest,
            "ImageGenerationResponse": images.ImageGenerationResponse,
            "VideoGenerationRequest": videos.VideoGenerationRequest,
            "VideoResponse": videos.VideoResponse,
            "VideoListResponse": videos.VideoListResponse,
            "VideoDeleteResponse": videos.VideoDeleteResponse,
        }
    finally:
        for name in set(sys.modules) - set(saved):
            del sys.modules[name]


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _module_literal(path: Path, name: str) -> Any:
    """The value assigned to ``name`` at module level, evaluated from literals only (no code runs)."""
    namespace = _module_namespace(path)
    if name not in namespace:
        raise KeyError(f"{name} not found in {path} (or not a literal)")
    return _jsonable(namespace[name])


def _module_constants(path: Path, prefix: str) -> dict[str, Any]:
    """Every literal module-level constant whose name starts with ``prefix``."""
    return {k: _jsonable(v) for k, v in _module_namespace(path).items() if k.startswith(prefix)}


def _module_namespace(path: Path) -> dict[str, Any]:
    """Module-level assignments whose values are literals, or built from earlier ones with ``| + - * **``."""
    namespace: dict[str, Any] = {}
    for node in _tree(path).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) else []
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if not names or node.value is None:
            continue
        try:
            value = _evaluate(node.value, namespace)
        except (ValueError, KeyError, TypeError):
            continue  # computed by code: not a literal fact
        for name in names:
            namespace[name] = value
    return namespace


_OPERATORS = {ast.BitOr: lambda a, b: a | b, ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
              ast.Mult: lambda a, b: a * b, ast.Pow: lambda a, b: a ** b}


def _evaluate(node: ast.AST, namespace: dict[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return namespace[node.id]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_evaluate(item, namespace) for item in node.elts]
        return {ast.Tuple: tuple, ast.List: list, ast.Set: set}[type(node)](items)
    if isinstance(node, ast.Dict):
        return {_evaluate(k, namespace): _evaluate(v, namespace) for k, v in zip(node.keys, node.values)}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, namespace)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left, namespace), _evaluate(node.right, namespace))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in (
            "frozenset", "set", "tuple", "list", "dict") and not node.keywords:
        builder = {"frozenset": frozenset, "set": set, "tuple": tuple, "list": list, "dict": dict}[node.func.id]
        return builder(*(_evaluate(arg, namespace) for arg in node.args))
    raise ValueError(f"not a literal: {ast.unparse(node)}")


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(_jsonable(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


def _form_fields(path: Path, function: str) -> list[dict[str, Any]]:
    """The ``Form(...)`` / ``File(...)`` parameters of a FastAPI dependency: name, type, constraints."""
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.AsyncFunctionDef | ast.FunctionDef) and node.name == function:
            break
    else:
        raise KeyError(f"{function} not found in {path}")
    fields = []
    args = node.args.args[-len(node.args.defaults):] if node.args.defaults else []
    for arg, default in zip(args, node.args.defaults, strict=True):
        if not (isinstance(default, ast.Call) and isinstance(default.func, ast.Name)
                and default.func.id in ("Form", "File")):
            continue
        constraints = {kw.arg: _jsonable(_evaluate(kw.value, {})) for kw in default.keywords if kw.arg != "default"}
        required = bool(default.args) and isinstance(default.args[0], ast.Constant) and default.args[0].value is ...
        fields.append({"name": arg.arg, "kind": default.func.id, "annotation": ast.unparse(arg.annotation),
                       "required": required, **({"constraints": constraints} if constraints else {})})
    return fields


def _request_reads(root: Path, models: tuple[str, ...]) -> dict[str, dict[str, list[str]]]:
    """Where the server reads each attribute of its request models: ``{model: {attribute: ["file:line"]}}``.

    A read is ``param.<attribute>`` inside an ``entrypoints`` function with a parameter annotated with the model,
    or ``self.<attribute>`` inside the model's own methods. A field the client sends that is never read is ignored.
    """
    reads: dict[str, dict[str, set[str]]] = {model: {} for model in models}
    for path in sorted((root / "vllm_omni/entrypoints").rglob("*.py")):
        where = path.relative_to(root / "vllm_omni").as_posix()
        for model, function, names in _request_scopes(_tree(path), models):
            for node in ast.walk(function):
                if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load)
                        and isinstance(node.value, ast.Name) and node.value.id in names):
                    reads[model].setdefault(node.attr, set()).add(f"{where}:{node.lineno}")
    return {model: {k: sorted(v, key=_site_order) for k, v in sorted(found.items())} for model, found in reads.items()}


def _request_scopes(tree: ast.Module, models: tuple[str, ...]):
    """``(model, function, names bound to a model instance)`` for every function that reads one."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name in models:
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield node.name, item, {"self"}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            arguments = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
            for model in models:
                names = {a.arg for a in arguments if a.annotation is not None and model in {
                    n.id for n in ast.walk(a.annotation) if isinstance(n, ast.Name)}}
                if names:
                    yield model, node, names


def _site_order(site: str) -> tuple[str, int]:
    path, line = site.rsplit(":", 1)
    return path, int(line)


def _sp_params(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Keys the Cosmos3 pipeline reads with ``_get_sp_param(sp, "key", default)``, each with its defaults."""
    reads: dict[str, list[dict[str, Any]]] = {}
    for node in ast.walk(_tree(path)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "_get_sp_param" and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            continue
        default = ast.unparse(node.args[2]) if len(node.args) > 2 else "None"
        entry = {"default": default, "line": node.lineno}
        reads.setdefault(node.args[1].value, []).append(entry)
    return dict(sorted(reads.items()))


def _cosmos3_facts(root: Path) -> dict[str, Any]:
    folder = root / "vllm_omni/diffusion/models/cosmos3"
    transfer = folder / "transfer.py"
    return {
        "extra_body_params": _module_literal(root / "vllm_omni/model_extras/cosmos3.py", "COSMOS3_EXTRA_BODY_PARAMS"),
        "pipeline_reads": _sp_params(root / _PIPELINE),
        "pipeline_constants": _module_constants(root / _PIPELINE, "COSMOS3_"),
        "video_res_size_info": _module_literal(folder / "utils.py", "VIDEO_RES_SIZE_INFO"),
        "transfer": {name: _module_literal(transfer, name) for name in (
            "TRANSFER_HINT_KEYS", "_TRANSFER_HINT_FIELDS", "TRANSFER_SAMPLE_DEFAULTS", "TRANSFER_DEFAULTS",
            "EDGE_PRESETS", "BLUR_DOWNUP_PRESETS", "BLUR_PRE_BLUR_DOWNSCALE_PRESETS")},
    }


# ---------------------------------------------------------------------------------------------- framework

# Runs inside the framework's interpreter (Python >= 3.12 with its dependencies); prints one JSON object.
_FRAMEWORK_PROBE = r'''
import json, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
import yaml
import cosmos_framework.inference.args as fw
root = Path(sys.argv[1])
defaults = root / "cosmos_framework/inference/defaults"
models = {}
for path in sorted((root / "cosmos_framework/inference/configs/model").glob("*.yaml")):
    text = yaml.safe_load(path.read_text())
    config = text["model"]["config"] if "model" in text else text
    found = {}
    def walk(node, trail):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("resolution", "use_system_prompt") and not isinstance(value, dict):
                    found.setdefault(key, value)
                walk(value, trail + [key])
    walk(text, [])
    models[path.stem] = found
print(json.dumps({
    "sample_overrides_schema": fw.OmniSampleOverrides.model_json_schema(),
    "modality_defaults": {p.parent.name: json.loads(p.read_text())
                          for p in sorted(defaults.glob("*/sample_args.json"))},
    "default_files": sorted(p.name for p in defaults.glob("*.*")),
    "model_configs": models,
    "checkpoints": {name: config.hf.repository for name, config in fw._CHECKPOINTS.items() if config.hf},
    "default_checkpoint": fw.DEFAULT_CHECKPOINT_NAME,
    "num_frames_defaults": dict(fw.OmniSampleOverrides._NUM_FRAMES_DEFAULTS),
    "transfer_sample_defaults": dict(fw.OmniSampleOverrides._TRANSFER_SAMPLE_DEFAULTS),
    "transfer_hint_defaults": {str(k): {f: str(v) for f, v in d.items()}
                               for k, d in fw.OmniSampleOverrides._TRANSFER_HINT_DEFAULTS.items()},
    "transfer_tuned_defaults": {str(k): d for k, d in fw.OmniSampleOverrides._TRANSFER_DEFAULTS.items()},
}))
'''


def framework_contract(checkout: Path, python: str, commit: str | None = None) -> dict[str, Any]:
    """Facts of a cosmos-framework checkout, read by ``python`` (which must import ``cosmos_framework``)."""
    env = {"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}
    probe = subprocess.run([python, "-c", _FRAMEWORK_PROBE, str(checkout)], cwd=checkout, env=env,
                           capture_output=True, text=True, check=True)
    facts = json.loads(probe.stdout.strip().splitlines()[-1])
    helptext = subprocess.run([python, "-W", "ignore", "-m", "cosmos_framework.scripts.inference", "--help"],
                              cwd=checkout, env={**env, "COLUMNS": "200"}, capture_output=True, text=True).stdout
    flags = sorted({word.strip(",") for word in helptext.split() if re.fullmatch(r"--?[a-z][a-z0-9.-]*,?", word)})
    choices = {flag: value.split(",") for flag, value in re.findall(r"(--[a-z][a-z0-9-]*) \{([a-z0-9,]+)\}", helptext)}
    commit = commit or subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=checkout, capture_output=True,
                                      text=True).stdout.strip() or "unknown"
    utils = checkout / "cosmos_framework/data/generator/utils.py"
    examples = {p.name: json.loads(p.read_text()) for p in sorted((checkout / "inputs/omni").glob("*.json"))}
    return {"package": "cosmos-framework", "commit": commit, **facts,
            **framework_control_facts(FrameworkFiles(checkout)),
            "video_res_size_info": _module_literal(utils, "VIDEO_RES_SIZE_INFO"),
            "cli_flags": [flag.rstrip(".") for flag in flags], "cli_choices": choices, "example_inputs": examples}


_SEG = "cosmos_framework/data/generator/augmentors/transfer_control_input/seg.py"


def framework_control_facts(files: FrameworkFiles) -> dict[str, Any]:
    """The segmentation colour list (``seg.py`` ``PREDEFINED_COLORS_SEGMENTATION = np.array([...])``), read with
    ``ast`` only, so it needs no interpreter that imports the framework (``--only framework-controls``)."""
    for node in files.tree(_SEG).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PREDEFINED_COLORS_SEGMENTATION"
                                                for t in node.targets):
            call = node.value
            literal = call.args[0] if isinstance(call, ast.Call) else call
            return {"seg_colors": ast.literal_eval(literal)}
    raise KeyError(f"PREDEFINED_COLORS_SEGMENTATION not found in {_SEG}")


# ---------------------------------------------------------------------------------------------- diffusers


def diffusers_contract() -> dict[str, Any]:
    """``Cosmos3OmniPipeline`` call and config defaults from the installed diffusers."""
    import diffusers
    from diffusers import Cosmos3OmniPipeline

    def defaults(function) -> dict[str, Any]:
        out = {}
        for name, parameter in inspect.signature(function).parameters.items():
            if parameter.default is not inspect.Parameter.empty:
                value = parameter.default
                out[name] = list(value) if isinstance(value, tuple) else value if isinstance(
                    value, (bool, int, float, str, type(None))) else repr(value)
        return out

    return {"package": "diffusers", "version": diffusers.__version__,
            "Cosmos3OmniPipeline.__call__": defaults(Cosmos3OmniPipeline.__call__),
            "Cosmos3OmniPipeline.__init__": defaults(Cosmos3OmniPipeline.__init__)}


# ---------------------------------------------------------------------------------------------- prompting

# The framework's prompt-upsampling templates and its text blocklist guardrail, read as files (nothing executed),
# from a checkout or a bare git repository; and better-profanity, the matcher that guardrail calls.
_TEMPLATES = "cosmos_framework/inference/prompting_templates"
_UPSAMPLING = "cosmos_framework/inference/prompt_upsampling.py"
_BLOCKLIST = "cosmos_framework/auxiliary/guardrail/blocklist/blocklist.py"
_GUARDRAIL_CORE = "cosmos_framework/auxiliary/guardrail/common/core.py"
_GUARDRAIL_ARGS = "cosmos_framework/inference/common/args.py"
_NEGATIVE = "cosmos_framework/inference/defaults/neg_prompts.json"
PROMPTING_MODULE = Path(__file__).resolve().parents[1] / "cosmos_helpers" / "protocol" / "prompting.py"


class FrameworkFiles:
    """Files of a cosmos-framework revision: a checkout folder, or ``git show REV:path`` from a (bare) repo."""

    def __init__(self, checkout: Path | None = None, git_dir: Path | None = None, rev: str = "HEAD") -> None:
        self.checkout, self.git_dir, self.rev = checkout, git_dir, rev

    def _git(self, *args: str) -> str:
        where = ["--git-dir", str(self.git_dir)] if self.git_dir else ["-C", str(self.checkout)]
        return subprocess.run(["git", *where, *args], capture_output=True, text=True, check=True).stdout

    def read(self, path: str) -> str:
        if self.git_dir is None:
            return (self.checkout / path).read_text(encoding="utf-8")
        return self._git("show", f"{self.rev}:{path}")

    def listing(self, folder: str) -> list[str]:
        if self.git_dir is None:
            return sorted(p.relative_to(self.checkout).as_posix() for p in (self.checkout / folder).rglob("*")
                          if p.is_file())
        return sorted(self._git("ls-tree", "-r", "--name-only", self.rev, folder).split())

    def commit(self) -> str:
        return self._git("rev-parse", "--short=7", self.rev).strip()

    def tree(self, path: str) -> ast.Module:
        return ast.parse(self.read(path), filename=path)


def framework_prompting_contract(files: FrameworkFiles) -> dict[str, Any]:
    """The caption templates (the framework's "JSON schemas"), the upsampler's prompts and chat layout, and the
    blocklist guardrail's rules and switches, from one framework revision."""
    templates = {path.split(_TEMPLATES + "/", 1)[1]: files.read(path) for path in files.listing(_TEMPLATES)}
    upsampling = files.tree(_UPSAMPLING)
    literals = _namespace_from_tree(upsampling)
    samples = _upsampler_samples(files, templates)
    return {
        "package": "cosmos-framework", "commit": files.commit(),
        # as the files are: the upsampler pastes the JSON template's text (key order, layout) into its prompt
        "templates": {name: text.rstrip("\n") for name, text in sorted(templates.items())},
        "upsampler": {
            "module": _UPSAMPLING,
            "system_message": _jsonable(literals["SYSTEM_MESSAGE"]),
            "modes": _jsonable(literals["PROMPT_UPSAMPLER_MODES"]),
            # the table as the framework renders it into its prompt (as text: the fixture's keys are sorted)
            "resolution_ratio_dict_text": samples.pop("resolution_ratio_dict_text"),
            "templates_dir": _TEMPLATES + "/external_api",
            "template_files": _template_constants(upsampling),
            "config_defaults": _dataclass_defaults(upsampling, "PromptUpsamplerConfig"),
            "i2v_image_note": _string_assigned_in(upsampling, "build_t2v_prompt_text", "image_note"),
            "i2v_intro": _string_assigned_in(upsampling, "build_t2v_prompt_text", "intro"),
        },
        "guardrail": _guardrail_facts(files),
        "upsampler_samples": samples,
        # the negative caption the framework uses by default for video (inference/defaults), as one-line JSON
        "default_negative_prompt": json.dumps(json.loads(files.read(_NEGATIVE))),
    }


UPSAMPLER_SAMPLE = "A robot arm sorts parcels on a conveyor belt."


def _upsampler_samples(files: FrameworkFiles, templates: dict[str, str]) -> dict[str, Any]:
    """The chat messages the framework's own builders make for one sentence, per mode (its module is run from a
    temporary copy with its templates beside it; it needs only ``requests``)."""
    with tempfile.TemporaryDirectory(prefix="upsampling-") as folder:
        root = Path(folder)
        (root / "prompt_upsampling.py").write_text(files.read(_UPSAMPLING), encoding="utf-8")
        for name, text in templates.items():
            target = root / "prompting_templates" / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        module = _load("_framework_prompt_upsampling", root / "prompt_upsampling.py")
        try:
            params = {"resolution": "480", "aspect_ratio": "16,9"}
            video = {**params, "duration": "5s", "fps": 24}
            return {"sentence": UPSAMPLER_SAMPLE,
                    "text2image": {"params": params,
                                   "messages": module.build_t2i_messages(UPSAMPLER_SAMPLE, **params)},
                    "text2video": {"params": video,
                                   "messages": module.build_t2v_messages(UPSAMPLER_SAMPLE, **video)},
                    "pinned_text2video": module._apply_t2v_output_parameters({}, **video),
                    "resolution_ratio_dict_text": module._resolution_ratio_dict_text()}
        finally:
            sys.modules.pop("_framework_prompt_upsampling", None)


def _namespace_from_tree(tree: ast.Module) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target if isinstance(
            node, ast.AnnAssign) else None
        if isinstance(target, ast.Name) and node.value is not None:
            try:
                namespace[target.id] = _evaluate(node.value, namespace)
            except (ValueError, KeyError, TypeError):
                continue
    return namespace


def _template_constants(tree: ast.Module) -> dict[str, str]:
    """``T2I_JSON_TEMPLATE = _load_prompting_template("t2i_json_schema.json")`` ... as ``{constant: file}``."""
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id.endswith("_TEMPLATE")):
            calls = [n for n in ast.walk(node.value) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                     and n.func.id == "_load_prompting_template"]
            if calls:
                found[node.targets[0].id] = calls[0].args[0].value
    return found


def _dataclass_defaults(tree: ast.Module, name: str) -> dict[str, Any]:
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {item.target.id: _evaluate(item.value, {}) for item in node.body
                    if isinstance(item, ast.AnnAssign) and item.value is not None}
    raise KeyError(f"{name} not found")


def _string_assigned_in(tree: ast.Module, function: str, variable: str) -> list[str]:
    """Every string literal assigned to ``variable`` inside ``function`` (its default and its other branch)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return [item.value.value for item in ast.walk(node) if isinstance(item, ast.Assign)
                    and isinstance(item.targets[0], ast.Name) and item.targets[0].id == variable
                    and isinstance(item.value, ast.Constant)]
    raise KeyError(f"{function} not found")


def _guardrail_facts(files: FrameworkFiles) -> dict[str, Any]:
    blocklist = files.tree(_BLOCKLIST)
    init = next(n for n in ast.walk(blocklist) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    defaults = dict(zip([a.arg for a in init.args.args[-len(init.args.defaults):]],
                        [_evaluate(d, {}) for d in init.args.defaults]))
    # self.<list> = read_keyword_list_from_dir(os.path.join(self.checkpoint_dir, "<folder>"))
    folders = {node.targets[0].attr: node.value.args[0].args[1].value for node in ast.walk(init)
               if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
               and ast.unparse(node.value.func) == "read_keyword_list_from_dir"}
    checkpoint = next(n for n in ast.walk(files.tree(_GUARDRAIL_CORE)) if isinstance(n, ast.Assign)
                      and isinstance(n.targets[0], ast.Name) and n.targets[0].id == "GUARDRAIL1_CHECKPOINT")
    invisible = next(n for n in ast.walk(blocklist) if isinstance(n, ast.Assign)
                     and isinstance(n.targets[0], ast.Name) and n.targets[0].id == "INVISIBLE_CHARS")
    args_text = files.read(_GUARDRAIL_ARGS)
    return {
        "blocklist_module": _BLOCKLIST,
        "partial_match_defaults": defaults,
        "checkpoint": {kw.arg: kw.value.value for kw in checkpoint.value.keywords},
        "checkpoint_subfolder": "blocklist",
        "list_folders": folders,
        "invisible_chars": invisible.value.args[0].value,
        "calls_in_is_safe": _calls_in(blocklist, "is_safe"),
        "nltk_calls": sorted({ast.unparse(n.func) for n in ast.walk(blocklist) if isinstance(n, ast.Call)
                              and ast.unparse(n.func).startswith(("nltk.", "self.lemmatizer."))}),
        "framework_flag_default": {"guardrails": "guardrails: bool = True" in args_text},
    }


def _calls_in(tree: ast.Module, function: str) -> list[str]:
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    return [ast.unparse(n.func) for n in ast.walk(node) if isinstance(n, ast.Call)]


def better_profanity_contract(wheel: Path) -> dict[str, Any]:
    """better-profanity's word-matching facts: the look-alike character map and the word characters."""
    with zipfile.ZipFile(wheel) as archive:
        source = archive.read("better_profanity/better_profanity.py").decode()
        constants = archive.read("better_profanity/constants.py").decode()
    mapping = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Assign)
                   and isinstance(n.targets[0], ast.Attribute) and n.targets[0].attr == "CHARS_MAPPING")
    extra = next(n for n in ast.walk(ast.parse(constants)) if isinstance(n, ast.Call)
                 and ast.unparse(n.func) == "ALLOWED_CHARACTERS.update" and isinstance(n.args[0], ast.Set))
    return {"package": "better-profanity", "version": _wheel_version(wheel), "wheel_sha256": _sha256(wheel),
            "chars_mapping": _jsonable(_evaluate(mapping.value, {})),
            "extra_word_characters": _jsonable(_evaluate(extra.args[0], {})),
            "replacement_length": 4}


def vllm_omni_guardrail_contract(wheel: Path) -> dict[str, Any]:
    """Where vLLM-Omni turns the Cosmos3 guardrails off: the serve flag, the per-request key, and the shipped
    deploy configs that set ``model_config.guardrails: false`` (serving with one turns them off unannounced)."""
    import yaml

    off = []
    with zipfile.ZipFile(wheel) as archive:
        serve = archive.read("vllm_omni/entrypoints/cli/serve.py").decode()
        for name in sorted(n for n in archive.namelist() if n.startswith("vllm_omni/deploy/") and n.endswith(".yaml")):
            config = yaml.safe_load(archive.read(name)) or {}
            stages = [stage.get("model_config") or {} for stage in config.get("stages") or []]
            if any(stage.get("guardrails") is False for stage in stages):
                off.append(name)
        extras = archive.read("vllm_omni/model_extras/cosmos3.py").decode()
    flag = re.search(r'"(--no-guardrails)",\s*dest="no_guardrails"', serve)
    return {"package": "vllm-omni", "version": _wheel_version(wheel), "serve_flag": flag.group(1) if flag else None,
            "serve_flag_sets": "model_config['guardrails'] = False" if 'model_config["guardrails"] = False' in serve
            else None, "per_request_key_in_extra_params": '"guardrails"' in extras,
            "deploy_configs_with_guardrails_off": off}


def prompting_module_text(contract: dict[str, Any], fixture_name: str) -> str:
    """``cosmos_helpers/protocol/prompting.py``: the fixture's facts as Python literals, for the package: all but
    the sample messages (test data), and of the templates those the upsampler uses by default (the reasoner
    ones stay in the fixture). One line per text, so the module stays short."""
    import pprint

    used = {key: value for key, value in contract.items() if key != "upsampler_samples"}
    used["templates"] = {name: text for name, text in contract["templates"].items()
                         if name.startswith("external_api/")}

    def literal(value: Any) -> str:  # a text stays one line: pprint cuts one at each newline and every 400 characters
        return repr(value) if isinstance(value, str) else pprint.pformat(value, width=400, sort_dicts=True)

    lines = []
    for key, value in sorted(used.items()):
        if isinstance(value, dict):
            inner = "".join(f"\n        {name!r}: {literal(item)}," for name, item in sorted(value.items()))
            lines.append(f"    {key!r}: {{{inner}\n    }},")
        else:
            lines.append(f"    {key!r}: {literal(value)},")
    return (f'"""Generated by scripts/refresh_contracts.py from tests/contracts/fixtures/{fixture_name}.json: do not '
            'edit.\n\nThe Cosmos Framework\'s caption templates, prompt-upsampler prompts and blocklist-guardrail '
            'rules,\nand better-profanity\'s matching facts, as read from their code. Tests hold this module to the '
            'fixture.\n"""\n# ruff: noqa: E501\n\nFACTS = {\n' + "\n".join(lines) + "\n}\n")


def _download(requirement: str, folder: Path, pattern: str) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder), requirement],
                   check=True)
    return next(folder.glob(pattern))


def refresh_prompting(files: FrameworkFiles, profanity_wheel: Path | None, vllm_wheel: Path | None,
                      out: Path) -> None:
    """Write the prompting fixture and the package module generated from it."""
    with tempfile.TemporaryDirectory() as folder:
        wheel = profanity_wheel or _download("better-profanity", Path(folder), "better_profanity-*.whl")
        data = framework_prompting_contract(files)
        data["better_profanity"] = better_profanity_contract(wheel)
        vllm_wheel = vllm_wheel or _download(f"vllm-omni=={VLLM_OMNI_VERSION}", Path(folder), "vllm_omni-*.whl")
        data["vllm_omni_guardrails"] = vllm_omni_guardrail_contract(vllm_wheel)
    name = f"cosmos_framework_prompting-{data['commit']}"
    _write(name, data, out)
    PROMPTING_MODULE.write_text(prompting_module_text(data, name), encoding="utf-8")
    print(f"wrote {PROMPTING_MODULE}")


# ---------------------------------------------------------------------------------------------- variants

_VARIANT_CHECKPOINTS = "cosmos_framework/inference/args.py"


def variants_contract(wheel: Path, files: "FrameworkFiles") -> dict[str, Any]:
    """Facts about the distilled (4-step) checkpoints, Edge and image editing, from all three stacks.

    Everything is read without running upstream code: the framework's files and the wheel's with ``ast`` /
    YAML / JSON, diffusers' modular blocks from the installed package.
    """
    with tempfile.TemporaryDirectory(prefix="vllm-omni-") as folder:
        root = Path(folder)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(root)
        vllm = _vllm_variant_facts(root)
    import diffusers

    return {"package": "variants", "versions": {"cosmos-framework": files.commit(), "vllm-omni": _wheel_version(wheel),
                                                "diffusers": diffusers.__version__},
            "framework": _framework_variant_facts(files), "vllm_omni": vllm, "diffusers": _diffusers_variant_facts()}


def _function_strings(tree: ast.Module, name: str) -> list[str]:
    """Every string literal (f-string parts joined) inside the function ``name``: the messages it can raise."""
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            parts = {id(v) for inner in ast.walk(node) if isinstance(inner, ast.JoinedStr) for v in inner.values}
            for inner in ast.walk(node):
                if isinstance(inner, ast.JoinedStr):
                    out.append("".join(v.value if isinstance(v, ast.Constant) else "{}" for v in inner.values))
                elif (isinstance(inner, ast.Constant) and isinstance(inner.value, str) and len(inner.value) > 3
                      and id(inner) not in parts):
                    out.append(inner.value)
    return sorted(set(out))


def _call_keywords(tree: ast.Module, function: str, callee: str) -> list[list[str]]:
    """The keyword names of each ``*.callee(...)`` call inside ``function``, in source order."""
    calls = [inner for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and node.name == function
             for inner in ast.walk(node) if isinstance(inner, ast.Call) and getattr(inner.func, "attr", "") == callee]
    return [[k.arg for k in call.keywords] for call in sorted(calls, key=lambda c: c.lineno)]


def _vllm_variant_facts(root: Path) -> dict[str, Any]:
    tree = _tree(root / _PIPELINE)
    facts: dict[str, Any] = {name: _function_strings(tree, name) for name in (
        "_distilled_unsupported_error", "_validate_distilled_generation_mode", "_validate_edge_generation_mode",
        "_resolve_guidance_scale")}
    # the distilled branch (first call) passes no step count: a request's num_inference_steps is ignored
    facts["_set_timesteps_keywords"] = _call_keywords(tree, "_set_timesteps", "set_timesteps")
    return facts


def _framework_variant_facts(files: "FrameworkFiles") -> dict[str, Any]:
    import yaml

    args = files.tree(_VARIANT_CHECKPOINTS)
    checkpoints: dict[str, Any] = {}
    modes: dict[str, str] = {}
    for node in ast.walk(args):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "_CHECKPOINTS":
            for key, call in zip(node.value.keys, node.value.values):
                found = {k.arg: k.value for k in call.keywords}
                hf = {k.arg: k.value.value for k in found["hf"].keywords} if "hf" in found else {}
                overrides = ast.literal_eval(found["experiment_overrides"]) if "experiment_overrides" in found else []
                checkpoints[key.value] = {"repository": hf.get("repository"), "experiment_overrides": list(overrides)}
        if isinstance(node, ast.ClassDef) and node.name == "ModelMode":
            modes = {t.targets[0].id: t.value.value for t in node.body if isinstance(t, ast.Assign)}
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "_NUM_FRAMES_DEFAULTS":
            num_frames = ast.literal_eval(node.value)
    edge = yaml.safe_load(files.read("cosmos_framework/inference/configs/model/Cosmos3-Edge.yaml"))
    config = edge["model"]["config"]
    inference = files.tree("cosmos_framework/inference/inference.py")
    return {"checkpoints": checkpoints, "model_modes": modes, "num_frames_defaults": num_frames,
            "edge_config": {"resolution": config["resolution"], "sound_gen": config["sound_gen"],
                            "vlm_model_name": config["vlm_config"]["model_name"]},
            "image2image_defaults": json.loads(files.read("cosmos_framework/inference/defaults/image2image/"
                                                          "sample_args.json")),
            "image_edit_batch": _function_strings(inference, "_get_image_edit_sample_data")}


def _diffusers_variant_facts() -> dict[str, Any]:
    from diffusers.modular_pipelines import Cosmos3DistilledBlocks, Cosmos3OmniBlocks
    from diffusers.modular_pipelines.cosmos import before_denoise

    step = before_denoise.Cosmos3DistilledSetTimestepsStep()
    source = ast.parse(inspect.getsource(before_denoise.Cosmos3DistilledSetTimestepsStep))
    blocks = Cosmos3DistilledBlocks()
    return {"distilled_workflows": sorted(Cosmos3DistilledBlocks._workflow_map),
            "distilled_block_names": list(blocks.sub_blocks),
            "distilled_components": {spec.name: spec.type_hint.__name__ for spec in blocks.expected_components},
            "distilled_configs": {spec.name: spec.default for spec in step.expected_configs},
            "set_timesteps_messages": _function_strings(source, "__call__"),
            "omni_workflows": sorted(Cosmos3OmniBlocks._workflow_map)}
# ---------------------------------------------------------------------------------------------- image editing

_EDIT_INFERENCE = "cosmos_framework/inference/inference.py"
_EDIT_VISION = "cosmos_framework/inference/vision.py"
_EDIT_PACKERS = "cosmos_framework/data/generator/sequence_packing/packers.py"
_EDIT_MROPE = "cosmos_framework/data/generator/sequence_packing/mrope.py"
_EDIT_PLAN = "cosmos_framework/data/generator/sequence_packing/types.py"
_EDIT_PROMPTS = "cosmos_framework/model/generator/reasoner/qwen3_vl/utils.py"
# (width, height) inputs for the framework's edit resize; (offset, grid_t, grid_h, grid_w) for its edit positions
_EDIT_SIZES = ((64, 48), (1280, 720), (500, 333), (333, 500), (20, 900), (512, 512), (4000, 3000))
_EDIT_GRIDS = ((10, 1, 3, 4), (2, 1, 6, 8))


def image_edit_contract(files: "FrameworkFiles") -> dict[str, Any]:
    """What the framework's image2image does, from one revision: the literals read with ``ast``, and the outputs of
    its own pure functions (the edit resize, the position rule, which items are clean) run on example inputs.

    The functions are taken out of their modules by ``ast`` and run alone (they need only PIL, torch and math), so
    no framework interpreter is needed; ``_EDIT_SIZES`` and ``_EDIT_GRIDS`` are the inputs."""
    import math

    import torch
    from PIL import Image

    def function(path: str, name: str, **namespace: Any):
        node = next(n for n in files.tree(path).body if isinstance(n, ast.FunctionDef) and n.name == name)
        exec(compile(ast.Module(body=[node], type_ignores=[]), path, "exec"), namespace)  # noqa: S102
        return namespace[name]

    inference = files.tree(_EDIT_INFERENCE)
    edit = next(n for n in ast.walk(inference) if isinstance(n, ast.FunctionDef)
                and n.name == "_get_image_edit_sample_data")
    resize_call = next(n for n in ast.walk(edit) if isinstance(n, ast.Call)
                       and getattr(n.func, "id", "") == "resize_pil_image")
    resize = function(_EDIT_VISION, "resize_pil_image", Image=Image)
    mrope = function(_EDIT_MROPE, "get_3d_mrope_ids_vae_tokens", math=math, torch=torch)
    clean = function(_EDIT_PACKERS, "resolve_item_condition_frames")
    plan = next(n for n in ast.walk(files.tree(_EDIT_PLAN)) if isinstance(n, ast.ClassDef) and n.name == "SequencePlan")
    share = next(n.value.value for n in plan.body if isinstance(n, ast.AnnAssign)
                 and n.target.id == "share_vision_temporal_positions")
    batch = next(n for n in ast.walk(files.tree(_EDIT_VISION)) if isinstance(n, ast.FunctionDef)
                 and n.name == "build_image_edit_batch")
    items = next(v.elt.value for n in ast.walk(batch) if isinstance(n, ast.Dict)
                 for k, v in zip(n.keys, n.values) if getattr(k, "value", None) == "num_vision_items_per_sample")
    keywords = {k.arg: ast.literal_eval(k.value) for k in resize_call.keywords if k.arg != "image"}
    positions = []
    for offset, t, h, w in _EDIT_GRIDS:
        first, after = mrope(t, h, w, offset)
        second, end = mrope(t, h, w, after)
        positions.append({"offset": offset, "grid": [t, h, w], "first": first.tolist(), "second": second.tolist(),
                          "next_offsets": [after, end]})
    prompts = files.tree(_EDIT_PROMPTS)
    system = next(n.value.value for n in prompts.body if isinstance(n, ast.Assign)
                  and n.targets[0].id == "_SYSTEM_PROMPT_IMAGE_EDITING")
    return {"package": "cosmos-framework", "commit": files.commit(), "system_prompt": system,
            "system_prompt_set_in": sorted(set(_function_strings(inference, "_get_image_edit_sample_data"))),
            "resize_keywords": keywords, "vision_items_per_sample": items, "share_temporal_positions": share,
            "resized": [[w, h, *resize(Image.new("RGB", (w, h)), **keywords).size] for w, h in _EDIT_SIZES],
            "positions": positions,
            "clean_frames": [clean([], item_idx=i, num_items=items, latent_t=1) for i in range(items)]}


# ---------------------------------------------------------------------------------------------- action facts

_DIFFUSERS_ACTION_TABLES = ("_ACTION_RESOLUTION_BINS", "_ACTION_VIEWPOINT_TEMPLATES", "_EMBODIMENT_TO_DOMAIN_ID",
                            "_EMBODIMENT_TO_RAW_ACTION_DIM")
_FRAMEWORK_ACTION_FILES = ("cosmos_framework/data/generator/action/utils/domain_utils.py",
                           "cosmos_framework/data/generator/action/action_normalization.py",
                           "cosmos_framework/inference/args.py", "cosmos_framework/inference/action.py")
# Datasets whose loader defaults give an embodiment's clip timing (chunk length and fps).
_DATASETS = {"droid_lerobot": "cosmos_framework/data/generator/action/datasets/droid_lerobot_dataset.py",
             "umi": "cosmos_framework/data/generator/action/datasets/umi_lerobot_dataset.py",
             "bridge_orig_lerobot": "cosmos_framework/data/generator/action/datasets/bridge_orig_lerobot_dataset.py"}
_STATS_DIR = "cosmos_framework/data/generator/action/normalizer_stats"


def action_contract(wheel: Path, framework: Path) -> dict[str, Any]:
    """The action-mode facts of all three stacks, in one fixture (``cosmos_helpers/protocol/action.py``'s oracle).

    ``framework`` is a checkout or a bare git directory (read at ``HEAD`` with ``git show``)."""
    import diffusers

    with tempfile.TemporaryDirectory(prefix="action-facts-") as folder:
        root = Path(folder)
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(root / "wheel")
        commit, files = _framework_files(framework, root / "framework")
        return {"package": "action facts", "diffusers": {"version": diffusers.__version__, **_diffusers_action()},
                "framework": {"commit": commit, **_framework_action(files)},
                "vllm_omni": {"version": _wheel_version(wheel), **_vllm_action(root / "wheel")}}


def _framework_files(source: Path, target: Path) -> tuple[str, dict[str, Path]]:
    """The framework files the action facts are read from, as local paths, and the commit they are from."""
    bare = not (source / "cosmos_framework").is_dir()
    git = ["git", "--git-dir", str(source)] if bare else ["git", "-C", str(source)]
    commit = subprocess.run([*git, "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    names = subprocess.run([*git, "ls-tree", "-r", "--name-only", "HEAD", _STATS_DIR], capture_output=True,
                           text=True, check=True).stdout.split()
    files: dict[str, Path] = {}
    for name in (*_FRAMEWORK_ACTION_FILES, *_DATASETS.values(), *names):
        if not bare:
            files[name] = source / name
            continue
        files[name] = target / name
        files[name].parent.mkdir(parents=True, exist_ok=True)
        files[name].write_bytes(subprocess.run([*git, "show", f"HEAD:{name}"], capture_output=True,
                                               check=True).stdout)
    return commit, files


def _diffusers_action() -> dict[str, Any]:
    """The pipeline's action tables, ``CosmosActionCondition``'s fields, the modular action blocks with their
    inputs, and the transformer parameters an action run needs (from a two-layer transformer built here)."""
    import dataclasses

    import torch
    from diffusers import Cosmos3OmniTransformer
    from diffusers.modular_pipelines.cosmos import modular_blocks_cosmos3 as blocks
    from diffusers.pipelines.cosmos import pipeline_cosmos3_omni as pipeline

    path = Path(pipeline.__file__)
    condition = {f.name: (None if f.default is dataclasses.MISSING else f.default)
                 for f in dataclasses.fields(pipeline.CosmosActionCondition)}
    modular = {name: sorted(p.name for p in getattr(blocks, name)().inputs)
               for name in sorted(dir(blocks)) if name.startswith("Cosmos3Action")}
    torch.manual_seed(0)
    transformer = Cosmos3OmniTransformer(hidden_size=32, intermediate_size=64, head_dim=16, num_attention_heads=2,
                                         num_key_value_heads=1, num_hidden_layers=1, rope_axes_dim=[4, 2, 2],
                                         vocab_size=64, action_gen=True, action_dim=64)
    return {"tables": {name: _module_literal(path, name) for name in _DIFFUSERS_ACTION_TABLES},
            "CosmosActionCondition": condition, "modular_action_blocks": modular,
            "transformer_action_parameters": sorted(n for n, _ in transformer.named_parameters() if "action" in n),
            "transformer_action_config": {k: v.default for k, v in inspect.signature(Cosmos3OmniTransformer)
                                          .parameters.items() if "action" in k or "embodiment" in k}}


def _framework_action(files: dict[str, Path]) -> dict[str, Any]:
    domain = files[_FRAMEWORK_ACTION_FILES[0]]
    normalization = files[_FRAMEWORK_ACTION_FILES[1]].read_text(encoding="utf-8")
    args = files[_FRAMEWORK_ACTION_FILES[2]].read_text(encoding="utf-8")
    model_mode = args[args.index("class ModelMode"):]
    model_mode = model_mode[:model_mode.index("\nclass ", 1)]
    modes = re.findall(r'^    ([A-Z0-9_]+) = "([a-z0-9_]+)"', model_mode, re.MULTILINE)
    stats = {Path(name).stem: {key: len(values) for key, values in json.loads(path.read_text()).items()}
             for name, path in files.items() if name.startswith(_STATS_DIR) and name.endswith(".json")}
    return {"EMBODIMENT_TO_DOMAIN_ID": _module_literal(domain, "EMBODIMENT_TO_DOMAIN_ID"),
            "EMBODIMENT_TO_RAW_ACTION_DIM": _module_literal(domain, "EMBODIMENT_TO_RAW_ACTION_DIM"),
            "model_modes": dict(modes),
            "normalization_methods": list(dict.fromkeys(re.findall(r'if method == "([a-z]+)"', normalization))),
            "inference_action_normalizer": re.findall(r"action_normalizer=(\w+)",
                                                      files[_FRAMEWORK_ACTION_FILES[3]].read_text(encoding="utf-8")),
            "normalizer_stats_widths": stats, "dataset_timing": {
                embodiment: {key: float(value) for key, value in re.findall(
                    r"^\s+(fps|chunk_length): (?:float|int) = ([0-9.]+)", files[path].read_text(encoding="utf-8"),
                    re.MULTILINE)} for embodiment, path in _DATASETS.items()}}


def _vllm_action(root: Path) -> dict[str, Any]:
    action = root / "vllm_omni/diffusion/models/cosmos3/action.py"
    namespace = _module_namespace(action)
    return {"ACTION_MODES": sorted(namespace["ACTION_MODES"]),
            "EMBODIMENT_TO_DOMAIN_ID": _module_literal(action, "EMBODIMENT_TO_DOMAIN_ID")}


# ---------------------------------------------------------------------------------------------- main


def _download_wheel(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(folder),
                    f"vllm-omni=={VLLM_OMNI_VERSION}"], check=True)
    return next(folder.glob("vllm_omni-*.whl"))


def _write(name: str, data: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob(f"{name.split('-')[0]}-*.json"):
        stale.unlink()
    path = out / f"{name}.json"
    path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vllm-omni-wheel", type=Path, help="the vllm-omni wheel (default: pip download it)")
    parser.add_argument("--framework", type=Path, help="a cosmos-framework checkout")
    parser.add_argument("--framework-python", help="an interpreter that imports cosmos_framework "
                                                   "(default: <checkout>/.venv/bin/python)")
    parser.add_argument("--framework-commit", help="the checkout's commit, when it is not a git work tree")
    parser.add_argument("--framework-git-dir", type=Path, help="a cosmos-framework git repository (bare is fine), "
                                                                 "read at --framework-rev, for the prompting, control, "
                                                                 "variant and action facts")
    parser.add_argument("--framework-rev", default="HEAD")
    parser.add_argument("--better-profanity-wheel", type=Path, help="default: pip download it")
    parser.add_argument("--only", choices=("vllm-omni", "framework", "framework-controls", "diffusers", "prompting",
                                              "variants", "action", "image-edit", "fp8", "step-cache", "ray-serve",
                                              "diffusers-behaviour", "control-maps"),
                        action="append", help="framework-controls: update only the control facts of the existing "
                        "framework fixture (read with ast: no framework interpreter needed)")
    parser.add_argument("--out", type=Path, default=FIXTURES)
    args = parser.parse_args(argv)
    wanted = set(args.only or ("vllm-omni", "framework", "diffusers", "prompting", "variants"))
    if "vllm-omni" in wanted:
        with tempfile.TemporaryDirectory() as folder:
            wheel = args.vllm_omni_wheel or _download_wheel(Path(folder))
            data = vllm_omni_contract(wheel)
        _write(f"vllm_omni-{data['version']}", data, args.out)
    if "framework" in wanted:
        if args.framework is None:
            parser.error("--framework CHECKOUT is needed for the framework fixture (or --only another)")
        python = args.framework_python or str(args.framework / ".venv/bin/python")
        data = framework_contract(args.framework.resolve(), python, args.framework_commit)
        # the sample schema ships with the package (the framework stand-in validates inputs with it): one home there
        _write(f"framework_sample_schema-{data['commit']}", data.pop("sample_overrides_schema"), PACKAGE_DATA)
        _write(f"cosmos_framework-{data['commit']}", data, args.out)
    if wanted & {"prompting", "framework-controls", "variants", "image-edit", "fp8", "step-cache", "ray-serve",
                 "control-maps"}:
        if args.framework is None and args.framework_git_dir is None:
            parser.error("--framework CHECKOUT or --framework-git-dir REPO is needed for the prompting, control, "
                         "variant and action facts")
        files = FrameworkFiles(args.framework and args.framework.resolve(), args.framework_git_dir, args.framework_rev)
    if "prompting" in wanted:
        refresh_prompting(files, args.better_profanity_wheel, args.vllm_omni_wheel, args.out)
    if "framework-controls" in wanted:
        fixture = next(args.out.glob("cosmos_framework-*.json"))
        data = {**json.loads(fixture.read_text(encoding="utf-8")), **framework_control_facts(files)}
        _write(fixture.stem, data, args.out)
    if "diffusers" in wanted:
        data = diffusers_contract()
        _write(f"diffusers-{data['version']}", data, args.out)
    if "diffusers-behaviour" in wanted:  # the real pipeline run on the tiny model (scripts/diffusers_behaviour.py)
        behaviour = _load("diffusers_behaviour", Path(__file__).with_name("diffusers_behaviour.py"))
        data = behaviour.diffusers_behaviour_contract()
        _write(f"diffusers_behaviour-{data['version']}", data, args.out)
    if "control-maps" in wanted:  # the framework's edge/blur augmentors run on the test clip: the goldens
        _load("framework_control_maps", Path(__file__).with_name("framework_control_maps.py")).write_goldens(files)
    if "variants" in wanted:  # files only: a bare repository (no framework interpreter) is enough
        with tempfile.TemporaryDirectory() as folder:
            wheel = args.vllm_omni_wheel or _download_wheel(Path(folder))
            data = variants_contract(wheel, files)
        _write("variants-" + "_".join(data["versions"].values()), data, args.out)
    if "action" in wanted:
        _write_action_facts(args, parser)
    if "image-edit" in wanted:  # files only, and three pure functions of them run here
        data = image_edit_contract(files)
        _write(f"image_edit-{data['commit']}", data, args.out)
    if "fp8" in wanted:  # diffusers computes its own schedules; the wheel and the framework are read with ast
        fp8_facts = _load("fp8_facts", Path(__file__).with_name("fp8_facts.py"))
        with tempfile.TemporaryDirectory() as folder:
            wheel = args.vllm_omni_wheel or _download_wheel(Path(folder))
            data = fp8_facts.fp8_contract(wheel, files)
        _write("fp8-" + "-".join(data["versions"].values()), data, args.out)
    if "step-cache" in wanted:  # files only (ast) and the installed diffusers
        from contracts_step_cache import step_cache_contract  # beside this script

        with tempfile.TemporaryDirectory() as folder:
            wheel = args.vllm_omni_wheel or _download_wheel(Path(folder))
            data = step_cache_contract(wheel, files.read, files.commit())
        _write(f"step_cache-{data['diffusers']['version']}-{data['framework']['commit']}-"
               f"{data['vllm_omni']['version']}", data, args.out)
    if "ray-serve" in wanted:  # files read with ast, models run alone under pydantic (scripts/ray_serve_contract.py)
        ray_facts = _load("ray_serve_contract", Path(__file__).with_name("ray_serve_contract.py"))
        data = ray_facts.ray_serve_contract(files, f"framework_sample_schema-{files.commit()}.json")
        _write(f"ray_serve-{data['commit']}", data, args.out)
    return 0


def _write_action_facts(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    framework = args.framework_git_dir or args.framework
    if framework is None:
        parser.error("--framework-git-dir (or --framework) is needed for the action facts (or --only another)")
    with tempfile.TemporaryDirectory() as folder:
        wheel = args.vllm_omni_wheel or _download_wheel(Path(folder))
        data = action_contract(wheel, framework.resolve())
    _write(f"action_facts-{data['diffusers']['version']}-{data['framework']['commit']}-"
           f"{data['vllm_omni']['version']}", data, args.out)


if __name__ == "__main__":
    sys.exit(main())
