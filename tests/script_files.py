"""A script of the repository (scripts/, guard/: not packages) imported from its file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def load_file(path: Path, name: str) -> ModuleType:
    """`path` as module `name`, registered in `sys.modules` (its dataclasses look it up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
