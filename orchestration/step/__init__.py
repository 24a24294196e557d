"""Our own agent's step: the slice runner (runner.SliceRunner), the loop's pure decisions,
the model call through LiteLLM, the history cache, run limits and stuck detection. `llm` and
`runner` load LiteLLM: workers only; the rest is pure and shared with the services."""
