"""The core layer: stop reasons, state schema, configuration, settings, pairing, notices.

It imports nothing of ``langgraph_loop`` above it; the nodes and the builder build on it.
"""
