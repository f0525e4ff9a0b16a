"""The application layer: the CLI, demos, the graph picture and the LangGraph Server entry.

The library never imports it.
"""
