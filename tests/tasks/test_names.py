"""Every task is named after the ``hpcrl_core`` function it wraps, and calls it: ``tasks/sft.py:run_sft`` wraps
``hpcrl_core.training.sft.run_sft``, and Prefect shows it as ``run_sft`` (a task's default name is its function's).

Run: pytest tests/tasks/test_names.py
"""

from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from prefect import Task

ROOT = Path(__file__).resolve().parents[2]


def _tasks() -> list[tuple[ModuleType, Task]]:  # type: ignore[type-arg]
    found = []
    for path in sorted((ROOT / "tasks").glob("*.py")):
        module = importlib.import_module(f"tasks.{path.stem}")
        found += [(module, obj) for obj in vars(module).values()
                  if isinstance(obj, Task) and obj.fn.__module__ == module.__name__]
    return found


def wrapped_calls(fn: object, namespace: dict[str, object]) -> list[str]:
    """``module.attr`` of every call in ``fn``'s body to an attribute of an ``hpcrl_core`` module."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(fn)))  # type: ignore[arg-type]
    calls = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)):
            target = namespace.get(node.func.value.id)
            if isinstance(target, ModuleType) and target.__name__.startswith("hpcrl_core"):
                calls.append(f"{target.__name__}.{node.func.attr}")
    return calls


TASKS = _tasks()


def test_every_task_module_was_scanned() -> None:
    helpers = ("__init__", "retries", "agents_backend", "agents_server")
    assert {m.__name__ for m, _ in TASKS} == {f"tasks.{p.stem}" for p in (ROOT / "tasks").glob("*.py")
                                             if p.stem not in helpers}


@pytest.mark.parametrize(("module", "task"), TASKS, ids=lambda x: getattr(x, "name", getattr(x, "__name__", "")))
def test_a_task_is_named_after_the_core_function_it_wraps(module: ModuleType, task: Task) -> None:  # type: ignore[type-arg]
    name = task.fn.__name__
    assert task.name == name, f"{module.__name__}.{name} is shown as {task.name!r}; drop name= or use {name!r}"
    calls = wrapped_calls(task.fn, vars(module))
    assert any(c.endswith(f".{name}") for c in calls), (
        f"{module.__name__}.{name} calls {calls or 'no hpcrl_core function'}; a task wraps the core function it is "
        "named after (import the module, not the function, so that the task may take its name)")


def test_the_scan_sees_a_misnamed_task() -> None:
    import hpcrl_core.registry as registry

    def set_champion(name: str) -> None:
        registry.set_alias(name, "champion", 1)

    assert wrapped_calls(set_champion, {"registry": registry}) == ["hpcrl_core.registry.set_alias"]
