"""Load a Triton kernel module in interpreter mode, so its kernels run on CPU tensors.

Triton picks compiled or interpreted when a kernel is decorated, reading TRITON_INTERPRET
then, and its interpreter reads it again at launch. So the module is loaded afresh under a
private name with the variable set (the importable one is left as it was), and callers keep
it set while launching (`interpreter_mode`). Nothing else in the process sees it.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import sys


@contextlib.contextmanager
def interpreter_mode():
    old = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if old is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = old


def load_interpreted(module_name: str):
    """A private copy of `module_name` whose @triton.jit functions are interpreted."""
    spec = importlib.util.find_spec(module_name)
    private = importlib.util.spec_from_file_location(f"{module_name}__interpreted", spec.origin,
                                                     submodule_search_locations=None)
    module = importlib.util.module_from_spec(private)
    module.__package__ = module_name.rpartition(".")[0]  # its relative imports resolve as usual
    with interpreter_mode():
        sys.modules[private.name] = module
        try:
            private.loader.exec_module(module)
        finally:
            del sys.modules[private.name]
    return module
