WAIT_MS = 60_000
"""How long a page waits for what a server or a worker does. Generous, since these tests check
behaviour, not speed (bench/ measures that): CI runs its lanes two to a core, and there a cold
in-process worker's first model call (LiteLLM's import) has taken more than 30 s."""
