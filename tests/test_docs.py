"""The docs name settings, modules and make targets; each must exist.

A plain file check (no database, no Django setup): the docs drifted from the code once (issue
26), and a name that no longer exists is the cheapest drift to catch. What counts as project
code is decided by what the repository holds, so a name of something else (an event type, an
ACP method, a workspace file) passes as long as it resolves to nothing of ours.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# The Python packages of the project; tests/ and bench/ are named in docs as files only.
PACKAGES = sorted(p.parent.name for p in REPO.glob("*/__init__.py"))
TOP_DIRS = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith(".")}
CODE_DIRS = [*PACKAGES, "tests", "bench"]
SKIP_PARTS = {"__pycache__", "migrations", "node_modules", "static"}

SPAN = re.compile(r"(?<!`)`([^`\n]+)`(?!`)")
FENCE = re.compile(r"^\s*```")
SETTING_NAME = re.compile(r"\bCANVAS_[A-Z0-9_]+\b\*?")
CONSTANT = re.compile(r"^[A-Z][A-Z0-9]*_[A-Z0-9_]+$")
# The kernel's names (capabilities, open and prctl flags, signals): not ours to define.
OS_NAMES = ("CAP_", "O_", "PR_", "RENAME_", "SIG")
MAKE = re.compile(r"(?:^|[\s`;&(])make ([a-z][a-z0-9-]*)")
IDENT = r"[A-Za-z_]\w*"
DOTTED = re.compile(rf"^{IDENT}(\.{IDENT})+$")
SLASHED = re.compile(r"^[\w.-]+(/[\w.-]+)*/?$")
FILE_SUFFIXES = (".py", ".md", ".html", ".yml", ".yaml", ".toml", ".js", ".css", ".sh", ".json")


def doc_lines() -> Iterator[tuple[str, int, str, bool]]:
    """(doc, line number, text, inside a fenced block) for every line of every doc."""
    for doc in DOCS:
        fenced = False
        for number, text in enumerate(doc.read_text().splitlines(), 1):
            if FENCE.match(text):
                fenced = not fenced
                continue
            yield doc.relative_to(REPO).as_posix(), number, text, fenced


def spans() -> Iterator[tuple[str, int, str]]:
    """Every inline code span outside fenced blocks, as (doc, line, text)."""
    for doc, number, text, fenced in doc_lines():
        if not fenced:
            for match in SPAN.finditer(text):
                yield doc, number, match.group(1).strip()


@cache
def sources() -> dict[Path, str]:
    """Every Python file of the project and its text, read once."""
    return {
        path: path.read_text()
        for top in CODE_DIRS
        for path in (REPO / top).rglob("*.py")
        if not SKIP_PARTS.intersection(path.relative_to(REPO).parts)
    }


def is_product(path: Path) -> bool:
    return path.relative_to(REPO).parts[0] not in {"tests", "bench"}


@cache
def product_strings() -> frozenset[str]:
    """The project's own code's (not tests' or benches') quoted names: a setting is read by name."""
    text = "\n".join(text for path, text in sources().items() if is_product(path))
    return frozenset(re.findall(r"""["'](CANVAS_\w+)["']""", text))


@cache
def all_text() -> str:
    """Code, templates, scripts and build files: where any name the docs mention may live."""
    extra = [*(REPO / "templates").rglob("*.html"), *(REPO / "canvas" / "static").rglob("*.js")]
    extra += [REPO / "Makefile", REPO / "Dockerfile", REPO / "docker-compose.yml"]
    extra += [p for p in (REPO / "docker").rglob("*") if p.is_file()]
    return "\n".join([*sources().values(), *(p.read_text(errors="replace") for p in extra)])


@cache
def constants() -> frozenset[str]:
    return frozenset(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", all_text()))


@cache
def quoted() -> frozenset[str]:
    """Every short quoted string in the code: event types, task names, hint types."""
    return frozenset(re.findall(r"""["']([\w.:/-]+)["']""", all_text()))


@cache
def settings_names() -> frozenset[str]:
    tree = ast.parse((REPO / "canvas" / "settings.py").read_text())
    return frozenset(name for node in tree.body for name in bound_names(node))


@cache
def django_settings() -> frozenset[str]:
    from django.conf import global_settings

    return frozenset(name for name in dir(global_settings) if name.isupper())


@cache
def makefile_targets() -> frozenset[str]:
    text = (REPO / "Makefile").read_text()
    return frozenset(re.findall(r"^([A-Za-z0-9_.-]+)\s*:(?!=)", text, re.MULTILINE))


# --- resolving a dotted name against the source, without importing it --------------------


@cache
def parsed(path: Path) -> ast.Module:
    return ast.parse(sources().get(path) or path.read_text())


def bound_names(node: ast.stmt) -> Iterator[str]:
    """Names a statement binds at its own level (descending into if / try blocks)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        yield node.name
    elif isinstance(node, ast.Assign):
        for target in node.targets:
            yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
        yield node.target.id
    elif isinstance(node, ast.Import | ast.ImportFrom):
        for alias in node.names:
            yield (alias.asname or alias.name).split(".")[0]
    elif isinstance(node, ast.If | ast.Try | ast.With):
        for child in [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]:
            yield from bound_names(child)
        for handler in getattr(node, "handlers", []):
            for child in handler.body:
                yield from bound_names(child)


def binding(body: list[ast.stmt], name: str) -> ast.stmt | None:
    for node in body:
        if isinstance(node, ast.If | ast.Try | ast.With):
            found = binding([*node.body, *getattr(node, "orelse", [])], name)
            if found is not None:
                return found
        elif name in bound_names(node):
            return node
    return None


def class_has(cls: ast.ClassDef, name: str, depth: int = 0) -> bool:
    """A class attribute, method, field, or an attribute its methods set on self."""
    if binding(cls.body, name) is not None:
        return True
    for node in ast.walk(cls):
        if (
            isinstance(node, ast.Attribute)
            and node.attr == name
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        ):
            return True
    # Inherited from a base of ours defined under that name somewhere in the project.
    bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", None) for b in cls.bases]
    return depth < 5 and any(
        class_has(other, name, depth + 1)
        for base in bases
        if base and base != cls.name
        for other in classes_named(base)
    )


@cache
def class_files() -> dict[str, list[Path]]:
    index: dict[str, list[Path]] = {}
    for path, text in sources().items():
        for name in set(re.findall(r"^\s*class (\w+)", text, re.MULTILINE)):
            index.setdefault(name, []).append(path)
    return index


@cache
def classes_named(name: str) -> tuple[ast.ClassDef, ...]:
    return tuple(
        node
        for path in class_files().get(name, [])
        for node in ast.walk(parsed(path))
        if isinstance(node, ast.ClassDef) and node.name == name
    )


def module_file(parts: list[str]) -> Path | None:
    base = REPO.joinpath(*parts)
    if (base / "__init__.py").exists():
        return base / "__init__.py"
    if base.with_suffix(".py").exists():
        return base.with_suffix(".py")
    return None


def resolve_in_module(path: Path, attrs: list[str]) -> str | None:
    """None when path's module has attrs (a chain of names); else what is missing."""
    if not attrs:
        return None
    rel = path.relative_to(REPO)
    package = list(rel.parent.parts)
    submodule = module_file([*rel.parent.parts, attrs[0]]) if path.name == "__init__.py" else None
    node = binding(parsed(path).body, attrs[0])
    if node is None and submodule is not None:
        return resolve_in_module(submodule, attrs[1:])
    if node is None:
        return f"no {attrs[0]} in {rel.as_posix()}"
    if isinstance(node, ast.ImportFrom):
        source = import_source(node, package)
        if source is not None:
            alias = next(a for a in node.names if (a.asname or a.name) == attrs[0])
            target = module_file([*source, alias.name])
            if target is not None:
                return resolve_in_module(target, attrs[1:])
            source_file = module_file(source)
            if source_file is not None:
                return resolve_in_module(source_file, [alias.name, *attrs[1:]])
        return None  # from a library: we do not look further
    if len(attrs) == 1:
        return None
    if isinstance(node, ast.ClassDef):
        if class_has(node, attrs[1]):
            return None
        return f"no {attrs[1]} on {attrs[0]} in {rel.as_posix()}"
    return None  # an attribute of a value we do not follow


def import_source(node: ast.ImportFrom, package: list[str]) -> list[str] | None:
    """The project module an ImportFrom reads from, as path parts, or None for a library."""
    module = (node.module or "").split(".") if node.module else []
    if node.level:
        base = package[: len(package) - node.level + 1] if node.level > 1 else package
        return [*base, *module]
    return module if module and module[0] in PACKAGES else None


@cache
def module_index() -> dict[str, list[Path]]:
    """Product modules by their last name (`store` -> conversations/store.py, ...)."""
    index: dict[str, list[Path]] = {}
    for path in filter(is_product, sources()):
        name = path.parent.name if path.name == "__init__.py" else path.stem
        index.setdefault(name, []).append(path)
    return index


def resolve_dotted(name: str) -> str | None:
    """None when name resolves (or is not a name of our code); else what is missing."""
    parts = name.split(".")
    if parts[0] in PACKAGES:
        for cut in range(len(parts), 0, -1):
            path = module_file(parts[:cut])
            if path is not None:
                return resolve_in_module(path, parts[cut:])
        return f"no module {name}"
    problems = []
    for path in module_index().get(parts[0], []):
        problem = resolve_in_module(path, parts[1:])
        if problem is None:
            return None
        problems.append(problem)
    for cls in classes_named(parts[0]):
        if class_has(cls, parts[1]):
            return None
        problems.append(f"no {parts[1]} on class {parts[0]}")
    return "; ".join(problems) or None


def check_span(text: str) -> str | None:
    """What is missing for one code span that names project code, or None."""
    text = re.sub(r"\(.*$", "", text)  # `Workspace.run(extra_env=...)`: the name before the call
    if not text or "<" in text or "{" in text or text.startswith(("/", "../", "~")):
        return None
    if "::" in text:  # `conversations/store.py::append`
        file, _, attr = text.partition("::")
        problem = check_span(file)
        return problem or resolve_in_module(REPO / file, attr.split("."))
    if "/" in text and SLASHED.match(text):
        return check_path(text)
    if text.endswith(".py") and re.fullmatch(rf"{IDENT}\.py", text):
        if not any(p.name == text for p in sources()):
            return f"no file named {text}"
        return None
    if DOTTED.match(text) and not text.endswith(FILE_SUFFIXES):
        problem = resolve_dotted(text)
        # `tool.call`, `automations.send_notice`: an event type or task name the code spells out.
        return None if text in quoted() else problem
    return None


def check_path(text: str) -> str | None:
    first = text.split("/")[0]
    if first in TOP_DIRS:
        if (REPO / text).exists():
            return None
        if not text.endswith(("/", *FILE_SUFFIXES)):
            # `orchestration/tools/base.team_secrets`: a module path, then a name in it.
            return resolve_dotted(text.replace("/", "."))
        return f"no {text}"
    if text.endswith("/") or text.endswith(".py"):
        # Relative to the app a paragraph is about (`chain/`, `step/condense.py`).
        suffix = text.rstrip("/")
        if any(p.endswith("/" + suffix) for p in all_paths()):
            return None
        return f"nothing in the project ends with {text}"
    return None


@cache
def all_paths() -> tuple[str, ...]:
    return tuple(
        p.relative_to(REPO).as_posix()
        for top in TOP_DIRS - {"var"}
        for p in (REPO / top).rglob("*")
        if not SKIP_PARTS.intersection(p.parts)
    )


# --- the tests ---------------------------------------------------------------------------


def report(problems: list[str]) -> str:
    return "stale names in the docs:\n  " + "\n  ".join(problems)


def test_settings_the_docs_name_exist() -> None:
    """CANVAS_* anywhere in the docs (prose, spans, examples); other constants in spans."""
    read = product_strings()
    problems = []
    for doc, number, text, _ in doc_lines():
        for match in SETTING_NAME.finditer(text):
            name = match.group(0)
            if name.endswith("*"):  # `CANVAS_DOCKER_*`: a family, one member is enough
                found = any(n.startswith(name[:-1]) for n in read)
            else:
                found = name in settings_names() or name in read
            if not found:
                problems.append(
                    f"{doc}:{number}: setting {name} is neither in canvas/settings.py nor read from the environment"
                )
    known = settings_names() | django_settings() | constants()
    for doc, number, span in spans():
        name = span.split("=")[0]
        if (
            CONSTANT.match(name)
            and not name.startswith(("CANVAS_", *OS_NAMES))
            and name not in known
        ):
            problems.append(f"{doc}:{number}: {name} is no setting and appears nowhere in the code")
    assert not problems, report(problems)


def test_code_the_docs_name_exists() -> None:
    problems = []
    for doc, number, span in spans():
        problem = check_span(span)
        if problem:
            problems.append(f"{doc}:{number}: `{span}`: {problem}")
    assert not problems, report(problems)


def test_make_targets_the_docs_name_exist() -> None:
    problems = []
    for doc, number, text, fenced in doc_lines():
        # Prose says "make the page..." too: outside code only a `make x` span counts.
        candidates = (
            MAKE.findall(text)
            if fenced
            else [t for s in SPAN.findall(text) for t in MAKE.findall(s)]
        )
        problems += [
            f"{doc}:{number}: make {target}: no such target in the Makefile"
            for target in candidates
            if target not in makefile_targets()
        ]
    assert not problems, report(problems)
