"""Refusing a literal configuration value that holds one of the team's secrets.

Team configurations (an MCP server's `env` and `headers`, an ACP profile's `env`) take each
value either as text or as a reference, `{"secret": "NAME"}`. Text is shown to every member
and kept in the audit log as typed; only a reference keeps the value hidden. So a text value
that holds a secret's value (pasted where the reference belongs) is refused when it is saved,
with a message naming the field and the secret, never the value.

Held means: equal to the value (surrounding whitespace aside), or containing it when the value
is at least MIN_CONTAINED_CHARS long ("Bearer <token>"); a shorter value inside longer text is
too likely a coincidence to refuse a save for. A secret changed later to match an existing
literal is not noticed here (the event log still redacts it wherever it appears).
"""

from __future__ import annotations

from collections.abc import Mapping

from common.errors import Conflict, InvalidInput

from .crypto import SecretDecryptionError
from .models import Team
from .secrets import secret_values_for_team

MIN_CONTAINED_CHARS = 8


def _holds(literal: str, value: str) -> bool:
    if literal.strip() == value.strip():
        return True
    return len(value) >= MIN_CONTAINED_CHARS and value in literal


def literals_hold_no_secret(team: Team, literals: Mapping[str, str], *, what: str) -> None:
    """InvalidInput when one of `literals` (where, as "env TOKEN" -> the text given) holds the
    value of one of the team's secrets; `what` names the configuration ("MCP server"). Reads
    the team's secrets only when there is a literal to check; Conflict when the site's keys
    cannot open them (nothing could be checked)."""
    texts = {where: text for where, text in literals.items() if isinstance(text, str) and text}
    if not texts:
        return
    try:
        values = secret_values_for_team(team.pk)
    except SecretDecryptionError as exc:
        raise Conflict(
            f"the {what}'s literal values cannot be checked against the team's secrets: {exc}."
        ) from None
    for where, text in texts.items():
        for name, value in sorted(values.items()):
            if value and _holds(text, value):
                raise InvalidInput(
                    f"{where} holds the value of the team secret {name}: literal values are "
                    f"shown to every member, so refer to the secret instead "
                    f'({{"secret": "{name}"}}).'
                )
