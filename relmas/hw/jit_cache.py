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

from relmas.io import atomic_path

_STAMP = "relmas-hw-kernels.sha256"


def refresh(kernel: object, modules: Iterable[ModuleType], *, stamp: str = _STAMP) -> None:
    """Delete the cache files of `modules` in `kernel`'s cache directory when a source changed.

    Only the modules beside `kernel`'s source file have their files in that directory (the others
    are kept fresh by their own directory's refresh). `stamp` names the digest file: kernels that
    share a cache directory but embed different modules need their own (e.g. the heuristics' and
    the genetic algorithm's in relmas/policies).
    """
    cache = getattr(kernel, "_cache", None)
    directory = getattr(cache, "_cache_path", None)
    if directory is None:  # NUMBA_DISABLE_JIT, or caching off
        return
    modules = list(modules)
    digest = hashlib.sha256()
    for module in modules:
        digest.update(Path(module.__file__).read_bytes())
    stamp_path = Path(directory) / stamp
    current = digest.hexdigest()
    if stamp_path.is_file() and stamp_path.read_text() == current:
        return
    here = Path(kernel.py_func.__code__.co_filename).parent
    for module in modules:
        if Path(module.__file__).parent != here:
            continue
        stem = Path(module.__file__).stem
        for pattern in (f"{stem}.*.nbi", f"{stem}.*.nbc"):
            for path in Path(directory).glob(pattern):
                path.unlink(missing_ok=True)
    Path(directory).mkdir(parents=True, exist_ok=True)
    # atomic, so that an error (a full disk) names the stamp; no output: a failed command keeps it
    with atomic_path(stamp_path, suffix=".sha256", output=False) as tmp:
        tmp.write_text(current)
