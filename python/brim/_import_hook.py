"""One finder on sys.meta_path that waits for a module's import and patches it right after it loads."""

import importlib.abc
import importlib.util
import sys
from typing import Any, Callable


class OnImport(importlib.abc.MetaPathFinder):
    """Waits for `import <name>` and calls `patch(module)` right after the module has loaded.

    A spec asked for without importing (`importlib.util.find_spec("torch")`, as transformers,
    datasets and accelerate do to see whether a framework is there) is never executed: the finder
    stays on sys.meta_path until the module really loads, and leaves only then."""

    def __init__(self, name: str, patch: Callable[[Any], None]) -> None:
        self.name = name
        self.patch = patch
        self.busy = False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or self.busy:
            return None
        self.busy = True  # the lookup below asks the other finders, not this one
        try:
            spec = importlib.util.find_spec(self.name)
        finally:
            self.busy = False
        loader = getattr(spec, "loader", None)
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        original = loader.exec_module
        finder = self

        def exec_module(module: Any) -> None:
            try:
                sys.meta_path.remove(finder)
            except ValueError:
                pass
            try:
                del loader.exec_module  # the instance attribute set below: back to the class's
            except AttributeError:
                pass
            original(module)
            finder.patch(module)

        loader.exec_module = exec_module
        return spec
