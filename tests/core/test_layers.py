"""The layers point down (docs/architecture.md): the engine imports neither front door, our
middleware imports nothing from the graph's nodes, and ``decide`` reads no graph state.

Read from the installed package's source, so a new import that breaks a rule fails here.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import langgraph_loop
from langgraph_loop.engine.decision import decide

PACKAGE = Path(langgraph_loop.__file__).parent


def imports_of(folder: str) -> dict[str, set[str]]:
    """Every ``langgraph_loop`` module each file of ``folder`` imports (top level or not)."""
    found: dict[str, set[str]] = {}
    for path in sorted((PACKAGE / folder).glob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[path.name] = {n for n in names if n.startswith("langgraph_loop")}
    return found


def test_the_engine_imports_neither_door() -> None:
    engine = imports_of("engine")
    assert len(engine) >= 7  # decision, detection, dialogue, final, limits, normalize, text_loop
    for module, names in engine.items():
        doors = {n for n in names if n.startswith(("langgraph_loop.nodes", "langgraph_loop.middleware",
                                                   "langgraph_loop.builder", "langgraph_loop.app"))}
        assert doors == set(), f"engine/{module} imports a door: {doors}"


def test_the_middleware_imports_nothing_from_the_graphs_nodes() -> None:
    for module, names in imports_of("middleware").items():
        assert not {n for n in names if n.startswith("langgraph_loop.nodes")}, module


def test_decide_reads_a_view_of_the_run_not_graph_state() -> None:
    parameters = inspect.signature(decide).parameters
    assert list(parameters) == ["reply", "transcript", "view", "policy", "memo"]
    annotations = {name: str(p.annotation) for name, p in parameters.items()}
    assert annotations["view"] == "RunView" and annotations["policy"] == "Policy"
    assert not any("LoopState" in a or "LoopSettings" in a for a in annotations.values())
