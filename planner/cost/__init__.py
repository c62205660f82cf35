"""The cost model: pure functions of frozen specs, an engine and a plan."""
