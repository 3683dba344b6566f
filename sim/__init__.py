"""airlink.sim (being built)."""
