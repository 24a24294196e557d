"""Bridges to external coding agents over the Agent Client Protocol (issue 14; empty so far)."""
