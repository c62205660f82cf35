"""Progress on stderr for commands that can run longer than a second."""

from __future__ import annotations

import time
from typing import Any

PROGRESS_DELAY_S = 0.5


class DelayedProgress:
    """A rich progress bar on stderr that appears only once the work has run PROGRESS_DELAY_S."""

    def __init__(self, enabled: bool, description: str = "searching") -> None:
        self.enabled, self.description, self.start = enabled, description, time.perf_counter()
        self.bar: Any = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if not self.enabled:
            return
        if self.bar is None:
            if time.perf_counter() - self.start < PROGRESS_DELAY_S:
                return
            from rich.console import Console
            from rich.progress import Progress

            self.bar = Progress(console=Console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task(self.description, total=total)
        self.bar.update(self.task, completed=done)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
