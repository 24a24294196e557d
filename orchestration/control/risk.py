"""A pattern analyzer that raises the risk of destructive or exfiltrating tool calls.

Pure: a tool name and its arguments in, findings out. Each rule has a stable id (shown in the
approval card and the API, so people can recognise and discuss it) and a one-line reason. The
effective risk of a call is the higher of the model's own estimate and every finding's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from teams.vocabulary import RiskLevel as Risk


@dataclass(frozen=True, slots=True)
class Finding:
    rule: str
    risk: Risk
    explanation: str


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    risk: Risk
    explanation: str
    matches: Callable[[str, str | None], bool]
    """(command text, workspace root) -> whether the rule fires."""


def _rx(pattern: str) -> Callable[[str, str | None], bool]:
    compiled = re.compile(pattern, re.IGNORECASE | re.MULTILINE)
    return lambda text, _root: compiled.search(text) is not None


_SEP = r"(?:^|[;&|(`]|\$\(|\bthen\b|\bdo\b|\bxargs\b|\bexec\b)\s*"
"""Where a new command can start inside a shell line."""

_RM_RECURSIVE = re.compile(
    _SEP + r"(?:sudo\s+)?rm\s+((?:-[-\w]*\s+)*)([^;&|\n]*)", re.IGNORECASE | re.MULTILINE
)


def _rm_targets(text: str) -> list[str]:
    """Targets of every `rm` that is both recursive and forced."""
    targets: list[str] = []
    for match in _RM_RECURSIVE.finditer(text):
        flags = match.group(1) + " " + match.group(2)
        words = flags.split()
        options = [w for w in words if w.startswith("-")]
        joined = "".join(o.lstrip("-") for o in options if not o.startswith("--"))
        recursive = "r" in joined.lower() or "--recursive" in options
        forced = "f" in joined or "--force" in options
        if recursive and forced:
            targets += [w for w in words if not w.startswith("-")]
    return targets


def _outside(target: str, root: str | None) -> bool:
    cleaned = target.strip("'\"")
    if not cleaned:
        return False
    if cleaned.startswith(("~", "$HOME", "${HOME}", "/*")) or cleaned in {"/", "*", ".*"}:
        return True
    if ".." in PurePosixPath(cleaned).parts:
        return True
    if cleaned.startswith("/"):
        return root is None or not (cleaned == root or cleaned.startswith(root.rstrip("/") + "/"))
    return False


def _rm_outside(text: str, root: str | None) -> bool:
    return any(_outside(t, root) for t in _rm_targets(text))


def _rm_inside(text: str, root: str | None) -> bool:
    targets = _rm_targets(text)
    return bool(targets) and not any(_outside(t, root) for t in targets)


_FETCH = r"\b(?:curl|wget|fetch|http)\b[^|;&\n]*"
_SHELLS = r"(?:sudo\s+)?(?:ba|z|da|k|fi)?sh\b|python[0-9.]*\b|perl\b|ruby\b|node\b"

RULES: tuple[Rule, ...] = (
    Rule("rm-rf-outside", Risk.HIGH,
         "Recursively force-deletes a path outside the workspace (/, ~, .., or absolute).",
         _rm_outside),
    Rule("rm-rf", Risk.MEDIUM,
         "Recursively force-deletes files inside the workspace; nothing asks before it goes.",
         _rm_inside),
    Rule("sudo", Risk.HIGH, "Runs a command as root.", _rx(_SEP + r"sudo\b")),
    Rule("mkfs", Risk.HIGH, "Formats a filesystem, destroying what it held.",
         _rx(r"\bmkfs(?:\.\w+)?\b")),
    Rule("dd-device", Risk.HIGH, "Writes raw bytes onto a device.",
         _rx(r"\bdd\b[^;&|\n]*\bof=/dev/")),
    Rule("pipe-to-shell", Risk.HIGH,
         "Pipes content fetched from the network straight into an interpreter.",
         _rx(_FETCH + r"\|\s*(?:" + _SHELLS + r")")),
    Rule("eval-fetched", Risk.HIGH,
         "Evaluates or executes content fetched from the network.",
         _rx(r"(?:\beval\b|\bexec\b|\bsource\b|(?:^|\s)\.\s|(?:" + _SHELLS + r")\s+-c)\s*"
             r"[\"']?(?:\$\(|`|<\()\s*(?:curl|wget|fetch)\b")),
    Rule("chmod-777-recursive", Risk.HIGH,
         "Makes a whole tree world-writable.",
         _rx(r"\bchmod\s+(?:-\w*R\w*\s+0?777|0?777\s+-\w*R|--recursive\s+0?777)")),
    Rule("ssh-config-write", Risk.HIGH,
         "Touches SSH keys or configuration (~/.ssh), a path to other machines.",
         _rx(r"(?:>>?|\btee\b|\bcp\b|\bmv\b|\bln\b|\bssh-keygen\b)[^;&|\n]*\.ssh/")),
    Rule("package-config-write", Risk.HIGH,
         "Writes package-manager credentials or index settings (.npmrc, pip.conf, .pypirc).",
         _rx(r"(?:>>?|\btee\b|\bcp\b|\bmv\b|\bln\b)[^;&|\n]*(?:\.npmrc|pip\.conf|\.pypirc)\b")),
    Rule("git-hooks-write", Risk.HIGH,
         "Writes git hooks, which run automatically on later git commands.",
         _rx(r"(?:>>?|\btee\b|\bcp\b|\bmv\b|\bln\b|\bchmod\b)[^;&|\n]*\.git/hooks\b")),
    Rule("git-force-push", Risk.HIGH,
         "Force-pushes, rewriting history others may have pulled.",
         _rx(r"\bgit\b[^;&|\n]*\bpush\b[^;&|\n]*(?:\s--force(?:-with-lease)?\b|\s-\w*f\b|\s\+\S)")),
)  # fmt: skip

RULES_BY_ID: Mapping[str, Rule] = {rule.id: rule for rule in RULES}


def rule_explanation(rule_id: str) -> str:
    """The rule's one-line reason; "" for a rule this code does not know (a newer writer's)."""
    rule = RULES_BY_ID.get(rule_id)
    return rule.explanation if rule is not None else ""


_SENSITIVE_PATHS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("ssh-config-write", re.compile(r"(?:^|/)\.ssh(?:/|$)")),
    ("package-config-write", re.compile(r"(?:^|/)(?:\.npmrc|pip\.conf|\.pypirc)$")),
    ("git-hooks-write", re.compile(r"(?:^|/)\.git/hooks(?:/|$)")),
)
_EDITING = {"create", "str_replace", "insert", "undo_edit"}


def analyze(
    tool: str, arguments: Mapping[str, Any], workspace_root: str | None = None
) -> list[Finding]:
    """Every rule the call trips, highest risk first."""
    findings: list[Finding] = []
    if tool == "terminal":
        command = str(arguments.get("command") or "")
        findings = [
            Finding(rule.id, rule.risk, rule.explanation)
            for rule in RULES
            if rule.matches(command, workspace_root)
        ]
    elif tool == "file_editor" and arguments.get("command") in _EDITING:
        path = str(arguments.get("path") or "")
        for rule_id, pattern in _SENSITIVE_PATHS:
            if pattern.search(path):
                rule = RULES_BY_ID[rule_id]
                findings.append(Finding(rule.id, rule.risk, rule.explanation))
    return sorted(findings, key=lambda f: (-f.risk, f.rule))


def effective_risk(model_risk: Risk | None, findings: list[Finding]) -> Risk:
    """The higher of the model's estimate and the analyzer's; unknown counts as MEDIUM."""
    levels = [f.risk for f in findings] + [model_risk or Risk.MEDIUM]
    return max(levels)
