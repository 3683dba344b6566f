"""airlink.replay (being built)."""
