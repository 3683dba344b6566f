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
