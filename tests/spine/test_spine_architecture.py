"""docs/architecture.md's import floors and folder map, computed from the code, so that they cannot drift:
an entry's floor is 1 + the highest floor of the entries it imports (every import statement of the suite,
those inside functions too), 1 for one that imports nothing of the suite. An entry is a package folder
(``cli/``), a module at the top of ``repro/`` (``errors.py``), ``analysis/`` or ``scripts/``, or a file the
table lists apart from its folder (as ``claims/language.py`` was), which the rest of its folder then leaves out."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return DOC.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _table() -> dict[str, int]:
    """The floor table: entry -> floor."""
    rows = re.findall(r"^\| (\d+) \| (.*) \|$", _section("Import floors"), re.M)
    return {entry: int(floor) for floor, cell in rows for entry in re.findall(r"`([^`]+)`", cell)}


def _files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for d in ("repro", "analysis", "scripts") for p in (ROOT / d).rglob("*.py"))


def _entry(rel: str, apart: set[str]) -> str:
    parts = rel.split("/")
    if rel.removeprefix("repro/") in apart:
        return rel.removeprefix("repro/")
    if parts[0] in ("analysis", "scripts"):
        return parts[0] + "/"
    return (rel if parts[1] == "__main__.py" else parts[1]) if len(parts) == 2 else parts[1] + "/"


def _module(rel: str) -> str:
    name = rel.removesuffix(".py").replace("/", ".")
    return name.removesuffix(".__init__")


def _imports(apart: set[str]) -> dict[str, set[str]]:
    """Entry -> the other entries it imports."""
    modules = {_module(rel): rel for rel in _files()}
    out: dict[str, set[str]] = {}
    for rel in _files():
        if rel == "repro/__init__.py":  # the package's version string
            continue
        here = _entry(rel, apart)
        targets = out.setdefault(here, set())
        for node in ast.walk(ast.parse((ROOT / rel).read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names = [f"{node.module}.{a.name}" for a in node.names]
            else:
                continue
            for name in names:
                while name and name not in modules:
                    name = name.rpartition(".")[0]
                if name.startswith("repro.") and _entry(modules[name], apart) != here:
                    targets.add(_entry(modules[name], apart))
    return out


def _floors(imports: dict[str, set[str]]) -> dict[str, int]:
    @functools.cache
    def floor(entry: str, path: tuple[str, ...] = ()) -> int:
        assert entry not in path, f"an import circle: {' -> '.join([*path, entry])}"
        return 1 + max((floor(t, (*path, entry)) for t in imports[entry]), default=0)

    return {entry: floor(entry) for entry in imports}


def test_the_floor_table_is_the_floors_the_imports_give():
    table = _table()
    computed = _floors(_imports({e for e in table if "/" in e and not e.endswith("/")}))
    assert table == computed


def test_the_folder_map_names_every_package_with_its_floor():
    """Every package folder of repro/ (and analysis/) has its paragraph, headed with its floor; each package
    inside one is named in it; every module at the top of repro/ is named in theirs."""
    folders = _section("Folder by folder")
    floors = _floors(_imports({e for e in _table() if "/" in e and not e.endswith("/")}))
    headed = dict(re.findall(r"^\*\*`(?:repro/)?([a-z_]+/)` \((\d+)[,)]", folders, re.M))
    packages = {p.parent.name + "/" for p in (ROOT / "repro").glob("*/__init__.py")}
    assert set(headed) == packages | {"analysis/"}
    assert {folder: int(floor) for folder, floor in headed.items()} == {f: floors[f] for f in headed}
    for inner in (ROOT / "repro").glob("*/*/__init__.py"):
        paragraph = folders.split(f"**`repro/{inner.parent.parent.name}/`", 1)[1].split("\n\n", 1)[0]
        assert f"`{inner.parent.name}/`" in paragraph, inner.parent
    top = folders.split("**At the top of `repro/`**", 1)[1].split("\n\n", 1)[0]
    for module in (ROOT / "repro").glob("*.py"):
        if module.name not in ("__init__.py", "__main__.py"):
            assert f"`{module.name}`" in top, module.name


def test_the_folder_map_names_every_module():
    """Every module of a package of repro/ (and of the packages inside one) is named, as ``name.py``, in its
    package's paragraph; a package's own ``__init__.py`` is the folder that paragraph is about."""
    folders = _section("Folder by folder")
    unnamed = []
    for module in sorted((ROOT / "repro").glob("*/**/*.py")):
        package = module.relative_to(ROOT / "repro").parts[0]
        paragraph = folders.split(f"**`repro/{package}/`", 1)[1].split("\n\n", 1)[0]
        if module.name != "__init__.py" and f"`{module.name}`" not in paragraph:
            unnamed.append(str(module.relative_to(ROOT)))
    assert unnamed == []
