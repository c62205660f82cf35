"""The claim a launch holds on its outputs (planner/launch/claims.py), without starting a run."""

from __future__ import annotations

import errno
import fcntl
import os

import pytest

from planner.errors import PlannerError
from planner.launch import claims


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_refused_claim_closes_what_it_opened_and_a_released_one_leaves_no_file(tmp_path):
    profile = tmp_path / "p.json"
    with claims.claimed({"--profile-out": profile}):
        before = _open_fds()
        for _ in range(3):
            with pytest.raises(PlannerError, match=rf"pid {os.getpid()}\)"), claims.claimed({"--profile-out": profile}):
                pass
            claims.check_unclaimed({"--profile-out": tmp_path / "other.json"})  # no claim file: nothing to say
        assert _open_fds() == before
    assert list(tmp_path.iterdir()) == []


def test_a_file_system_without_locks_runs_unclaimed_with_a_warning(tmp_path, monkeypatch):
    """flock(2) fails with ENOLCK on NFS without lockd (and EOPNOTSUPP, ENOSYS elsewhere): the launch goes on,
    saying a second launch would not be stopped, rather than refusing to run there."""

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    before = _open_fds()
    with pytest.warns(UserWarning, match="without file locks"), claims.claimed({"--checkpoint-dir": tmp_path}):
        pass
    claims.check_unclaimed({"--checkpoint-dir": tmp_path})  # the check says nothing: the claim warned
    assert _open_fds() == before and list(tmp_path.iterdir()) == []
