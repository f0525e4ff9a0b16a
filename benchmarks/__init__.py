"""Benchmarks for langgraph-loop and its peers.

* :mod:`benchmarks.overhead` -- per-round framework overhead, checkpoint storage, graph steps,
  memory, and the performance targets (tables in :mod:`benchmarks.report`, steps in
  :mod:`benchmarks.census`, targets in :mod:`benchmarks.targets`, savers in :mod:`benchmarks.savers`).
* :mod:`benchmarks.profile_round` -- where the time of a clean round goes, by library.
* :mod:`benchmarks.token_economy` -- tool calls and tokens spent before a runaway loop is stopped.
* :mod:`benchmarks.detector_cost` -- the loop detector's cost per step against thread length.
* :mod:`benchmarks.real_traces` -- loop detection on 200 real GPT-4o conversations (τ-bench),
  replayed through the compiled graph by :mod:`benchmarks.replay`.

All but ``real_traces`` (recorded replies) are driven by the deterministic scripted chat model
in :mod:`benchmarks.scripted`.
"""
