"""Keep Numba's on-disk caches of the cost-model kernels in step with their sources.

Why: Numba keys a cached function on its own source file only, yet a cached caller embeds the
compiled code of the functions it calls from other files. Editing eyeriss.py would leave the cached
parallel kernel of search.py running the old model. So a digest of every kernel source is stored
beside the cache; when it differs, the kernels' cache files are deleted and recompiled once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

_STAMP = "relmas-hw-kernels.sha256"


def refresh(kernel: object, modules: Iterable[ModuleType]) -> None:
    """Delete the cache files of `modules` in `kernel`'s cache directory when a source changed."""
    cache = getattr(kernel, "_cache", None)
    directory = getattr(cache, "_cache_path", None)
    if directory is None:  # NUMBA_DISABLE_JIT, or caching off
        return
    modules = list(modules)
    digest = hashlib.sha256()
    for module in modules:
        digest.update(Path(module.__file__).read_bytes())
    stamp = Path(directory) / _STAMP
    current = digest.hexdigest()
    if stamp.is_file() and stamp.read_text() == current:
        return
    for module in modules:
        stem = Path(module.__file__).stem
        for pattern in (f"{stem}.*.nbi", f"{stem}.*.nbc"):
            for path in Path(directory).glob(pattern):
                path.unlink(missing_ok=True)
    Path(directory).mkdir(parents=True, exist_ok=True)
    stamp.write_text(current)
