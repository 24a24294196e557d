"""What people and policy say about a step: approvals and confirmation, the risk analyzer,
team hooks and where the runner asks them, UserPromptSubmit checks, team notifications, and
the redaction of what leaves for the outside."""
