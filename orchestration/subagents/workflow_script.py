"""The `workflow(script)` tool's script: checked, then run by replay in a limited process.

A script is short async Python the model writes. It is either a module that defines
`async def main(wf):` (with, beside it, only other function definitions, assignments and a
docstring), or a bare body, which is run as the body of `async def main(wf):` (so top-level
`await` and `return` work). Its return value, JSON-serialisable, is the workflow's answer.

`check_script` parses it with `ast` and refuses, naming the rule, anything outside a small
allow-list: no import, no class, lambda, try, with, raise, del, yield, global or nonlocal, no
decorators, no name with a double underscore, none of the builtins that reach outside
(open, exec, eval, compile, getattr, ...), and attribute access only as `wf.<API>` (run_agent,
map_agents, pipeline, reduce_agent) or as one of a few methods on values (`_VALUE_METHODS`:
join, split, items, append, ...; never `format`, whose fields reach attributes). The script
sees only `_BUILTINS`; `print` does nothing.

`run_script` runs it from the top each time, by replay. Each `wf.*` child gets the key
"<order of issue in this run>-<hash of agent and prompt>"; a key found in `journal` returns
its recorded answer, and the first unanswered call ends the run as `Spawn` with every child
that call needs (all of `map_agents`' at once). `pipeline` and `reduce_agent` are `run_agent`
calls. The same script and journal always give the same keys (sets iterate in a fixed order:
the process runs with PYTHONHASHSEED=0), so after a crash no finished child is asked again.

It runs in its own short-lived process, started through workspaces.sandbox (bubblewrap: an
empty environment, no network, nothing writable but a fresh temp dir; or, where the site
allows unsandboxed commands, a plain process with the same empty environment). The process
gets the source and journal as JSON on stdin, answers as JSON on stdout, and limits itself
(RLIMIT_CPU, RLIMIT_AS) before reading them; the worker kills its process group at the
wall-clock limit. A loop, a huge allocation or an error becomes `Failed`, never the worker's
problem; messages name script lines, never the worker's paths or environment.
"""

from __future__ import annotations

import ast
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workspaces import sandbox

logger = logging.getLogger(__name__)

MAX_SOURCE_BYTES = 8 * 1024
MAX_SOURCE_LINES = 200
WF_NAME = "wf"
WF_API = frozenset({"run_agent", "map_agents", "pipeline", "reduce_agent"})
_VALUE_METHODS = frozenset({
    "append", "extend", "insert", "pop", "index", "count", "sort", "reverse", "copy",
    "items", "keys", "values", "get", "update", "setdefault",
    "join", "split", "rsplit", "splitlines", "strip", "lstrip", "rstrip", "lower", "upper",
    "title", "capitalize", "startswith", "endswith", "replace", "find", "rfind", "partition",
    "isdigit", "isalpha", "isspace",
    "add", "discard", "union", "intersection", "difference",
})  # fmt: skip
_BUILTINS = frozenset({
    "len", "range", "enumerate", "zip", "min", "max", "sum", "sorted", "reversed", "any",
    "all", "abs", "round", "str", "int", "float", "bool", "list", "dict", "tuple", "set",
    "isinstance", "repr", "print",
})  # fmt: skip
_FORBIDDEN_NAMES = frozenset({
    "open", "exec", "eval", "compile", "getattr", "setattr", "delattr", "hasattr", "globals",
    "locals", "vars", "dir", "type", "object", "super", "breakpoint", "input", "help", "exit",
    "quit", "memoryview", "classmethod", "staticmethod", "property",
})  # fmt: skip
# Everything else (Import, ClassDef, Lambda, Try, With, Raise, Delete, Yield, NamedExpr, ...)
# is refused: what is not here is not reasoned about.
_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.arguments, ast.arg, ast.Return,
    ast.Assign, ast.AugAssign, ast.For, ast.While, ast.If, ast.Expr, ast.Pass, ast.Break,
    ast.Continue, ast.Assert, ast.BoolOp, ast.BinOp, ast.UnaryOp, ast.IfExp, ast.Dict,
    ast.Set, ast.List, ast.Tuple, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
    ast.comprehension, ast.Await, ast.Compare, ast.Call, ast.keyword, ast.FormattedValue,
    ast.JoinedStr, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Starred,
    ast.Name, ast.Load, ast.Store, ast.boolop, ast.operator, ast.unaryop, ast.cmpop,
)  # fmt: skip
_REFUSED_RULES: dict[type[ast.AST], str] = {
    ast.Import: "no import",
    ast.ImportFrom: "no import",
    ast.Global: "no global or nonlocal",
    ast.Nonlocal: "no global or nonlocal",
    ast.ClassDef: "no class definitions",
    ast.Lambda: "no lambda",
}


class ScriptRefused(Exception):
    """The script broke `rule`; `message` says where and how."""

    def __init__(self, rule: str, message: str) -> None:
        super().__init__(f"workflow script refused ({rule}): {message}")
        self.rule = rule
        self.message = message


@dataclass(frozen=True, slots=True)
class ScriptLimits:
    cpu_seconds: int = 5
    memory_bytes: int = 256 * 2**20
    wall_seconds: float = 10.0
    max_children: int = 50
    """Children one run may ask for, answered or not."""
    max_output_bytes: int = 1_000_000
    """The JSON of the outcome, as the script process writes it."""


@dataclass(frozen=True, slots=True)
class ChildRequest:
    key: str
    prompt: str
    agent: str


@dataclass(frozen=True, slots=True)
class Spawn:
    """These children have no answer yet: run them, record their answers, run again."""

    requests: list[ChildRequest]


@dataclass(frozen=True, slots=True)
class Done:
    value: Any


@dataclass(frozen=True, slots=True)
class Failed:
    message: str


ScriptOutcome = Spawn | Done | Failed


def check_script(source: str) -> None:
    """Raise ScriptRefused unless `source` is a script this module will run."""
    _checked(source)


def run_script(
    source: str, journal: Mapping[str, Any], *, limits: ScriptLimits = ScriptLimits()
) -> ScriptOutcome:
    """Run `source` from the top against `journal` (child key -> recorded answer), in a
    limited process. A refused script, the script's own error and any limit are `Failed`."""
    try:
        wrap = _checked(source)
    except ScriptRefused as exc:
        return Failed(str(exc))
    request = {
        "source": source,
        "wrap": wrap,
        "journal": dict(journal),
        "cpu_seconds": limits.cpu_seconds,
        "memory_bytes": limits.memory_bytes,
        "max_children": limits.max_children,
        "max_output_bytes": limits.max_output_bytes,
    }
    try:
        payload = json.dumps(request).encode()
    except (TypeError, ValueError) as exc:
        return Failed(f"the journal is not JSON: {exc}")
    try:
        stdout, code = _execute(payload, limits)
    except sandbox.SandboxUnavailable as exc:
        return Failed(str(exc))
    except subprocess.TimeoutExpired:
        return Failed(
            f"the workflow script ran longer than {limits.wall_seconds:g} s and was stopped"
        )
    return _outcome(stdout, code, limits)


# --- the check ----------------------------------------------------------------------------------


def _checked(source: str) -> bool:
    """Check `source`; True when it is a bare body to run inside `async def main(wf):`."""
    if len(source.encode()) > MAX_SOURCE_BYTES or len(source.splitlines()) > MAX_SOURCE_LINES:
        raise ScriptRefused(
            "size limit",
            f"a script is at most {MAX_SOURCE_BYTES} bytes and {MAX_SOURCE_LINES} lines",
        )
    try:
        tree = ast.parse(source, "<workflow>")
    except SyntaxError as exc:
        raise ScriptRefused("valid Python", f"line {exc.lineno}: {exc.msg}") from None
    except (ValueError, MemoryError, RecursionError):  # NUL bytes, or nesting too deep
        raise ScriptRefused("valid Python", "the script cannot be parsed") from None
    for node in ast.walk(tree):
        _check_node(node)
    mains = [s for s in tree.body if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef)]
    mains = [s for s in mains if s.name == "main"]
    if not mains:
        return True
    main = mains[0]
    args = main.args
    plain = [a.arg for a in args.args] == [WF_NAME] and not (
        args.posonlyargs or args.vararg or args.kwonlyargs or args.kwarg or args.defaults
    )
    if not isinstance(main, ast.AsyncFunctionDef) or not plain or len(mains) > 1:
        raise ScriptRefused("entry point", "define main once, as `async def main(wf):`")
    for statement in tree.body:
        if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.Assign) and not (
            isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
        ):
            raise ScriptRefused(
                "entry point",
                f"line {statement.lineno}: beside `async def main(wf):` the top level holds "
                "only functions and assignments; put the work inside main",
            )
    return False


def _check_node(node: ast.AST) -> None:
    line = f"line {getattr(node, 'lineno', '?')}"
    if type(node) in _REFUSED_RULES:
        raise ScriptRefused(_REFUSED_RULES[type(node)], f"{line}: {type(node).__name__}")
    if not isinstance(node, _ALLOWED_NODES):
        raise ScriptRefused(
            "allowed constructs", f"{line}: {type(node).__name__} is not allowed in a workflow"
        )
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.decorator_list:
        raise ScriptRefused("no decorators", f"{line}: {node.name} is decorated")
    for name in _names(node):
        if "__" in name:
            raise ScriptRefused("no dunder names", f"{line}: {name}")
        if name in _FORBIDDEN_NAMES:
            raise ScriptRefused("forbidden builtin", f"{line}: {name} is not available")
    if isinstance(node, ast.Attribute):
        _check_attribute(node, line)


def _names(node: ast.AST) -> list[str]:
    """Every identifier `node` itself introduces or reads (not its children's)."""
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword) and node.arg:
        return [node.arg]
    return []


def _check_attribute(node: ast.Attribute, line: str) -> None:
    rule = "attribute access only on wf's API"
    if not isinstance(node.ctx, ast.Load):
        raise ScriptRefused(rule, f"{line}: attributes cannot be assigned")
    if isinstance(node.value, ast.Name) and node.value.id == WF_NAME:
        if node.attr not in WF_API:
            raise ScriptRefused(
                rule, f"{line}: wf.{node.attr}; wf offers {', '.join(sorted(WF_API))}"
            )
    elif node.attr not in _VALUE_METHODS:
        raise ScriptRefused(
            rule, f"{line}: .{node.attr} (only wf.* and common str/list/dict methods)"
        )


# --- the process --------------------------------------------------------------------------------


def _execute(payload: bytes, limits: ScriptLimits) -> tuple[bytes, int]:
    """The runner's stdout and exit code. Raises TimeoutExpired after killing its group."""
    sandboxed = sandbox.sandbox_status().available
    with tempfile.TemporaryDirectory(prefix="canvas-workflow-") as tmp:
        spec = sandbox.SandboxSpec(
            cwd=Path(tmp),
            writable=(Path(tmp),),
            # The whole environment: fixed hash seed, so set order (and so keys) repeat.
            env={"PYTHONHASHSEED": "0"},
        )
        # -S -s, not -I: -I would ignore PYTHONHASHSEED, and the environment is ours anyway.
        command = [_interpreter(sandboxed), "-S", "-s", "-c", _RUNNER]
        proc = sandbox.popen(
            spec, command,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            stdout, stderr = proc.communicate(payload, timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise
        finally:
            if proc.poll() is None:  # an exception other than the timeout
                _kill_group(proc)
    if proc.returncode != 0 and stderr:
        logger.warning("workflow script process: %s", stderr.decode(errors="replace")[-2000:])
    return stdout, proc.returncode


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # it ended on its own meanwhile
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _interpreter(sandboxed: bool) -> str:
    """This Python, unless the sandbox cannot see it (it shows only /usr): then the system's."""
    own = os.path.realpath(sys.executable)
    if not sandboxed or own.startswith("/usr/"):
        return own
    return "/usr/bin/python3"


def _outcome(stdout: bytes, code: int, limits: ScriptLimits) -> ScriptOutcome:
    try:
        answer = json.loads(stdout) if stdout else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or code != 0:
        return Failed(
            f"the workflow script was stopped (exit {code}): it went over its limits "
            f"({limits.cpu_seconds} s of CPU, {limits.memory_bytes // 2**20} MB of memory)"
        )
    if answer.get("outcome") == "done":
        return Done(answer.get("value"))
    if answer.get("outcome") == "spawn":
        return Spawn([ChildRequest(**r) for r in answer["requests"]])
    return Failed(str(answer.get("message", "the workflow script failed")))


# The script process: stdlib only, run with `python -S -s -c`. It limits itself before it reads
# anything, runs `main(wf)` to its end or to the first unanswered child, and prints one JSON
# object. wf's methods never suspend (they answer or raise _Suspend), so a plain send() drives
# the coroutine: no event loop, nothing scheduled behind the script's back.
_RUNNER = r'''
import ast, hashlib, json, resource, signal, sys

class _Stop(BaseException):
    """Ends the script: out of CPU, a child without an answer, too many children."""

def _cpu(*_):
    raise _Stop("cpu")

def _text(value):
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)

class _Wf:
    __slots__ = ("_journal", "_issued", "_requests", "_max")

    def __init__(self, journal, max_children):
        self._journal, self._issued, self._requests, self._max = journal, 0, [], max_children

    def _ask(self, prompts, agent):
        if not isinstance(agent, str) or not agent:
            raise TypeError("agent must be a non-empty string")
        keys = []
        for prompt in prompts:
            if not isinstance(prompt, str) or not prompt.strip():
                raise TypeError("each prompt must be a non-empty string")
            self._issued += 1
            if self._issued > self._max:
                raise _Stop("too many")
            digest = hashlib.sha256(json.dumps([agent, prompt]).encode()).hexdigest()[:16]
            keys.append(("%d-%s" % (self._issued, digest), prompt))
        missing = [k for k in keys if k[0] not in self._journal]
        if missing:
            self._requests = [{"key": k, "prompt": p, "agent": agent} for k, p in missing]
            raise _Stop("spawn")
        return [self._journal[k] for k, _ in keys]

    async def run_agent(self, prompt, agent="general"):
        return self._ask([prompt], agent)[0]

    async def map_agents(self, prompts, agent="general"):
        return self._ask(list(prompts), agent)

    async def pipeline(self, steps, input, agent="general"):
        value = input
        for step in steps:
            value = await self.run_agent("%s\n\nInput:\n%s" % (step, _text(value)), agent)
        return value

    async def reduce_agent(self, results, prompt, agent="general"):
        return await self.run_agent("%s\n\nResults:\n%s" % (prompt, _text(results)), agent)

def _where(exc):
    line, tb = None, exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<workflow>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return "line %s: " % line if line else ""

def _run(request):
    tree = ast.parse(request["source"], "<workflow>")
    if request["wrap"]:
        shell = ast.parse("async def main(wf):\n    pass")
        shell.body[0].body = tree.body or [ast.Pass()]
        tree = ast.fix_missing_locations(shell)
    names = BUILTIN_NAMES
    builtins = {n: getattr(__builtins__, n) for n in names}
    builtins["print"] = lambda *a, **k: None
    scope = {"__builtins__": builtins}
    exec(compile(tree, "<workflow>", "exec"), scope)
    wf = _Wf(request["journal"], request["max_children"])
    coro = scope["main"](wf)
    try:
        coro.send(None)
    except StopIteration as done:
        return {"outcome": "done", "value": done.value}
    except _Stop as stop:
        if stop.args[0] == "spawn":
            return {"outcome": "spawn", "requests": wf._requests}
        raise
    finally:
        coro.close()
    return {"outcome": "failed", "message": "the script awaited something other than wf.*"}

def _main():
    out = sys.stdout.buffer
    request = {"cpu_seconds": 0, "memory_bytes": 0, "max_children": 0, "max_output_bytes": 2**20}
    try:
        request = json.loads(sys.stdin.buffer.read())
        resource.setrlimit(resource.RLIMIT_CPU, (request["cpu_seconds"], request["cpu_seconds"] + 1))
        resource.setrlimit(resource.RLIMIT_AS, (request["memory_bytes"], request["memory_bytes"]))
        signal.signal(signal.SIGXCPU, _cpu)
        answer = _run(request)
        text = json.dumps(answer, allow_nan=False)
    except _Stop as stop:
        messages = {
            "cpu": "the workflow script used its %ss of CPU time and was stopped" % request["cpu_seconds"],
            "too many": "the workflow asked for more than %d children" % request["max_children"],
        }
        text = json.dumps({"outcome": "failed", "message": messages.get(stop.args[0], "stopped")})
    except MemoryError:
        mb = request["memory_bytes"] // 2**20
        text = json.dumps({"outcome": "failed", "message": "the workflow script went over its memory limit of %d MB" % mb})
    except RecursionError as exc:
        text = json.dumps({"outcome": "failed", "message": _where(exc) + "RecursionError: too deep"})
    except (TypeError, ValueError) as exc:
        if exc.__traceback__ is not None and _where(exc):
            text = json.dumps({"outcome": "failed", "message": _where(exc) + "%s: %s" % (type(exc).__name__, exc)})
        else:  # from json.dumps: the answer itself
            text = json.dumps({"outcome": "failed", "message": "the workflow's result is not JSON: %s" % exc})
    except Exception as exc:
        text = json.dumps({"outcome": "failed", "message": _where(exc) + "%s: %s" % (type(exc).__name__, exc)})
    if len(text) > request["max_output_bytes"]:
        text = json.dumps({"outcome": "failed", "message": "the workflow's result is too large"})
    out.write(text.encode())
    out.flush()

_main()
'''.replace("BUILTIN_NAMES", repr(sorted(_BUILTINS)))
