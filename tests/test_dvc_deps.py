"""Every DVC stage lists the code and the params it runs, so ``dvc repro`` reruns a stage when either changes.

Code. A stage whose ``cmd`` runs a project module (``python -m flows.X``, or a console script of
pyproject.toml such as ``hpcrl``) runs that module's import closure inside the project: every module under
hpcrl_core/, tasks/ and flows/ it imports, followed transitively, with the ``__init__`` of every package on the
way, relative imports resolved, and imports inside functions counted (a lazy import still runs). The package data
of pyproject.toml (the C sources of hpcrl_core/bench, the facts tables of hpcrl_core/data) counts where the closure
holds a module of its package that locates files next to itself (``__file__``, ``importlib.resources``).
Each such file must be covered by a ``deps`` entry: the file itself or a folder above it.

Params. Flows read params.yaml once (``hpcrl_core.config.load_params``) into a ``Params`` object whose attributes
are the top-level sections, and hand it (or sections of it) down. Every name that holds a ``Params`` is called
``params`` (argument and field annotations, assignments from the loaders): ``test_params_objects_are_named_params``
checks that convention, and the rule rests on it. A read is an attribute chain ``<...>params.<section>...``
anywhere in the stage's closure outside hpcrl_core/config (which defines the models); the key read is the chain's
longest prefix of schema fields: ``params.bench.cflags`` reads ``bench.cflags``; ``params.bench`` handed on whole
(``Engine(params.bench)``, ``params.bench.model_dump()``) reads all of ``bench``; ``params.model_dump()`` reads
every section. A key read is covered by a ``params`` entry equal to it or above it (``bench`` covers
``bench.cflags``, not the other way round). Not seen: ``getattr(params, name)`` with a computed name (the code
has none on a ``Params``; on a section object it changes nothing, since that section was already read whole).

The closure is per module, not per call path, so it can name a read that the stage's command never executes;
``NOT_RUN`` lists those with the reason, and an entry the scan no longer finds fails the test.

Run: ``pytest tests/test_dvc_deps.py``.
"""

from __future__ import annotations

import ast
import functools
import shlex
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from hpcrl_core.config import Params

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("hpcrl_core", "tasks", "flows")
SECTIONS = tuple(Params.model_fields)
WHOLE = "*"  # the key of a read of every section (``params.model_dump()``)
DUMPS = ("model_dump", "model_dump_json")

# stage -> params key -> why the stage's command does not execute the read the scan finds in its closure
NOT_RUN: dict[str, dict[str, str]] = {
    "node_reference": {
        "reward": "hpcrl_core/cli_bench.py shapes rewards of kernel FILEs and --ladder rows; "
                  "`hpcrl bench --reference --report` writes no reward",
        "task_reward": "hpcrl_core/rewards/tasks.py is imported with the hpcrl_core.rewards package; "
                       "`hpcrl bench` scores kernels only",
    },
    "sft_hargo": {
        "sft": "training/sft.py's run_sft reads params.sft, which training/start_point.py replaced with the sft_hargo "
               "section",
    },
    "hpcgpt": {
        "sft": "training/sft.py's run_sft reads params.sft, which training/hpcgpt.py replaced with the hpcgpt recipe "
               "over the sft_hargo section",
        "task_reward": "training/run_record.py's rewards_record reads it for online runs; an hpcgpt run records "
                       "kind supervised, without rewards",
    },
    "rl_hargo": {
        "reward": "hpcrl_core/rewards/dgemm.py is imported with the hpcrl_core.rewards package; rl_hargo builds "
                  "only the hpc_tasks reward",
    },
    "preferences": {
        "reward": "hpcrl_core/rewards/dgemm.py is imported with the hpcrl_core.rewards package; preferences builds "
                  "only the hpc_tasks reward",
    },
    "rl_dgemm": {
        "task_reward": "hpcrl_core/rewards/tasks.py is imported with the hpcrl_core.rewards package; rl_dgemm "
                       "builds the rewards of rl_dgemm.rewards (DGEMM kernels), never a task reward",
    },
}


def module_file(root: Path, name: str) -> Path | None:
    """The file of project module ``name`` (a package's ``__init__.py``), or None outside the project."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = root.joinpath(*name.split("."))
    for f in (base / "__init__.py", base.with_suffix(".py")):
        if f.is_file():
            return f
    return None


def _imported(tree: ast.AST, module: str, is_package: bool) -> set[str]:
    """Dotted names a module's import statements name (anywhere, function bodies included), made absolute."""
    package = module if is_package else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)  # ``from pkg import sub`` imports pkg.sub
    return names


@functools.cache  # a module is in most stages' closures: parsed once
def _module_imports(path: Path, module: str) -> frozenset[str]:
    return frozenset(_imported(ast.parse(path.read_text(), str(path)), module, path.name == "__init__.py"))


@functools.cache
def import_closure(root: Path, module: str) -> dict[str, Path]:
    """Every project module that running ``module`` imports, with the packages above each: name -> file."""
    seen: dict[str, Path] = {}
    todo = [module]
    while todo:
        name = todo.pop()
        path = module_file(root, name)
        if name in seen or path is None:
            continue
        seen[name] = path
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))]  # importing a.b.c runs a and a.b first
        for imported in _module_imports(path, name):
            bits = imported.split(".")
            todo += [".".join(bits[:i]) for i in range(1, len(bits) + 1)]
    return seen


def package_data(root: Path, closure: dict[str, Path]) -> list[Path]:
    """Package data (pyproject.toml) of the packages in ``closure`` whose modules there locate files next to
    themselves (``__file__`` or ``importlib.resources``): the files those modules read at run time."""
    globs = tomllib.loads((root / "pyproject.toml").read_text()).get("tool", {}).get("setuptools", {}).get(
        "package-data", {})
    readers = {pkg for pkg in globs for name, path in closure.items() if (name == pkg or name.startswith(pkg + "."))
               and any(word in path.read_text() for word in ("__file__", "resources"))}
    return sorted(f for pkg in readers for pattern in globs[pkg]
                  for f in root.joinpath(*pkg.split(".")).glob(pattern) if f.is_file())


def stage_module(root: Path, cmd: str) -> str | None:
    """The project module a stage's command runs: ``python -m MODULE`` or a console script of pyproject.toml."""
    scripts = tomllib.loads((root / "pyproject.toml").read_text()).get("project", {}).get("scripts", {})
    words = shlex.split(cmd)
    for i, word in enumerate(words):
        if word == "-m" and i + 1 < len(words) and words[i + 1].split(".")[0] in PACKAGES:
            return words[i + 1]
        if Path(word).name in scripts:
            return scripts[Path(word).name].split(":")[0]
    return None


def _covered(rel: str, entries: list[str]) -> bool:
    return any(rel == e or rel.startswith(e.rstrip("/") + "/") for e in entries)


def _stages(dvc_yaml: Path) -> dict[str, dict[str, Any]]:
    return yaml.safe_load(dvc_yaml.read_text())["stages"]


def _deps(stage: dict[str, Any]) -> list[str]:
    return [d if isinstance(d, str) else next(iter(d)) for d in stage.get("deps", [])]


def missing_code(root: Path, dvc_yaml: Path) -> dict[str, list[str]]:
    """stage -> project files its command runs that no ``deps`` entry covers (stages that run no module: absent)."""
    out: dict[str, list[str]] = {}
    for name, stage in _stages(dvc_yaml).items():
        module = stage_module(root, stage["cmd"])
        if module is None:
            continue
        closure = import_closure(root, module)
        files = sorted({*closure.values(), *package_data(root, closure)})
        out[name] = [str(f.relative_to(root)) for f in files if not _covered(str(f.relative_to(root)), _deps(stage))]
    return out


def _is_params(node: ast.expr) -> bool:
    """``params`` or ``<...>.params``: an expression holding the loaded ``Params`` by the project's convention."""
    return (isinstance(node, ast.Name) and node.id == "params") or (isinstance(node, ast.Attribute)
                                                                   and node.attr == "params")


def _field_model(model: type[BaseModel], field: str) -> type[BaseModel] | None:
    annotation = model.model_fields[field].annotation
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


@functools.cache  # a module is in most stages' closures: parsed once (callers only read the answer)
def params_reads(source: str, filename: str = "<source>") -> dict[str, list[int]]:
    """params keys one module reads (see the module docstring) -> the lines reading them."""
    tree = ast.parse(source, filename)
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    reads: dict[str, list[int]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_params(node.value)):
            continue
        if node.attr in DUMPS:
            reads.setdefault(WHOLE, []).append(node.lineno)
        if node.attr not in SECTIONS:
            continue
        key, model, current = [node.attr], _field_model(Params, node.attr), node
        while (model is not None and isinstance(up := parent.get(current), ast.Attribute)
               and up.value is current and up.attr in model.model_fields):
            key.append(up.attr)
            model, current = _field_model(model, up.attr), up
        reads.setdefault(".".join(key), []).append(node.lineno)
    return reads


def stage_params_reads(root: Path, module: str) -> dict[str, list[str]]:
    """params keys read in ``module``'s closure (hpcrl_core/config left out) -> ``file:line`` of each read."""
    found: dict[str, list[str]] = {}
    for name, path in sorted(import_closure(root, module).items()):
        if name == "hpcrl_core.config" or name.startswith("hpcrl_core.config."):
            continue
        for key, lines in params_reads(path.read_text(), str(path)).items():
            found.setdefault(key, []).extend(f"{path.relative_to(root)}:{n}" for n in lines)
    return found


def _excused(key: str, excuses: dict[str, str]) -> bool:
    return _covered(key.replace(".", "/"), [e.replace(".", "/") for e in excuses])


def missing_params(root: Path, dvc_yaml: Path, not_run: dict[str, dict[str, str]] | None = None
                   ) -> dict[str, dict[str, list[str]]]:
    """stage -> params keys its command reads that its ``params`` list does not cover -> where they are read."""
    not_run = NOT_RUN if not_run is None else not_run
    out: dict[str, dict[str, list[str]]] = {}
    for name, stage in _stages(dvc_yaml).items():
        module = stage_module(root, stage["cmd"])
        if module is None:
            continue
        listed = [p.replace(".", "/") for p in (p if isinstance(p, str) else next(iter(p))
                                                for p in stage.get("params", []))]
        reads = stage_params_reads(root, module)
        if WHOLE in reads:  # every section read at once
            reads = {**{s: reads[WHOLE] for s in SECTIONS}, **{k: v for k, v in reads.items() if k != WHOLE}}
        out[name] = {key: where for key, where in sorted(reads.items())
                     if not _covered(key.replace(".", "/"), listed) and not _excused(key, not_run.get(name, {}))}
    return out


STAGES = list(_stages(ROOT / "dvc.yaml"))


@pytest.mark.parametrize("stage", STAGES)
def test_stage_runs_a_project_module(stage: str) -> None:
    cmd = _stages(ROOT / "dvc.yaml")[stage]["cmd"]
    assert stage_module(ROOT, cmd), f"stage {stage}: `{cmd}` runs no project module; give it its own rule here"


@functools.cache
def project_missing_code() -> dict[str, list[str]]:
    """``missing_code`` of this project, read once for every stage's test."""
    return missing_code(ROOT, ROOT / "dvc.yaml")


@functools.cache
def project_missing_params() -> dict[str, dict[str, list[str]]]:
    """``missing_params`` of this project, read once for every stage's test (each reading parses every module of
    every stage's closure: a few seconds)."""
    return missing_params(ROOT, ROOT / "dvc.yaml")


@pytest.mark.parametrize("stage", STAGES)
def test_stage_deps_cover_the_code_it_runs(stage: str) -> None:
    missing = project_missing_code()[stage]
    assert not missing, f"stage {stage}: deps in dvc.yaml miss modules its command imports: {', '.join(missing)}"


@pytest.mark.parametrize("stage", STAGES)
def test_stage_params_cover_the_keys_it_reads(stage: str) -> None:
    missing = project_missing_params()[stage]
    assert not missing, (f"stage {stage}: params in dvc.yaml miss keys its code reads: "
                         + "; ".join(f"{key} (read at {', '.join(where[:3])})" for key, where in missing.items()))


def test_not_run_entries_are_still_read() -> None:
    for stage, excuses in NOT_RUN.items():
        reads = stage_params_reads(ROOT, stage_module(ROOT, _stages(ROOT / "dvc.yaml")[stage]["cmd"]) or "")
        for key in excuses:
            assert any(_covered(r.replace(".", "/"), [key.replace(".", "/")]) for r in reads), \
                f"NOT_RUN[{stage!r}][{key!r}] excuses a read the scan no longer finds: remove the entry"


def _annotation_is_params(annotation: ast.expr | None) -> bool:
    return annotation is not None and any(isinstance(n, ast.Name) and n.id == "Params" or
                                          isinstance(n, ast.Constant) and n.value == "Params"
                                          for n in ast.walk(annotation))


def params_names(source: str) -> list[str]:
    """Names bound to a ``Params`` (annotated so, or assigned from a function returning one) other than ``params``."""
    tree = ast.parse(source)
    makers = {"load_params", "parse_params"} | {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
                                                 and _annotation_is_params(f.returns)}
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and _annotation_is_params(node.annotation):
            names = [node.arg]
        elif isinstance(node, ast.AnnAssign) and _annotation_is_params(node.annotation):
            names = [ast.unparse(node.target)]
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call) and (
                (func := ast.unparse(node.value.func)) in ("Params", "Params.model_validate")
                or func.split(".")[-1] in makers):
            names = [ast.unparse(t) for t in node.targets]
        else:
            continue
        bad += [(node.lineno, name) for name in names if name.split(".")[-1] != "params"]
    return [f"{name} (line {line})" for line, name in sorted(bad)]


def _project_modules() -> list[Path]:
    return sorted(f for pkg in PACKAGES for f in (ROOT / pkg).rglob("*.py")
                  if f.relative_to(ROOT).parts[:2] != ("hpcrl_core", "config"))


@pytest.mark.parametrize("path", _project_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_params_objects_are_named_params(path: Path) -> None:
    bad = params_names(path.read_text())
    assert not bad, f"{path}: a Params held under another name hides its reads from the dvc params check: {bad}"


# The checks can fail: a broken graph, imports of every kind, reads of every shape.

def test_a_stage_missing_a_dep_or_a_param_is_reported(tmp_path: Path) -> None:
    stages = _stages(ROOT / "dvc.yaml")
    broken = stages["evaluate_dgemm"]
    broken["deps"] = [d for d in _deps(broken) if not d.startswith("hpcrl_core/bench")]
    broken["params"] = [p for p in broken["params"] if not str(p).startswith("bench")]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"stages": stages}))
    code = missing_code(ROOT, tmp_path / "dvc.yaml")
    assert "hpcrl_core/bench/sandbox.py" in code["evaluate_dgemm"]
    assert any(f.startswith("hpcrl_core/bench/csrc/") for f in code["evaluate_dgemm"])  # package data too
    assert not code["prepare"]
    assert "bench" in missing_params(ROOT, tmp_path / "dvc.yaml")["evaluate_dgemm"]


def test_closure_follows_lazy_relative_and_package_imports(tmp_path: Path) -> None:
    files = {
        "flows/__init__.py": "",
        "flows/stage.py": "import json\n\ndef run():\n    from tasks.work import go\n    return go()\n",
        "tasks/__init__.py": "import hpcrl_core.util\n",
        "tasks/work.py": "from . import helper\nfrom .helper import x\n",
        "tasks/helper.py": "from hpcrl_core.deep import leaf\n",
        "hpcrl_core/__init__.py": "",
        "hpcrl_core/util.py": "",
        "hpcrl_core/deep/__init__.py": "from .leaf import z\n",
        "hpcrl_core/deep/leaf.py": "",
        "hpcrl_core/unused.py": "",
        "pyproject.toml": "[project.scripts]\ntool = 'flows.stage:run'\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    got = {str(p.relative_to(tmp_path)) for p in import_closure(tmp_path, "flows.stage").values()}
    assert got == set(files) - {"hpcrl_core/unused.py", "pyproject.toml"}
    assert stage_module(tmp_path, ".venv/bin/tool --x 1") == "flows.stage"
    assert stage_module(tmp_path, ".venv/bin/python -m flows.stage --params params.yaml") == "flows.stage"
    assert stage_module(tmp_path, "make all") is None


def test_params_reads_take_the_longest_schema_prefix() -> None:
    source = ("engine = Engine(params.bench)\nflags = params.bench.cflags\nn = ctx.params.rl_dgemm.sqd.window\n"
              "d = params.evaluate.model_dump()\nself.model = trainer.model\nall_ = params.model_dump()\n")
    assert set(params_reads(source)) == {"bench", "bench.cflags", "rl_dgemm.sqd.window", "evaluate", WHOLE}


def test_params_held_under_another_name_are_reported() -> None:
    source = ("def f(p: Params, params: Params | None) -> None: ...\ncfg = load_params(path)\n"
              "params = load_params(path)\nclass C:\n    conf: 'Params'\n    params: Params\n")
    assert params_names(source) == ["p (line 1)", "cfg (line 2)", "conf (line 5)"]
