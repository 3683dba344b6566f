"""airlink.inference (being built)."""
