"""Sub-agents: children as durable conversations, and the workflow script that drives them."""
