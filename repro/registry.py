"""One way to register: a :class:`Registry` is the named, ordered entries of one kind, each declared once
where its code lives and collected in one explicit list that a reader (and the import graph) can follow:

* commands: ``repro.cli.commands.COMMANDS``, the ``COMMAND = Command(...)`` each command module declares
  with its own arguments (imported: command modules import what they run lazily);
* benchmarks: ``repro.bench.BENCHES``, and the frontier's attentions: ``repro.config.families.ATTENTIONS``,
  :class:`Plugin` entries that name their module, imported when used: they import torch, and manifests are
  checked, the parser is built and ``--help`` answers without it;
* renderers: ``repro.report.renderers.RENDERERS``, the ``@renderer(...)`` declarations of the renderer
  files; which files, is a folder (``analysis/``, a manifest's own), and what they declare is read from
  their source without running them (``repro.config.renderer_names``) so that reading a manifest runs no
  renderer code (docs/faults.md).

A test adds an entry for its own duration with :meth:`Registry.added`.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, TypeVar


class Named(Protocol):
    name: str


E = TypeVar("E", bound=Named)


class Registry(Mapping[str, E]):
    """Entries by name, in the order given (a mapping: iterating gives the names)."""

    def __init__(self, kind: str, entries: list[E] | tuple[E, ...] = ()):
        self.kind = kind
        self._entries: dict[str, E] = {}
        for entry in entries:
            self.add(entry)

    def add(self, entry: E, replace: bool = False) -> E:
        """Register ``entry``; one of the same name is an error unless ``replace``."""
        if entry.name in self._entries and not replace:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        self._entries[entry.name] = entry
        return entry

    @contextlib.contextmanager
    def added(self, entry: E) -> Iterator[E]:
        """``entry`` registered while the block runs (a test's own entry)."""
        self.add(entry)
        try:
            yield entry
        finally:
            del self._entries[entry.name]

    def names(self) -> tuple[str, ...]:
        return tuple(self._entries)

    def __getitem__(self, name: str) -> E:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"


@dataclass(frozen=True)
class Plugin:
    """An entry whose code is a module, named here and imported when used (:meth:`load`)."""

    name: str
    module: str

    def load(self) -> ModuleType:
        return importlib.import_module(self.module)


@dataclass(frozen=True)
class Command:
    """A ``repro`` command: its name, its one-line ``help`` (also its ``--help`` description, unless
    ``description`` says otherwise; "" for none), ``add_arguments(parser, parents)`` that declares its
    options on its parser (``parents``: the options every command takes, for subcommands of its own), and
    the ``handler(args) -> exit status`` that runs it (None: a command whose subcommands set their own)."""

    name: str
    help: str
    add_arguments: Callable[[Any, list[Any]], None]
    handler: Callable[[Any], int] | None
    description: str | None = None
