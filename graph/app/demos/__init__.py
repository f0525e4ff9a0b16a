"""Offline demo scenarios for ``langgraph-loop demo`` (scripted models, SQLite threads).

Each scenario module exposes ``SCENARIOS``: a list of ``Scenario``. Add a module and
list it in ``MODULES`` to add scenarios.

Example:
    >>> [s.key for s in all_scenarios()][:2]
    ['react', 'runaway']
"""

from __future__ import annotations

import importlib

from langgraph_loop.app.demos.base import Scenario

__all__ = ["MODULES", "Scenario", "all_scenarios"]

MODULES = [f"langgraph_loop.app.demos.{name}"
           for name in ("core", "loops", "continuation", "budgets", "approval")]


def all_scenarios() -> list[Scenario]:
    """Every registered scenario, in order."""
    out: list[Scenario] = []
    for name in MODULES:
        out.extend(importlib.import_module(name).SCENARIOS)
    return out
