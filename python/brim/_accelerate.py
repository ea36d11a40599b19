"""accelerate's prepared loaders under the attach: `DataLoaderShard.__iter__` fetches the next batch
before it hands over the current one (to know which batch is the last). Counted at the fetch, a
step would hold its own batch and the next one's (the first step twice the micro-batch, the last
none); counted when the batch is handed over, each step holds its own."""

import sys
from typing import Any, Iterator, List

from ._import_hook import OnImport
from ._step_state import attach
from ._wrap import wrap_once

MODULE = "accelerate.data_loader"


def _wrap_iter(original: Any) -> Any:
    def iter_with_brim(self: Any) -> Iterator[Any]:
        inner = original(self)
        fetched: List[Any] = []  # this loop's batches fetched and not yet handed over
        try:
            while True:
                outer, attach.ahead = attach.ahead, fetched
                try:
                    batch = next(inner)
                except StopIteration:
                    return
                finally:
                    attach.ahead = outer
                attach.handed(fetched)
                yield batch
        finally:
            close = getattr(inner, "close", None)
            if close is not None:
                close()

    return iter_with_brim


def patch(module: Any) -> None:
    shard = getattr(module, "DataLoaderShard", None)
    if shard is not None and hasattr(shard, "__iter__"):
        wrap_once(shard, "__iter__", _wrap_iter)


def install() -> None:
    """Wraps DataLoaderShard.__iter__ now if accelerate's loaders are loaded, else when they are."""
    module = sys.modules.get(MODULE)
    if module is not None:
        patch(module)
    else:
        sys.meta_path.insert(0, OnImport(MODULE, patch))
