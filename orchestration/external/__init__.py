"""External agents (ACP) as the agent of a conversation's slices: orchestration.chain.slices
plugs `turn.AcpTurn` in where the conversation names an ACP profile."""
