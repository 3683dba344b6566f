"""Static tools see the package mapping of setup.cfg: .static-imports/airlink/ (used by
pyrightconfig.json) mirrors [options] package_dir exactly."""
from __future__ import annotations

import configparser
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_static_import_tree_mirrors_package_dir():
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    mapping = {}
    for line in cfg["options"]["package_dir"].strip().splitlines():
        name, _, folder = (part.strip() for part in line.partition("="))
        mapping[name] = folder
    tree = REPO / ".static-imports" / "airlink"
    assert (tree / "__init__.py").resolve() == (REPO / "airlink" / "__init__.py").resolve()
    remapped = {n: f for n, f in mapping.items() if n.startswith("airlink.") and f != n.replace(".", "/")}
    assert remapped, "setup.cfg maps no folder onto airlink.*"
    for name, folder in remapped.items():
        link = tree / name.split(".", 1)[1]
        assert link.is_symlink() and link.resolve() == (REPO / folder).resolve(), name
    extra = {p.name for p in tree.iterdir()} - {"__init__.py"} - {n.split(".", 1)[1] for n in remapped}
    assert not extra, f"symlinks for folders setup.cfg does not map: {extra}"


def _collectors_imports() -> dict:
    """Module -> the collectors modules it imports (at top level or inside a function:
    a deferred import is a dependency all the same), from the source by ``ast``."""
    import ast
    root = REPO / "collectors"
    mods = {p.relative_to(root).with_suffix("").as_posix().replace("/", "."): p for p in root.rglob("*.py")}
    mods = {m[: -len(".__init__")] if m.endswith(".__init__") else m: p for m, p in mods.items()}
    graph = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".") if package else []
                    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
                    target = ".".join(base + ([node.module] if node.module else []))
                elif node.module and node.module.startswith("airlink.collectors"):
                    target = node.module[len("airlink.collectors"):].lstrip(".")
                else:
                    continue
                names = [target] + [f"{target}.{a.name}".lstrip(".") for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name[len("airlink.collectors"):].lstrip(".") for a in node.names
                         if a.name.startswith("airlink.collectors")]
            else:
                continue
            deps |= {n for n in names if n in mods and n != mod and n != "__init__"}
        graph[mod] = deps
    return graph


def _cycles(graph: dict) -> list:
    """Every ``a -> ... -> a`` path of a ``{node: {nodes it imports}}`` graph."""
    cycles = []
    for start in graph:                 # depth-first from each node back to itself
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    cycles.append(" -> ".join(path + [start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, path + [nxt]))
    return sorted(set(cycles))


def test_no_import_cycles_inside_collectors():
    """No module of airlink.collectors imports (directly or through others) a module that
    imports it back: the modules form layers (capture reading, TCP analysis, log readers)."""
    graph = _collectors_imports()
    assert "tcp" in graph and "pcap" in graph and graph["tcp"], "the import graph was not read"
    cycles = _cycles(graph)
    assert not cycles, "import cycles inside collectors:\n" + "\n".join(cycles)


PARTS = {"core": "airlink/core", "traces": "traces", "sim": "sim", "collectors": "collectors",
         "inference": "inference", "replay": "replay"}


def _part_imports() -> dict:
    """Part -> the other parts its modules import (top level or deferred), by ``ast``."""
    import ast

    def part_of(module: str):
        return next((p for p in PARTS if module == f"airlink.{p}" or module.startswith(f"airlink.{p}.")), None)
    graph = {p: set() for p in PARTS}
    for part, folder in PARTS.items():
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom) and node.module and node.level in (0, 2):
                    base = node.module if node.level == 0 else f"airlink.{node.module}"
                    modules = [base] + [f"{base}.{a.name}" for a in node.names]
                elif isinstance(node, ast.Import):
                    modules = [a.name for a in node.names]
                else:
                    continue
                graph[part] |= {q for q in map(part_of, modules) if q and q != part}
    return graph


def test_the_parts_import_each_other_without_cycles_and_the_core_imports_none():
    """airlink.core (errors, units, bounds, atomic writes, YAML, schemas, fairness) imports no
    other part; traces, sim, collectors, inference and replay import each other in layers."""
    graph = _part_imports()
    assert graph["core"] == set()
    assert "core" in graph["collectors"] and "core" in graph["traces"], "the import graph was not read"
    cycles = _cycles(graph)
    assert not cycles, "import cycles between the parts:\n" + "\n".join(cycles)
