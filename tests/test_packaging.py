"""Packaging promises: a cheap import, a fast CLI, and conda and pip environments that agree."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_python(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout


def test_importing_the_package_loads_neither_torch_nor_diffusers():
    heavy = "('torch', 'diffusers', 'transformers', 'fastapi', 'httpx')"
    out = run_python("import sys, cosmos_helpers; cosmos_helpers.GenerationRequest; "
                     f"print(sorted(m for m in {heavy} if m in sys.modules))")
    assert out.strip() == "[]"


def test_cli_help_loads_nothing_heavy_and_lists_every_command():
    heavy = "('torch', 'diffusers', 'transformers', 'fastapi', 'uvicorn', 'cv2')"
    code = ("import sys; from cosmos_helpers import cli; cli.build_parser().format_help(); "
            f"print(sorted(m for m in {heavy} if m in sys.modules))")
    assert run_python(code).strip() == "[]"
    result = subprocess.run([sys.executable, "-m", "cosmos_helpers.cli", "--help"], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 0
    for command in ("generate", "run", "run-cookbooks", "lab", "serve", "transfer", "bench", "tiny"):
        assert command in result.stdout


def test_conda_environment_lists_the_same_packages_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    expected = set(project["dependencies"]) | set(project["optional-dependencies"]["test"])
    lines = [line.strip()[2:].strip() for line in (ROOT / "environment.yml").read_text().splitlines()
             if line.strip().startswith("- ") and line.startswith(" " * 6)]
    listed = {line for line in lines if not line.startswith("-e")}
    assert listed == expected
    assert "-e ." in lines
    extras = project["optional-dependencies"]
    assert set(extras["ray"]) <= set(extras["test"]), "the Ray tests need the ray extra's packages"


def test_every_public_name_resolves():
    import cosmos_helpers

    for name in cosmos_helpers.__all__:
        assert getattr(cosmos_helpers, name) is not None, name


def test_the_type_checking_imports_name_exactly_the_exports():
    """Editors read the ``TYPE_CHECKING`` block; it must not drift from the lazy export table."""
    import ast

    import cosmos_helpers

    tree = ast.parse((ROOT / "cosmos_helpers" / "__init__.py").read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test))
    imported = {alias.asname or alias.name for node in ast.walk(block) if isinstance(node, ast.ImportFrom)
                for alias in node.names}
    assert imported == set(cosmos_helpers.__all__) - {"__version__"}


def test_the_top_level_is_a_short_list_and_the_rest_has_named_homes():
    """At most 30 names at the top; moved names are reachable from their subpackages, not from the root."""
    import importlib

    import cosmos_helpers

    assert len(set(cosmos_helpers.__all__) - {"__version__"}) <= 30
    homes = {"presets": "MODES PROFILES Profile size_for", "result": "find_saved", "prompts": "load_caption",
             "prompting": "Blocklist check_caption upsample_prompt with_precheck", "errors": "OutputExistsError",
             "actions": "sample_trajectory render_drive load_trajectory trajectory_plot",
             "controls": "estimate_controls write_control_videos", "batch": "BatchResult", "sweeps": "SweepResult",
             "transfer": "SpecRunner estimate_controls read_video", "fast": "FastOptions",
             "backends.diffusers": "free_pipeline", "backends.vllm_omni": "AsyncVllmOmniBackend",
             "standins.vllm_omni": "LocalServer", "standins.ray_serve": "LocalRayServe",
             "views.timeline": "batch_timeline", "models.tiny": "tiny_model_path"}
    for module, names in homes.items():
        package = importlib.import_module(f"cosmos_helpers.{module}")
        for name in names.split():
            assert getattr(package, name) is not None, f"cosmos_helpers.{module}.{name}"
    for old in ("long_video", "extend", "upsample", "compact", "ChatStandin", "free_pipeline", "VIDEO_SIZES"):
        assert not hasattr(cosmos_helpers, old), old


def test_the_scripts_and_benchmarks_import_names_that_exist():
    """``benchmarks/`` and ``scripts/`` run only on other machines; a renamed helper must not break them silently."""
    import ast
    import importlib.util

    missing = []
    for path in sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")]):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("cosmos_helpers"):
                module = importlib.import_module(node.module)
                missing += [f"{path.name}: {node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)
                            and importlib.util.find_spec(f"{node.module}.{a.name}") is None]
    assert missing == []
