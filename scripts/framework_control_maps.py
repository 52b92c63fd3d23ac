"""Edge and blur control-map goldens made by the Cosmos Framework's own augmentor code.

``tests/transfer/test_controls.py`` holds ``cosmos_helpers.controls.maps`` to these maps, so the oracle is the
framework, not our functions. The code is read from one framework revision (a checkout or a bare git directory,
``FrameworkFiles``) and executed here with its real third-party imports (cv2, numpy, torch, attrs):

* ``blur.py``, ``fast_blur.py`` (the CUDA NPP bilateral, only constructed with ``use_cuda``, never here) and the
  ``Augmentor`` base class (``augmentor.py``) run whole, as modules under their own names below empty parent
  packages.
* From ``control_input.py`` only ``_maybe_torch_to_numpy``, ``AddControlInputEdge`` and ``AddControlInputBlur``
  run, with the module's own import statements. Four imports are left out (not stubbed): ``torchvision``,
  ``pycocotools.mask``, ``cosmos_framework.utils.log`` and ``seg.py``'s helpers serve only the depth and seg
  augmentors (and ``log`` only a commented-out line); ``_extract`` checks that the three taken definitions do not
  name them.
* The augmentors are built with the keywords ``inference/transfer.py``'s ``apply_transfer_control_augmentor``
  gives them (read from its ``ast``: ``use_random=False`` and the preset), and get the clip as that function does:
  a uint8 ``(C, T, H, W)`` torch tensor (``inference/vision.py`` ``read_and_resize_media``).

Nothing is random with ``use_random=False`` (fixed Canny thresholds per preset; one blur combination with
probability 1 and fixed bilateral parameters), so the maps are exact. Run through
``scripts/refresh_contracts.py --only control-maps --framework-git-dir REPO``.
"""

from __future__ import annotations

import ast
import json
import sys
import types
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOLDEN_DIR = REPO / "tests" / "transfer" / "golden"
_PACKAGE = "cosmos_framework.data.generator.augmentors.transfer_control_input"
_FOLDER = _PACKAGE.replace(".", "/")
_BASE = "cosmos_framework.data.imaginaire.webdataset.augmentors.augmentor"
_TRANSFER = "cosmos_framework/inference/transfer.py"
_TAKEN = ("_maybe_torch_to_numpy", "AddControlInputEdge", "AddControlInputBlur")
_LEFT_OUT = {"torchvision.transforms.functional": "transforms_F", "pycocotools": "mask_utils",
             "cosmos_framework.utils": "log", f"{_PACKAGE}.seg": "decode_partial_rle_width1, segmentation_color_mask"}


def _module(name: str, source: str, path: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    exec(compile(source, path, "exec"), module.__dict__)  # noqa: S102 - the framework's own code, on purpose
    return module


def _parents(name: str) -> None:
    parts = name.split(".")
    for end in range(1, len(parts)):
        package = types.ModuleType(".".join(parts[:end]))
        package.__path__ = []
        sys.modules.setdefault(package.__name__, package)


def _extract(source: str, path: str) -> str:
    """``control_input.py`` reduced to its imports (less ``_LEFT_OUT``) and the ``_TAKEN`` definitions."""
    tree = ast.parse(source, filename=path)
    kept: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            module = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if module not in _LEFT_OUT:
                kept.append(node)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef) and node.name in _TAKEN:
            kept.append(node)
    missing = set(_TAKEN) - {n.name for n in kept if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    if missing:
        raise KeyError(f"{sorted(missing)} not found in {path}")
    names = {n.id for n in ast.walk(ast.Module(body=kept, type_ignores=[])) if isinstance(n, ast.Name)}
    used = names & {alias.strip() for aliases in _LEFT_OUT.values() for alias in aliases.split(",")}
    if used:
        raise RuntimeError(f"the taken augmentors now use {sorted(used)}: load those imports too")
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


def load_augmentors(files: Any) -> types.ModuleType:
    """The framework's edge and blur augmentors as a module (``files``: ``refresh_contracts.FrameworkFiles``)."""
    for name in (_BASE, f"{_PACKAGE}.fast_blur", f"{_PACKAGE}.blur", f"{_PACKAGE}.control_input"):
        _parents(name)
    _module(_BASE, files.read(_BASE.replace(".", "/") + ".py"), _BASE.replace(".", "/") + ".py")
    _module(f"{_PACKAGE}.fast_blur", files.read(f"{_FOLDER}/fast_blur.py"), f"{_FOLDER}/fast_blur.py")
    _module(f"{_PACKAGE}.blur", files.read(f"{_FOLDER}/blur.py"), f"{_FOLDER}/blur.py")
    path = f"{_FOLDER}/control_input.py"
    return _module(f"{_PACKAGE}.control_input", _extract(files.read(path), path), path)


def inference_keywords(files: Any) -> dict[str, dict[str, Any]]:
    """The constant keywords ``apply_transfer_control_augmentor`` builds each augmentor with, and which keyword
    takes the preset: ``{"AddControlInputEdge": {"use_random": False, ..., "preset": "preset_strength"}}``."""
    tree = files.tree(_TRANSFER)
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
                    and n.name == "apply_transfer_control_augmentor")
    found: dict[str, dict[str, Any]] = {}
    for call in ast.walk(function):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in _TAKEN[1:]:
            keywords = {}
            for keyword in call.keywords:
                if isinstance(keyword.value, ast.Name) and keyword.value.id.startswith("preset_"):
                    keywords["preset"] = keyword.arg
                else:
                    keywords[keyword.arg] = ast.literal_eval(keyword.value)
            found[call.func.id] = keywords
    return found


def framework_maps(files: Any, clip: Any, presets: dict[str, tuple[str, ...]]) -> tuple[dict[str, Any], dict]:
    """``{"edge_<preset>": map, "blur_<preset>": map}`` (``[T, H, W, 3]`` uint8, like ``clip``) and the keywords."""
    import numpy as np
    import torch

    saved = dict(sys.modules)
    try:
        augmentors = load_augmentors(files)
        keywords = inference_keywords(files)
        maps = {}
        for kind, cls in (("edge", "AddControlInputEdge"), ("blur", "AddControlInputBlur")):
            fixed = {k: v for k, v in keywords[cls].items() if k != "preset"}
            for preset in presets[kind]:
                augmentor = getattr(augmentors, cls)(**fixed, **{keywords[cls]["preset"]: preset})
                frames = torch.from_numpy(np.ascontiguousarray(clip.transpose(3, 0, 1, 2)))  # (C, T, H, W)
                out = augmentor({fixed["input_keys"][0]: frames})[fixed["output_keys"][0]]
                maps[f"{kind}_{preset}"] = np.ascontiguousarray(out.numpy().transpose(1, 2, 3, 0))
        return maps, keywords
    finally:
        for name in set(sys.modules) - set(saved):
            del sys.modules[name]


def write_goldens(files: Any, out: Path = GOLDEN_DIR) -> Path:
    """Run the framework's augmentors on the test clip for every preset; one ``.npz`` named with the commit."""
    import cv2
    import numpy as np
    import torch

    sys.path.insert(0, str(REPO))
    from cosmos_helpers.protocol.framework import BLUR_PRESETS, EDGE_PRESETS
    from tests.transfer.control_clip import encode, make_clip, sha256

    clip = make_clip()
    maps, keywords = framework_maps(files, clip, {"edge": EDGE_PRESETS, "blur": BLUR_PRESETS})
    commit = files.commit()
    meta = {"framework_commit": commit, "clip_sha256": sha256(clip), "cv2": cv2.__version__,
            "numpy": np.__version__, "torch": torch.__version__, "inference_keywords": keywords,
            "ran": {"whole": [_BASE, f"{_PACKAGE}.blur", f"{_PACKAGE}.fast_blur"],
                    f"{_PACKAGE}.control_input": list(_TAKEN)},
            "imports_left_out": _LEFT_OUT, "writer": "scripts/framework_control_maps.py"}
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.glob("framework_maps-*.npz"):
        stale.unlink()
    path = out / f"framework_maps-{commit}.npz"
    np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True)),
                        **{name: encode(name, array) for name, array in maps.items()})
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")
    return path
