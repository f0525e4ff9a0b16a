"""The graph's nodes, one module per node; decisions are pure functions tests call directly."""
