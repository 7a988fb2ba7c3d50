"""Command-line overrides, Hydra's conventions: ``key=value`` sets a dotted key in every run; with ``-m``,
``key=v1,v2`` makes the key a grid axis (added, or replacing the manifest's). Values are parsed by
OmegaConf's grammar (``2e-6`` is a number, ``[1,2]`` a list, ``null`` None, quotes keep a string).

A manifest with overrides is a new manifest (``set``/``sweep`` over the file, see ``repro.config.manifest``)
whose name records them, so its runs are stored and reported apart from the file's; ``save`` writes it as
a file that ``include:``s the original.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from repro.bounds import MAX_MANIFEST_BYTES
from repro.config.access import NONE, Access
from repro.config.manifest import Manifest, ManifestError, build, merge_documents, read
from repro.config.spec import SECTIONS
from repro.errors import UserError
from repro.files import atomic, safeyaml

MULTIRUN = "-m"
MAX_SUFFIX = 100  # characters of a derived name's overrides part (a path component must stay short)
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def is_override(arg: str) -> bool:
    """``key=value`` (what the commands take besides the manifest's name and the options)."""
    key, eq, _ = arg.partition("=")
    return bool(eq) and not arg.startswith("-") and bool(key)


def parse(items: list[str], multirun: bool) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """``(set, sweep)`` from ``key=value`` items; a comma list is a sweep only with ``-m``."""
    values: dict[str, Any] = {}
    axes: dict[str, list[Any]] = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not _KEY.fullmatch(key):
            raise UserError(f"override {item!r}: expected KEY=VALUE with a dotted key (model.span.ramp=64)")
        if key in SECTIONS:
            raise UserError(
                f"override {item[:80]!r}: sets the whole {key} section (its other keys back to their defaults); "
                f"allowed: one of its keys, {key}.KEY=VALUE"
            )
        listed = _value(item, f"[{raw}]")
        if len(listed) > 1 and not multirun:
            raise UserError(
                f"override {item!r}: a comma-separated list is a sweep: pass -m (a list value is written {key}=[{raw}])"
            )
        values.pop(key, None)  # a key given twice: the last one wins
        axes.pop(key, None)
        if len(listed) > 1:
            axes[key] = listed
        else:
            values[key] = _value(item, raw)
    return values, axes


def _value(item: str, text: str) -> Any:
    try:
        return OmegaConf.to_container(OmegaConf.from_dotlist([f"v={text}"]))["v"]
    except (OmegaConfBaseException, ValueError, yaml.YAMLError) as err:
        raise UserError(f"override {item!r}: cannot parse the value: {str(err).splitlines()[0]}") from None


def args_of(items: list[str], multirun: bool) -> list[str]:
    """The override arguments as the command line writes them."""
    return ([MULTIRUN] if multirun and items else []) + list(items)


def derive(path: Path, args: list[str], access: Access = NONE) -> Manifest:
    """The manifest file at ``path`` with the override arguments ``args`` (``-m`` and ``key=value``s);
    ``access``: the folders the user allowed beyond its own."""
    items = [a for a in args if a != MULTIRUN]
    values, axes = parse(items, MULTIRUN in args)
    folders: list[Path] = []  # of the files read: where its `file` corpus may lie
    doc = read(path, folders=folders, access=access)
    if not (values or axes):
        return build(doc, path, folders=folders, access=access)
    if doc.get("base") is None:
        raise ManifestError(f"{path}: {doc.get('name')} trains nothing: it takes no overrides")
    layer = {
        "name": f"{doc['name']}.{suffix(values, axes)}",
        "title": f"{doc['title']} [{' '.join(items)}]",
        "set": values,
        "sweep": axes,
    }
    return build(merge_documents(doc, layer), path, args_of(items, MULTIRUN in args), folders, access)


def suffix(values: dict[str, Any], axes: dict[str, list[Any]]) -> str:
    """The part of a derived manifest's name that records its overrides: ``model.span.ramp_16_48``
    (letters, digits, ``.``, ``-`` and ``_`` only; a short hash is appended when a value does not fit)."""
    tokens, exact = [], True
    for key in sorted({*values, *axes}):
        shown = []
        for value in axes.get(key, [values.get(key)]):
            text = json.dumps(value) if isinstance(value, (bool, list, dict)) or value is None else str(value)
            clean = re.sub(r"[^A-Za-z0-9.\-]", "-", text)
            exact &= clean == text
            shown.append(clean)
        tokens.append(f"{key}_{'_'.join(shown)}")
    name = ".".join(tokens)
    if len(name) > MAX_SUFFIX:  # a long value: its start, and the hash that tells it apart
        name, exact = name[:MAX_SUFFIX], False
    if not exact:
        blob = json.dumps({"set": values, "sweep": axes}, sort_keys=True, default=str)
        name += "." + hashlib.sha256(blob.encode()).hexdigest()[:8]
    return name


def save(manifest: Manifest, target: Path) -> Path:
    """Write ``manifest`` (derived by overrides) as a file: its source named by ``include:`` (relative to
    ``target``'s folder) plus ``set``/``sweep``. An existing different file is refused."""
    doc: dict[str, Any] = {
        "include": os.path.relpath(manifest.path.resolve(), target.resolve().parent),
        "name": manifest.name,
        "title": manifest.title,
    }
    items = [a for a in manifest.args if a != MULTIRUN]
    values, axes = parse(items, MULTIRUN in manifest.args)
    doc.update({k: v for k, v in (("set", values), ("sweep", axes)) if v})
    text = f"# repro {manifest.command}\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)
    if target.exists() or target.is_symlink():
        if target.is_symlink() or not target.is_file():
            raise UserError(f"--save {target}: not a regular file; allowed: a new file or a manifest saved before")
        if safeyaml.read_bounded(target, MAX_MANIFEST_BYTES, UserError) != text.encode():
            raise UserError(f"--save {target}: the file exists (and differs); remove it or choose another path")
    atomic.write_text(target, text)
    return target
