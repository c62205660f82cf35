"""The one exception type the library raises for bad input; only the CLI turns it into exit code 2."""


class PlannerError(Exception):
    """A user-facing error: the message names the offending values and what would be valid."""
