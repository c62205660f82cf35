"""Never an orphan (issue 22, item 2): the launcher's death, SIGKILL included, takes every worker with it.

The fast tests pin each mechanism with plain Python processes (no torch); the slow ones kill a real
`planner launch` of the tiny model over 2 workers (rank 0 hangs at step 2, so the run is alive when killed)
and check, by pid, that no worker and no torchrun is left. At most 2 workers; every process has a timeout."""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from planner.launch.processes import Stopped, descendants, stop_on_signals, stop_tree

REPO = Path(__file__).resolve().parents[2]
GONE_WITHIN_S = 5.0


def _state(pid: int, started: int) -> str | None:
    """The process's state letter, or None when that process (pid and start time) no longer exists."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0] if int(fields[19]) == started else None


def _all_gone(tree: dict[int, int], within_s: float = GONE_WITHIN_S) -> list[int]:
    """Wait until every process of `tree` has exited (a zombie has: it holds no memory); the ones left."""
    deadline = time.monotonic() + within_s
    while True:
        left = [p for p, t in tree.items() if _state(p, t) not in (None, "Z")]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def _python(code: str, **kw) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)], stdout=subprocess.PIPE, text=True, env=env, **kw
    )


@pytest.mark.timeout(60)
def test_the_child_dies_with_the_launcher_even_by_sigkill():
    launcher = _python(
        """
        import os, subprocess, sys, time
        from planner.launch.processes import child_dies_with
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                                 preexec_fn=child_dies_with(os.getpid()))
        print(child.pid, flush=True)
        time.sleep(60)
        """
    )
    try:
        child = int(launcher.stdout.readline())
        tree = descendants(launcher.pid)
        assert child in tree
        launcher.kill()
        launcher.wait(timeout=10)
        assert _all_gone(tree) == []
    finally:
        launcher.kill()


@pytest.mark.timeout(60)
def test_a_worker_whose_parent_died_during_its_imports_leaves():
    """arm_worker compares the parent at start with the parent now: a different one means torchrun is gone."""
    for parent, code in (("1", 1), ("os.getppid()", 0)):
        proc = subprocess.run(
            [sys.executable, "-c", f"import os; from planner.launch.processes import arm_worker; "
             f"arm_worker({parent}); print('stayed')"],
            capture_output=True, text=True, timeout=30, env={**os.environ, "PYTHONPATH": str(REPO)},
        )  # fmt: skip
        assert proc.returncode == code and ("stayed" in proc.stdout) == (code == 0), parent


@pytest.mark.timeout(60)
def test_stop_tree_reaches_workers_in_sessions_of_their_own():
    """A stand-in for torchrun that ignores SIGTERM and starts its workers in new sessions, as torchrun does."""
    agent = _python(
        """
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
                for _ in range(2)]
        print(" ".join(str(k.pid) for k in kids), flush=True)
        time.sleep(60)
        """,
        start_new_session=True,
    )
    try:
        workers = [int(p) for p in agent.stdout.readline().split()]
        tree = descendants(agent.pid)
        assert set(workers) <= set(tree)
        t0 = time.monotonic()
        stop_tree(agent, grace_s=1.0)
        assert agent.returncode == -signal.SIGKILL and time.monotonic() - t0 < GONE_WITHIN_S
        assert _all_gone(tree) == []
    finally:
        agent.kill()


@pytest.mark.timeout(10)
def test_sigterm_unwinds_so_cleanup_runs():
    cleaned, before = [], signal.getsignal(signal.SIGTERM)
    with pytest.raises(Stopped) as stopped, stop_on_signals():
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
        finally:
            os.kill(os.getpid(), signal.SIGHUP)  # a second signal does not cut the cleanup short
            time.sleep(0.1)
            cleaned.append(True)
    assert stopped.value.signum == signal.SIGTERM and cleaned == [True]
    assert signal.getsignal(signal.SIGTERM) is before


# ---- a real launch -----------------------------------------------------------------------------------------
def _launch_until_step(tmp_path: Path) -> tuple[subprocess.Popen, dict[int, int], queue.Queue[str]]:
    """`planner launch` of 2 workers whose rank 0 hangs at step 2; returns once step 1 is printed."""
    argv = [
        sys.executable, "-m", "planner", "launch", "--model", "tiny", "--dp", "2", "--micro-batch", "1",
        "--global-batch", "2", "--steps", "50", "--warmup", "1", "--hardware", "cpu", "--timeout-s", "60",
        "--profile-out", str(tmp_path / "p.json"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "PLANNER_LAUNCH_HANG": "0:2"}
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C's default, whatever runs pytest
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + 120
    while not any("[launch] step 1/" in line for line in seen):
        try:
            seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
        except queue.Empty:
            proc.kill()
            pytest.fail("no step 1 within 120 s:\n" + "".join(seen[-30:]))
    tree = descendants(proc.pid)
    torchrun = [p for p in tree if "torchrun" in Path(f"/proc/{p}/cmdline").read_text()]
    workers = [p for p in descendants(torchrun[0]) if "planner.launch.worker" in Path(f"/proc/{p}/cmdline").read_text()]
    assert len(torchrun) == 1 and len(workers) == 2, tree  # torchrun and its two workers, in sessions of their own
    assert all(os.getsid(w) == w for w in workers)
    return proc, tree, lines


@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT])
def test_killing_the_launcher_leaves_no_worker(tmp_path, sig):
    """SIGKILL: nothing left. SIGTERM or SIGINT (Ctrl-C): exit 1 (README's code for a run that did not finish) and
    one line that says so, not torchrun's SignalException traceback or an exit code of the launcher's own."""
    proc, tree, lines = _launch_until_step(tmp_path)
    try:
        proc.send_signal(sig)
        rc = proc.wait(timeout=30)
        assert _all_gone(tree) == [], f"left after {signal.Signals(sig).name}: {tree}"
        assert rc == (-signal.SIGKILL if sig == signal.SIGKILL else 1)
        time.sleep(0.2)  # the reader thread's last lines
        said = "".join(lines.get() for _ in range(lines.qsize()))
        if sig != signal.SIGKILL:
            assert f"planner launch: interrupted ({signal.Signals(sig).name}): workers stopped" in said, said
            assert "Traceback" not in said and "exit code" not in said, said
    finally:
        proc.kill()
        for pid, started in tree.items():
            if _state(pid, started) not in (None, "Z"):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_wall_limit_stops_a_hung_run_and_leaves_no_worker(tmp_path):
    """--wall-s bounds a run here whatever its ranks do (torch_cpu_notes.md: a restarted group can hang past any
    collective timeout): rank 0 hangs at step 2, the collective timeout is 60 s, and the launch ends at its wall
    limit of 15 s, exit 1, with no worker or torchrun left."""
    argv = [
        sys.executable, "-m", "planner", "launch", "--model", "tiny", "--dp", "2", "--micro-batch", "1",
        "--global-batch", "2", "--steps", "50", "--warmup", "1", "--hardware", "cpu", "--timeout-s", "60",
        "--wall-s", "15", "--profile-out", str(tmp_path / "p.json"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO), "PLANNER_LAUNCH_HANG": "0:2"}
    started = time.monotonic()
    proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 1, out
    assert "stopping torchrun after 15 s wall time" in out and time.monotonic() - started < 55, out
    assert not [p for p in descendants(os.getpid()) if "planner.launch.worker" in _cmdline(p)]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text()
    except OSError:
        return ""
