"""Benchmarks for langgraph-loop and its peers.

* :mod:`benchmarks.overhead` -- per-round framework overhead, checkpoint storage and memory.
* :mod:`benchmarks.token_economy` -- tool calls and tokens spent before a runaway loop is stopped.

Both are driven by the deterministic scripted chat model in :mod:`benchmarks.scripted`.
"""
