"""Benchmarks for langgraph-loop and its peers.

* :mod:`benchmarks.overhead` -- per-round framework overhead, checkpoint storage and memory.
* :mod:`benchmarks.token_economy` -- tool calls and tokens spent before a runaway loop is stopped.
* :mod:`benchmarks.real_traces` -- loop detection on 200 real GPT-4o conversations (τ-bench),
  replayed through the compiled graph by :mod:`benchmarks.replay`.

Both are driven by the deterministic scripted chat model in :mod:`benchmarks.scripted`.
"""
