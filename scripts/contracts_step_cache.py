"""Step caching (SeaCache) in the three real stacks, read from their code (``refresh_contracts.py --only step-cache``).

* **diffusers** (installed): ``SeaCacheConfig``'s fields and defaults (``dataclasses.fields``) and the residual orders
  its own validation accepts (it is constructed with each of 0..3).
* **vLLM-Omni** (the wheel, read with ``ast``: nothing of vLLM is imported): the ``--cache-backend`` /
  ``--cache-config`` flags of ``vllm serve`` (``entrypoints/cli/serve.py``), the backend names its selector accepts
  (``diffusion/cache/selector.py``), the ``--cache-config`` keys the SeaCache adapter reads and their defaults
  (``diffusion/cache/seacache/backend.py``, ``diffusion/data.py`` ``DiffusionCacheConfig``), what ``from_dict`` does
  with a key it does not know, its SeaCache validation, the steps it always computes (``seacache/hook.py``) and the
  pipelines it has an adapter for.
* **cosmos-framework** (a checkout or a bare repository, read with ``git show``; nothing executed): the setup fields
  behind ``--[no-]diffusion-cache``, ``--diffusion-cache-thresh``, ``--diffusion-cache-residual-order`` and their
  defaults (``inference/common/args.py``), the CLI's own default (``scripts/inference.py``:
  ``OmniSetupOverrides.model_construct(diffusion_cache=True)``), which config key each flag sets
  (``inference/inference.py``), and ``DiffusionCache.Config``'s defaults and checks
  (``model/generator/mot/diffusion_cache.py``).
"""

from __future__ import annotations

import ast
import dataclasses
import re
import zipfile
from pathlib import Path
from typing import Any, Callable

_SERVE = "vllm_omni/entrypoints/cli/serve.py"
_SELECTOR = "vllm_omni/diffusion/cache/selector.py"
_DATA = "vllm_omni/diffusion/data.py"
_SEA_BACKEND = "vllm_omni/diffusion/cache/seacache/backend.py"
_SEA_CONFIG = "vllm_omni/diffusion/cache/seacache/config.py"
_SEA_HOOK = "vllm_omni/diffusion/cache/seacache/hook.py"
_FW_SCRIPT = "cosmos_framework/scripts/inference.py"
_FW_ARGS = "cosmos_framework/inference/common/args.py"
_FW_INFERENCE = "cosmos_framework/inference/inference.py"
_FW_CACHE = "cosmos_framework/model/generator/mot/diffusion_cache.py"
_FW_FIELDS = ("diffusion_cache", "diffusion_cache_thresh", "diffusion_cache_residual_order")


def step_cache_contract(wheel: Path, read_framework: Callable[[str], str], framework_commit: str) -> dict[str, Any]:
    """The fixture: ``{"diffusers": ..., "vllm_omni": ..., "framework": ...}`` (see the module docstring).
    ``read_framework(path)`` returns a framework file's text at ``framework_commit``."""
    import diffusers

    with zipfile.ZipFile(wheel) as archive:
        def read_vllm(path: str) -> str:
            return archive.read(path).decode("utf-8")

        vllm = _vllm_facts(read_vllm)
    version = re.match(r"vllm_omni-([^-]+)-", wheel.name).group(1)
    return {"package": "step cache facts",
            "diffusers": {"version": diffusers.__version__, **_diffusers_facts()},
            "vllm_omni": {"version": version, **vllm},
            "framework": {"commit": framework_commit, **_framework_facts(read_framework)}}


# ---------------------------------------------------------------------------------------------- diffusers


def _diffusers_facts() -> dict[str, Any]:
    from diffusers import SeaCacheConfig

    defaults = {f.name: f.default for f in dataclasses.fields(SeaCacheConfig) if not callable(f.default)
                and f.default is not None}

    def accepts(order: int) -> bool:
        try:
            SeaCacheConfig(residual_order=order)
        except ValueError:
            return False
        return True

    return {"SeaCacheConfig": defaults, "accepted_residual_orders": [k for k in range(4) if accepts(k)],
            "enable": "transformer.enable_cache(SeaCacheConfig(...))"}


# ---------------------------------------------------------------------------------------------- vLLM-Omni


def _vllm_facts(read: Callable[[str], str]) -> dict[str, Any]:
    data = ast.parse(read(_DATA))
    cache_config = _class(data, "DiffusionCacheConfig")
    fields = _class_fields(cache_config)
    reads = _keyword_attributes(ast.parse(read(_SEA_BACKEND)), "SeaCacheConfig")
    sea_config = _class(ast.parse(read(_SEA_CONFIG)), "SeaCacheConfig")
    from_dict = next(n for n in cache_config.body if isinstance(n, ast.FunctionDef) and n.name == "from_dict")
    backend_tree = ast.parse(read(_SEA_BACKEND))
    enablers = next(n.value for n in backend_tree.body if isinstance(n, ast.Assign)
                    and getattr(n.targets[0], "id", "") == "CUSTOM_SEACACHE_ENABLERS")
    return {
        "serve_flags": _serve_flags(ast.parse(read(_SERVE)), ("--cache-backend", "--cache-config")),
        "cache_backends": _selector_names(ast.parse(read(_SELECTOR))),
        "sea_cache_keys": {key: fields[key] for key in reads.values()},  # --cache-config key -> default
        "sea_cache_reads": reads,  # SeaCacheConfig argument -> the --cache-config key it is given
        "config_fields": sorted(n.target.id for n in cache_config.body if isinstance(n, ast.AnnAssign)
                                and not n.target.id.startswith("_")),
        "unknown_keys_kept": "_extra_params" in ast.unparse(from_dict) and "raise ValueError" not in
        ast.unparse(from_dict),
        "sea_config_checks": _checks(sea_config),
        "always_computed": _forced_steps(ast.parse(read(_SEA_HOOK))),
        "pipelines": [ast.literal_eval(key) for key in enablers.keys],
    }


def _serve_flags(tree: ast.Module, flags: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument" and node.args:
            name = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
            if name in flags:
                keywords = {k.arg: k.value for k in node.keywords}
                found[name] = {"default": ast.literal_eval(keywords["default"]),
                               "type": ast.unparse(keywords["type"]) if "type" in keywords else None}
    return found


def _selector_names(tree: ast.Module) -> list[str]:
    """Every name ``get_cache_backend`` accepts: those it compares ``cache_backend`` with (``none`` returns None)."""
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_cache_backend")
    names: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Compare) and getattr(node.left, "id", "") == "cache_backend":
            for comparator in node.comparators:
                values = comparator.elts if isinstance(comparator, ast.Tuple) else [comparator]
                names += [v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    return sorted(dict.fromkeys(names))


def _keyword_attributes(tree: ast.Module, callee: str) -> dict[str, str]:
    """``callee(a=config.b, ...)`` -> ``{"a": "b"}``."""
    call = next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == callee)
    return {k.arg: k.value.attr for k in call.keywords if isinstance(k.value, ast.Attribute)}


def _forced_steps(tree: ast.Module) -> dict[str, Any]:
    """The hook's gate: ``step < N`` (first steps) and ``step >= num_inference_steps - M`` (last steps) always run."""
    gate = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_resolve_gate")
    out: dict[str, Any] = {}
    for node in ast.walk(gate):
        if isinstance(node, ast.Compare) and getattr(node.left, "id", "") == "step":
            right = node.comparators[0]
            if isinstance(node.ops[0], ast.Lt) and isinstance(right, ast.Constant):
                out["first_steps"] = right.value
            if isinstance(node.ops[0], ast.GtE) and isinstance(right, ast.BinOp) and isinstance(right.right,
                                                                                               ast.Constant):
                out["last_steps"] = right.right.value
    return out


# ---------------------------------------------------------------------------------------------- framework


def _framework_facts(read: Callable[[str], str]) -> dict[str, Any]:
    args = ast.parse(read(_FW_ARGS))
    setup = _class(args, "SetupOverrides")
    fields = {n.target.id: {"type": ast.unparse(n.annotation), "default": ast.literal_eval(n.value)}
              for n in setup.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
              and n.target.id in _FW_FIELDS}
    script = ast.parse(read(_FW_SCRIPT))
    construct = next(n for n in ast.walk(script) if isinstance(n, ast.Call)
                     and getattr(n.func, "attr", "") == "model_construct")
    cache = ast.parse(read(_FW_CACHE))
    config = _class(_class(cache, "DiffusionCache"), "Config")
    return {
        "setup_fields": fields,  # tyro makes each a flag: --diffusion-cache[/--no-...], --diffusion-cache-thresh, ...
        "flags": {name: "--" + name.replace("_", "-") for name in fields},
        "off_flag": "--no-" + "diffusion_cache".replace("_", "-"),
        "cli_setup": {k.arg: ast.literal_eval(k.value) for k in construct.keywords},  # the CLI's own defaults
        "config_keys": _override_keys(ast.parse(read(_FW_INFERENCE))),  # setup field -> DiffusionCache.Config key
        "config_defaults": _class_fields(config),
        "config_checks": _checks(config),
    }


def _override_keys(tree: ast.Module) -> dict[str, str]:
    """``config_overrides["key"] = setup_args.field`` -> ``{"field": "key"}``."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Subscript) and \
                getattr(node.targets[0].value, "id", "") == "config_overrides" and \
                isinstance(node.value, ast.Attribute):
            out[node.value.attr] = ast.literal_eval(node.targets[0].slice)
    return out


# ---------------------------------------------------------------------------------------------- ast helpers


def _class(tree: ast.AST, name: str) -> ast.ClassDef:
    body = tree.body if isinstance(tree, (ast.Module, ast.ClassDef)) else []
    return next(n for n in body if isinstance(n, ast.ClassDef) and n.name == name)


def _class_fields(node: ast.ClassDef) -> dict[str, Any]:
    """A dataclass's annotated fields with a literal default (``field(default_factory=...)`` ones are skipped)."""
    out = {}
    for item in node.body:
        if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
            try:
                out[item.target.id] = ast.literal_eval(item.value)
            except ValueError:
                continue
    return out


def _checks(node: ast.ClassDef) -> dict[str, str]:
    """``__post_init__``'s conditions that raise, by the field they name."""
    post = next((n for n in node.body if isinstance(n, ast.FunctionDef) and n.name == "__post_init__"), None)
    out: dict[str, str] = {}
    for item in ast.walk(post) if post else ():
        if isinstance(item, ast.If) and any(isinstance(s, ast.Raise) for s in item.body):
            test = ast.unparse(item.test)
            name = next(iter(re.findall(r"self\.(\w+)", test)), None)
            if name:
                out[name] = test
    return out
