"""The core layer (stop reasons, state, configuration, settings, pairing, notices); it imports
nothing of ``langgraph_loop`` above it."""
