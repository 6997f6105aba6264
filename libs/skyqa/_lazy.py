"""Package re-exports resolved on first use (PEP 562).

A package ``__init__`` that imports every submodule makes importing its lightest part cost as
much as its heaviest: ``skyqa.sim.classes`` used to load Open3D and compile-ready numba, and
``skyqa.models.endpoints`` grpc and Pillow, into the gateway and the evaluator, which never
render. With these hooks a package keeps its public names while a process pays only for the
submodules it touches.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str, origins: Mapping[str, tuple[str, ...]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``; ``origins`` maps a submodule to the names it exports."""
    where = {name: module for module, names in origins.items() for name in names}
    namespace = vars(sys.modules[package])

    def __getattr__(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later look-ups are plain attribute reads
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *where})

    return __getattr__, __dir__
