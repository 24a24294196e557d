"""Conversations as event logs: what happened, in order, and nothing else.

- `events`: the typed, frozen event classes and their vocabulary (Status, Decision); pure.
- `store` (+ `store_base`, `store_postgres`): the one door into the log: append under a lease,
  load; redaction of team secrets at that door (`redaction`, `secret_forms`).
- `projections` (RunState) and `view` (what the model reads, condensations applied): derived
  from events; pure. `cuts`: where a condensation may cut the View; pure.
- `selectors`: read queries; `broadcast`: the hint that new events exist (websockets).
- `models`: Conversation (the run's row: status, lease, slice) and ConversationEvent.

Imports none of canvas, orchestration, teams or workspaces; they import it.
"""
