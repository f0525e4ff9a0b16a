"""Benchmarks for langgraph-loop and its peers: one runner per question (see benchmarks/README.md).

``python -m benchmarks`` (:mod:`benchmarks.overhead`: per-round cost, CPU A/B, profile, storage,
steps), :mod:`benchmarks.detector_cost`,
:mod:`benchmarks.real_traces`, :mod:`benchmarks.server_throughput`, :mod:`benchmarks.trace_path`.
"""
