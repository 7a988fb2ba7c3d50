"""YAML from files others wrote: safe types only, UTF-8 only, and a bound on what aliases expand to.

PyYAML shares one object per anchor, so an alias "bomb" (a few lines whose anchors nest nine
aliases each) loads small but explodes when copied or hashed; a recursive alias never ends. The node
graph is measured with every alias expanded before anything is built.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from repro.bounds import MAX_MANIFEST_BYTES
from repro.errors import UserError

MAX_NODES = 200_000  # far above any manifest (the largest shipped one has a few hundred nodes)


class YamlError(UserError):
    pass


def read(path: Path) -> Any:
    """The document in ``path``; YamlError (one line naming the file) for anything unreadable."""
    raw = read_bounded(Path(path), MAX_MANIFEST_BYTES, YamlError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise YamlError(f"{path}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})") from None
    return loads(text, str(path))


def read_bounded(path: Path, limit: int, error: type[Exception]) -> bytes:
    """The bytes of the regular file ``path`` if it holds at most ``limit``; ``error`` (one line naming
    it) for anything else: a device (``/dev/zero``), a FIFO (opened without blocking, never read), a
    folder, a larger file, an unreadable one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise error(f"{path}: cannot read: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path}: not a regular file; allowed: a regular file")
        if st.st_size > limit:
            raise error(f"{path}: {st.st_size:,} bytes; allowed: at most {limit:,}")
        with os.fdopen(os.dup(fd), "rb") as fh:
            raw = fh.read(limit + 1)
    except OSError as err:
        raise error(f"{path}: cannot read: {err.strerror}") from None
    finally:
        os.close(fd)
    if len(raw) > limit:  # it grew as we read
        raise error(f"{path}: more than {limit:,} bytes; allowed: at most {limit:,}")
    return raw


def loads(text: str, where: str) -> Any:
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        size = expanded_size(node, where)
        if size > MAX_NODES:
            raise YamlError(f"{where}: aliases expand to more than {MAX_NODES:,} YAML nodes; write the values out")
        return loader.construct_document(node)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark else where
        raise YamlError(f"{at}: YAML syntax error: {getattr(err, 'problem', None) or err}") from None
    except RecursionError:
        raise YamlError(f"{where}: YAML nested too deeply") from None
    finally:
        loader.dispose()


def expanded_size(root: yaml.Node, where: str) -> int:
    """Nodes in the document with every alias expanded (capped just above MAX_NODES); a recursive
    alias is an error."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()  # the ancestors of the node being visited
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = min(MAX_NODES + 1, 1 + sum(sizes[id(c)] for c in _children(node)))
            continue
        if id(node) in sizes:
            continue
        if id(node) in open_nodes:
            raise YamlError(f"{where}:{node.start_mark.line + 1}: a recursive alias (an anchor used inside itself)")
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node) if id(c) not in sizes)
    return sizes[id(root)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
