"""Bounded, strict YAML reading for every file a user hands to relmas (config, spec, system).

A config is small; a file that is not, that is not UTF-8, that repeats a key or whose aliases expand
to a huge document is refused with one line before anything large is allocated: PyYAML shares
aliased nodes, but hashing, validating and copying the result walk every expanded node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from relmas.errors import InputError

MAX_BYTES = 1 << 20  # 1 MiB: the default study's config is ~12 KB
MAX_NODES = 1_000_000  # nodes of the document once every alias is expanded
MAX_DEPTH = 100  # nesting of mappings and lists (the parser itself recurses)
# libyaml's parser where PyYAML was built with it: every job reads its configs and the schema at
# start-up, and the same nodes and errors (with their marks) come faster
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(path: str | Path) -> Any:
    """Parse a YAML file; any problem with it is an InputError naming the file (and line)."""
    path = Path(path)
    try:
        if not path.is_file():
            raise InputError(path, None, "an existing YAML file")
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise InputError(path, None, f"a YAML file of at most {MAX_BYTES} bytes", size)
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(path, None, "a readable YAML file", exc.strerror) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"byte {exc.start}", "UTF-8 text") from None
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_node(node, path)
        return loader.construct_document(node)
    except RecursionError:
        raise InputError(path, None, f"nesting at most {MAX_DEPTH} deep") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else None
        raise InputError(path, where, "well-formed YAML", getattr(exc, "problem", None)) from None
    finally:
        loader.dispose()


def _check_node(root: yaml.Node, path: Path) -> None:
    """Refuse duplicate mapping keys and documents that expand to more than MAX_NODES nodes."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, depth: int) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        if depth > MAX_DEPTH:
            line = f"line {node.start_mark.line + 1}"
            raise InputError(path, line, f"nesting at most {MAX_DEPTH} deep")
        total = 1
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.tag != "tag:yaml.org,2002:merge":
                    if key.value in seen:
                        line = key.start_mark.line + 1
                        raise InputError(path, key.value, f"each key once (again at line {line})")
                    seen.add(key.value)
                total += size(key, depth + 1) + size(value, depth + 1)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(item, depth + 1) for item in node.value)
        if total > MAX_NODES:
            raise InputError(
                path, None, f"a document of at most {MAX_NODES} nodes with aliases expanded"
            )
        sizes[id(node)] = total
        return total

    size(root, 0)
