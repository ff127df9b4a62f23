"""Shared fixtures: where the repository and the read-only real data live."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """../shared/data beside the repository; tests that need it skip when it is absent."""
    if not SHARED_DATA.exists():
        pytest.skip(f"real data folder not found: {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """A saved tiny policy (_rl_fixtures.save_tiny) for the trainer-level tests, once per module."""
    from _rl_fixtures import save_tiny

    return save_tiny(tmp_path_factory.mktemp("base"))

