"""The plan written for a cluster launcher or another training engine (pure)."""
