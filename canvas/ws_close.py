"""Close codes of our websockets: one vocabulary for every consumer, the page script and the docs.

Codes in 4000-4999 are ours to define (RFC 6455 §7.4.2); each mirrors the HTTP status of the
same refusal. A socket refused during the handshake closes before it is accepted (a browser
sees a failed handshake); one already open gets the code in its close frame.
"""

from enum import IntEnum


class CloseCode(IntEnum):
    BAD_REQUEST = 4400
    """A malformed query string (`after_seq`) or message (`{"resume": N}`)."""
    CREDENTIALS_GONE = 4401
    """The credentials the socket opened with stopped being valid: its API token was revoked,
    expired or deleted; or the user was deactivated, deleted, logged out or changed password."""
    FORBIDDEN_ORIGIN = 4403
    """A browser page of another origin, or no Origin and no bearer token."""
    NOT_FOUND = 4404
    """No such conversation or websocket route, or the user may not (or no longer) see it:
    removed from the team, or the team or conversation deleted."""
    THROTTLED = 4429
    """Too many bad API tokens from this address (teams.throttle); try again later."""
