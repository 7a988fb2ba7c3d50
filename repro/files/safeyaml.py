"""YAML from files others wrote: safe types only, UTF-8 only, a bound on what aliases expand to, and
one meaning per document.

PyYAML shares one object per anchor, so an alias "bomb" (a few lines whose anchors nest nine
aliases each) loads small but explodes when copied or hashed; a recursive alias never ends. The node
graph is measured with every alias expanded before anything is built.

PyYAML reads YAML 1.1, where some plain scalars mean what few writers meant and what YAML 1.2 readers
(and the YAML spec since 2009) read otherwise: ``1:20:00`` is 4800 (base 60), ``on``/``off``/``yes``/``no``
are booleans, ``017`` is 15 (octal), ``0b10100`` is 20 (binary), ``1_000`` is 1000 and ``3_0.0e-5`` is
3e-4 (YAML 1.1 skips a number's ``_``), and ``0o17`` is text. Such a scalar is refused, naming its key and
line, as is a key set twice in one mapping (PyYAML keeps the last silently). One difference is read as
YAML 1.2 reads it instead: ``2e-6`` (an exponent without a dot or sign) is text to YAML 1.1 and a number
to YAML 1.2, and a spec field that expects a number takes the number (:mod:`repro.config.fields`).
Parsing uses libyaml where PyYAML has it (the same documents, several times faster: a store's thousands
of spec.yaml files).
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from repro.bounds import MAX_MANIFEST_BYTES
from repro.errors import UserError

MAX_NODES = 200_000  # far above any manifest (the largest shipped one has a few hundred nodes)
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the C parser, the same safe constructor
MERGE = "tag:yaml.org,2002:merge"
# plain scalars that YAML 1.1 (PyYAML) and YAML 1.2 read differently, with what each makes of them
BOOL_11 = re.compile(r"yes|Yes|YES|no|No|NO|on|On|ON|off|Off|OFF")
BASE_60 = re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?")
OCTAL_11 = re.compile(r"[-+]?0[0-7_]+")
OCTAL_12 = re.compile(r"[-+]?0o[0-7]+")
BINARY_11 = re.compile(r"[-+]?0b[01]+")
NUMBER_11 = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")  # what YAML 1.1 resolves a number to
SUSPECT = re.compile("|".join(p.pattern for p in (BOOL_11, BASE_60, OCTAL_11, OCTAL_12)))  # one test first


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


def read_bounded(path: Path, limit: int | None, error: type[Exception]) -> bytes:
    """The bytes of the regular file ``path`` if it holds at most ``limit`` (None: any size); ``error``
    (one line naming it) for anything else: a device (``/dev/zero``), a FIFO (opened without blocking,
    never read), a folder, a larger file, an unreadable one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as err:
        raise error(f"{path}: cannot read: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path}: not a regular file; allowed: a regular file")
        if limit is not None and st.st_size > limit:
            raise error(f"{path}: {st.st_size:,} bytes; allowed: at most {limit:,}")
        with os.fdopen(os.dup(fd), "rb") as fh:
            raw = fh.read() if limit is None else fh.read(limit + 1)
    except OSError as err:
        raise error(f"{path}: cannot read: {err.strerror}") from None
    finally:
        os.close(fd)
    if limit is not None and len(raw) > limit:  # it grew as we read
        raise error(f"{path}: more than {limit:,} bytes; allowed: at most {limit:,}")
    return raw


def not_regular(mode: int) -> str:
    """What a file of ``mode`` (``os.lstat``'s) is when it is no regular file: ``a FIFO``, ``a device``,
    ``a socket``, ``a folder``, ``a symbolic link``."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a folder" if stat.S_ISDIR(mode) else "a symbolic link" if stat.S_ISLNK(mode) else "a socket"


def loads(text: str, where: str) -> Any:
    loader = LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        # without an anchor there is no alias: a tree of at most a node per character (and one more)
        size = 0 if "&" not in text and 2 * len(text) < MAX_NODES else expanded_size(node, where)
        if size > MAX_NODES:
            raise YamlError(f"{where}: aliases expand to more than {MAX_NODES:,} YAML nodes; write the values out")
        one_meaning(node, where)
        return loader.construct_document(node)
    except yaml.reader.ReaderError as err:  # a character YAML does not allow (a NUL byte): no mark of its own
        line, column = text.count("\n", 0, err.position) + 1, err.position - text.rfind("\n", 0, err.position)
        raise YamlError(
            f"{where}:{line}: YAML syntax error: character #x{err.character:04x} at column {column}: {err.reason} "
            "in YAML text"
        ) from None
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


def one_meaning(root: yaml.Node, where: str) -> None:
    """YamlError (one line naming the key and line) for a key set twice in one mapping, or a plain
    scalar that YAML 1.1 and YAML 1.2 read differently. Each node is visited once (aliases share)."""
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            _one_reading(node, path or "the document", where)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            lines: dict[tuple[str, str], int] = {}
            for key, value in node.value:
                name = f"{path}.{key.value}" if path and isinstance(key, yaml.ScalarNode) else str(key.value)
                if isinstance(key, yaml.ScalarNode) and key.tag != MERGE:
                    _one_reading(key, name, where)
                    line, same = key.start_mark.line + 1, (key.tag, key.value)
                    if same in lines:
                        raise YamlError(
                            f"{where}:{line}: {name}: set twice in one mapping (lines {lines[same]} and {line}); "
                            "keep one (YAML would silently keep the last)"
                        )
                    lines[same] = line
                stack.append((value, name))


def _one_reading(node: yaml.ScalarNode, name: str, where: str) -> None:
    """YamlError for a plain scalar that YAML 1.1 and 1.2 read differently."""
    text = node.value
    if node.style or len(text) > 64:  # plain: None (PyYAML) or "" (libyaml)
        return
    number = node.tag in NUMBER_11
    if not (SUSPECT.fullmatch(text) or (number and ("_" in text or BINARY_11.fullmatch(text)))):
        return
    if BOOL_11.fullmatch(text):
        why = "a boolean in YAML 1.1 and text in YAML 1.2; write true or false, or quote it for the text"
    elif BASE_60.fullmatch(text) and not isinstance(yaml.safe_load(text), str):
        why = f"{yaml.safe_load(text)} in YAML 1.1 (base 60) and text in YAML 1.2; write the number, or quote it"
    elif number and "_" in text:  # not constructed: PyYAML itself fails on some (0x_)
        why = "a number in YAML 1.1 (which skips its _) and text in YAML 1.2; write the number without _, or quote it"
    elif number and BINARY_11.fullmatch(text):
        why = f"{int(text, 0)} in YAML 1.1 (binary) and text in YAML 1.2; write it in decimal, or quote it"
    elif OCTAL_11.fullmatch(text) and int(text.replace("_", ""), 8) != int(text.replace("_", ""), 10):
        eight, ten = int(text.replace("_", ""), 8), int(text.replace("_", ""), 10)
        why = f"{eight} in YAML 1.1 (octal) and {ten} in YAML 1.2; write the number without its leading 0"
    elif OCTAL_12.fullmatch(text):
        why = f"text in YAML 1.1 and {int(text.replace('0o', ''), 8)} in YAML 1.2 (octal); write it in decimal"
    else:
        return
    raise YamlError(f"{where}:{node.start_mark.line + 1}: {name}: {text} is {why}")
