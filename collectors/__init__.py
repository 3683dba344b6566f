"""airlink.collectors (being built)."""
