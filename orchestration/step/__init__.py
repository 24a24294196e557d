"""Our own agent's step: the slice runner (runner.SliceRunner), the loop's pure decisions,
the model call through LiteLLM, the history cache, condensation (`condense`, with
`context_size` and `summary_prompt`), run limits and stuck detection. `llm`, `runner` and
`condense` load LiteLLM: workers only; the rest is pure and shared with the services."""
