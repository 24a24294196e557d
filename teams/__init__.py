"""Teams and what admins manage for them: who may do what, with which secrets and limits.

- `models`, `services`, `permissions`, `tokens`: teams, memberships, roles, invitations, API tokens.
- `vocabulary`: the words policies and hooks are written in (risk, confirmation, hook events,
  network); pure, shared with orchestration.
- `secrets` (+ `crypto`): encrypted team secrets; `policies`: effective policy per team;
  `profiles`: model profiles; `hooks`: hook configuration; `notifications`: the team webhook;
  `budget`: monthly spend; `audit`: the audit log; `throttle`: login and token throttling;
  `outbound`: the check every saved outbound URL passes.

Imports none of canvas, orchestration, conversations or workspaces.
"""
