"""The package's shape: no import cycle, no module importing from a layer above its own, no
library module over 300 lines (walked with ``ast``, so imports inside functions and
``TYPE_CHECKING`` blocks count too), no module text citing a repository file that an installed
package lacks."""
from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "isorag_pyg"
#: Bottom to top: a module may import from its own layer or those below.
LAYERS = [
    {"version", "lazy", "knobs", "defaults", "plugins", "progress"},
    {"utils"},
    {"datasets", "nn"},
    {"encoders", "qa", "training", "transforms", "retrieval"},
    {"graph", "scale", "evaluation"},
    {"store"},
    {"index"},
    {"llm", "experiments"},
    {"jobs", "server"},
    {"cli"},
]
MAX_LINES = 300
#: Repository files and folders that are not installed with the package.
OUTSIDE_PACKAGE = re.compile(r"\b(?:benchmarks|conf|docs|tests)/|README|\b(?:evaluate|train)\.py\b")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: Path, modules: set[str]) -> set[str]:
    """The package modules ``path`` imports (``from package import name`` counts the submodule
    ``name`` when there is one, else the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and node.module.startswith("isorag_pyg"):
            for alias in node.names:
                found.add(f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in modules else node.module)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    files = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {name: imported_modules(path, set(files)) - {name} for name, path in files.items()}


def layer(module: str) -> int:
    unit = module.split(".")[1] if "." in module else "__root__"
    if unit == "__root__":
        return len(LAYERS)  # the package's own __init__ sits on top
    return next(i for i, units in enumerate(LAYERS) if unit in units)


def test_every_module_has_a_layer():
    for module in import_graph():
        layer(module)  # StopIteration names a module outside LAYERS


def test_no_import_cycle():
    graphlib.TopologicalSorter(import_graph()).prepare()  # raises CycleError naming the cycle


def test_no_module_imports_from_a_layer_above_its_own():
    upward = [(a, b) for a, targets in import_graph().items() for b in targets if layer(b) > layer(a)]
    assert upward == []


def test_no_module_is_imported_for_its_side_effects():
    """``from package import module  # noqa: F401`` (a registration by import) is not how parts join a registry."""
    side_effects = {f"{module_name(p)}:{i}": line.strip() for p in PACKAGE.rglob("*.py")
                    for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"^\s*(from|import) .*# noqa: F401", line)
                    and "import " in line and not line.strip().startswith("import llama_cpp")}
    assert side_effects == {}


def test_index_holds_at_most_ten_modules():
    assert len(list((PACKAGE / "index").glob("*.py"))) <= 10


def test_no_library_module_is_over_300_lines():
    long = {module_name(p): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_library_module_cites_a_file_outside_the_installed_package():
    """Docstrings, comments and help strings point at what a user of the installed package has."""
    cited = {f"{module_name(p)}:{i}": line.strip() for p in PACKAGE.rglob("*.py")
             for i, line in enumerate(p.read_text().splitlines(), 1) if OUTSIDE_PACKAGE.search(line)}
    assert cited == {}
