"""Offline demo scenarios for ``langgraph-loop demo`` (scripted models, SQLite threads).

Each scenario module exposes ``SCENARIOS``: a list of ``Scenario``. Add a module and
list it in ``MODULES`` to add scenarios.

Example:
    >>> [s.key for s in all_scenarios()][:2]
    ['react', 'runaway']
"""

from __future__ import annotations

import importlib

from langgraph_loop.demos.base import Scenario

__all__ = ["MODULES", "Scenario", "all_scenarios"]

MODULES = ["langgraph_loop.demos.core", "langgraph_loop.demos.loops", "langgraph_loop.demos.continuation",
           "langgraph_loop.demos.budgets", "langgraph_loop.demos.approval"]


def all_scenarios() -> list[Scenario]:
    """Every registered scenario, in order."""
    out: list[Scenario] = []
    for name in MODULES:
        out.extend(importlib.import_module(name).SCENARIOS)
    return out
