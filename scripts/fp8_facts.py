"""The FP8 facts of the real stack, for ``scripts/refresh_contracts.py --only fp8`` (one fixture, three upstreams).

* **diffusers** (installed): ``Cosmos3OmniPipeline.__call__``'s ``mixed_precision_*`` arguments and their defaults;
  ``pipelines/cosmos/mixed_precision.py``'s policy fields, official policy, formats and reasoner policies, how a
  policy's ``reasoner`` word maps to a call's reasoner policy, and the per-step schedule its own
  ``Cosmos3MixedPrecisionConfig`` resolves for the official policy at several step counts (with and without
  overrides): diffusers' answer, computed by diffusers.
* **vLLM-Omni** (the wheel, read with ``ast``, nothing imported): the serve flags' ``add_argument`` keywords, the
  ``cosmos3_mixed_precision`` override's key, fields and defaults, the checkpoint policy's fields, and the engine
  config fields behind ``--revision`` / ``--force-cutlass-fp8`` / ``--diffusion-kv-cache-dtype``.
* **cosmos-framework** (a checkout or a bare git directory): ``QuantizationMethod``'s values and
  ``QuantizationOverrides``' defaults (``inference/common/args.py``), the file that marks a ModelOpt FP8 checkpoint
  folder and the values it must hold (``utils/generator/quantization.py``), and whether the tree has a diffusion-step
  policy at all.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import zipfile
from pathlib import Path
from typing import Any

_SERVE = "vllm_omni/entrypoints/cli/serve.py"
_MIXED = "vllm_omni/diffusion/models/cosmos3/mixed_precision/"
_OMNI_CONFIG = "vllm_omni/config/omni_config.py"
_VLLM_FLAGS = ("--diffusion-quantization-config", "--force-cutlass-fp8", "--diffusion-kv-cache-dtype")
_FW_ARGS = "cosmos_framework/inference/common/args.py"
_FW_QUANT = "cosmos_framework/utils/generator/quantization.py"
STEP_COUNTS = (1, 2, 4, 6, 8, 35)


def fp8_contract(wheel: Path, files: Any) -> dict[str, Any]:
    diffusers = diffusers_facts()
    vllm = vllm_facts(wheel)
    framework = framework_facts(files)
    return {"versions": {"diffusers": diffusers["version"], "vllm_omni": vllm["version"],
                         "framework": framework["commit"]},
            "diffusers": diffusers, "vllm_omni": vllm, "framework": framework}


def diffusers_facts() -> dict[str, Any]:
    import diffusers
    from diffusers import Cosmos3OmniPipeline
    from diffusers.pipelines.cosmos import mixed_precision as mp

    params = inspect.signature(Cosmos3OmniPipeline.__call__).parameters
    official = dict(mp.FIRST_LAST_N_FP8_POLICY)
    quant = {"quant_method": "modelopt", "quant_type": "FP8", "runtime": {"diffusion_step_policy": official}}

    def schedule(**overrides: Any) -> dict[str, list[str]]:
        config = mp.Cosmos3MixedPrecisionConfig.resolve(quantization_config=quant, **overrides)
        return {str(n): [config.precision_name(i, n) for i in range(n)] for n in STEP_COUNTS}

    defaults = mp.Cosmos3MixedPrecisionConfig()
    return {
        "version": diffusers.__version__,
        "call_arguments": {name: p.default for name, p in params.items() if name.startswith("mixed_precision_")},
        "policy_fields": list(mp._REQUIRED_POLICY_FIELDS), "official_policy": official,
        "formats": sorted(mp.MIXED_PRECISION_FORMATS), "reasoner_policies": sorted(mp.REASONER_POLICIES),
        "reasoner_from_policy": {word: mp.parse_diffusion_step_policy({**official, "reasoner": word}).reasoner_policy
                                 for word in ("a16", "native")},
        "config_defaults": {"format": defaults.format, "first_steps": defaults.first_steps,
                            "last_steps": defaults.last_steps, "reasoner_policy": defaults.reasoner_policy},
        "schedules": {"checkpoint": schedule(),
                      "first_1_last_2": schedule(mixed_precision_first_steps=1, mixed_precision_last_steps=2),
                      "format_none": schedule(mixed_precision_format="none"),
                      "reasoner_base": {"reasoner_policy": mp.Cosmos3MixedPrecisionConfig.resolve(
                          quantization_config=quant, mixed_precision_reasoner_policy="base_precision"
                      ).reasoner_policy}},
        "no_policy": mp.Cosmos3MixedPrecisionConfig.resolve(
            quantization_config={"quant_method": "modelopt", "quant_type": "FP8"}).format,
    }


def vllm_facts(wheel: Path) -> dict[str, Any]:
    with zipfile.ZipFile(wheel) as archive:
        def tree(path: str) -> ast.Module:
            return ast.parse(archive.read(path).decode("utf-8"), filename=path)

        version = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        version = archive.read(version).decode().split("\nVersion: ", 1)[1].split("\n", 1)[0]
        serve, config = tree(_SERVE), tree(_MIXED + "config.py")
        checkpoint, omni = tree(_MIXED + "checkpoint.py"), tree(_OMNI_CONFIG)
    flags = {}
    for call in ast.walk(serve):
        if (isinstance(call, ast.Call) and getattr(call.func, "attr", "") == "add_argument" and call.args
                and isinstance(call.args[0], ast.Constant) and call.args[0].value in _VLLM_FLAGS):
            flags[call.args[0].value] = {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg != "help"}
            flags[call.args[0].value]["help"] = _string(next(k.value for k in call.keywords if k.arg == "help"))
    keys = sorted({node.slice.value for node in ast.walk(_function(config, "resolve_additional_config"))
                   if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
                   and isinstance(node.slice.value, str) and getattr(node.value, "id", "") == "values"})
    dataclass = next(n for n in config.body if isinstance(n, ast.ClassDef) and n.name == "Cosmos3MixedPrecisionConfig")
    return {
        "version": version, "serve_flags": flags, "additional_config_keys": keys,
        "override_fields": _literal(config, "_CONFIG_FIELDS"),
        "override_reasoner": _literal(config, "_REASONER_POLICIES"),
        "override_defaults": {n.target.id: ast.literal_eval(n.value) for n in dataclass.body
                              if isinstance(n, ast.AnnAssign) and n.value is not None},
        "policy_fields": _literal(checkpoint, "_POLICY_FIELDS"),
        "step_range_fields": _literal(checkpoint, "_STEP_RANGE_FIELDS"),
        "modelopt_configs": _literal(checkpoint, "_SUPPORTED_MODEL_OPT_CONFIGS"),
        "engine_fields": {name: default for name, default in _class_fields(omni).items()
                          if name in ("revision", "force_cutlass_fp8", "diffusion_kv_cache_dtype")},
    }


def framework_facts(files: Any) -> dict[str, Any]:
    args, quant = files.tree(_FW_ARGS), files.tree(_FW_QUANT)
    literal = next(n for n in args.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "")
                   == "QuantizationMethod")
    overrides = next(n for n in args.body if isinstance(n, ast.ClassDef) and n.name == "QuantizationOverrides")
    fields = {n.target.id: ast.unparse(n.value) for n in overrides.body if isinstance(n, ast.AnnAssign)}
    check = _function(quant, "is_modelopt_fp8_checkpoint")
    strings = [n.value for n in ast.walk(check) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    return {
        "commit": files.commit(),
        "quantization_methods": [e.value for e in ast.walk(literal.value) if isinstance(e, ast.Constant)],
        "quantization_overrides": fields,
        "quantization_flag": "--" + "quantization_method".replace("_", "-"),  # tyro's spelling of the field
        "modelopt_marker": next(s for s in strings if s.endswith(".json")),
        "modelopt_required": {"quant_method": "modelopt", "quant_algo": "FP8"} if {"modelopt", "FP8"} <= set(strings)
        else None,
        "step_policy_files": _grep(files, "diffusion_step_policy") + _grep(files, "mixed_precision"),
    }


def _grep(files: Any, word: str) -> list[str]:
    try:
        return sorted(files._git("grep", "-l", "-e", word, files.rev, "--", "*.py").split())
    except subprocess.CalledProcessError as exc:
        if exc.returncode == 1:  # git grep: no match
            return []
        raise


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    return next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)


def _literal(tree: ast.Module, name: str) -> Any:
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == name:
            call = node.value
            value = ast.literal_eval(call.args[0] if isinstance(call, ast.Call) else call)
            return sorted(value) if isinstance(value, (set, frozenset)) else value
    raise KeyError(name)


def _class_fields(tree: ast.Module) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    try:
                        out.setdefault(item.target.id, ast.literal_eval(item.value))
                    except ValueError:
                        continue
    return out


def _string(node: ast.AST) -> str:
    return ast.literal_eval(node) if not isinstance(node, ast.JoinedStr) else ast.unparse(node)
