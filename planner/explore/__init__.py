"""`planner search`: candidates -> checks -> memory screen -> step-time estimates -> ranking."""
