"""Benchmarks for langgraph-loop and its peers.

* :mod:`benchmarks.overhead` -- per-round framework overhead (sync and async; langgraph-loop against
  the bare LangGraph loops, ``create_react_agent`` and ``create_agent``), checkpoint storage, graph
  steps, memory, and the performance targets (tables in :mod:`benchmarks.report`, steps in
  :mod:`benchmarks.census`, targets in :mod:`benchmarks.targets` (issue 14) and
  :mod:`benchmarks.targets_bare` (issue 24), savers in :mod:`benchmarks.savers`).
* :mod:`benchmarks.profile_round` -- where the time of a clean round goes, by library.
* :mod:`benchmarks.token_economy` -- tool calls and tokens spent before a runaway loop is stopped.
* :mod:`benchmarks.detector_cost` -- the loop detector's cost per step against thread length.
* :mod:`benchmarks.real_traces` -- loop detection on real trajectories (τ-bench by default, any
  ``--data``: the coding runs of ``../shared/data/``), replayed through the compiled graph by
  :mod:`benchmarks.replay`.
* :mod:`benchmarks.detector_proto` -- a per-call stagnation detector prototyped outside the
  library; :mod:`benchmarks.proto_study` measures its variants, text loops and error streaks;
  :mod:`benchmarks.excerpts` cuts the vendored coding excerpts.

All but the replays of recorded runs (``real_traces``, ``detector_proto``, ``proto_study``) are
driven by the deterministic scripted chat model
in :mod:`benchmarks.scripted`.
"""
