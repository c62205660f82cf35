"""`planner bench-hardware`: micro-benchmarks of this machine -> a hardware profile YAML (torch imported lazily)."""
