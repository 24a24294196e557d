"""The run chain: a run is a chain of short slices, each claimed under a lease, kept alive by
the process's lease keeper, handed over to the next; lost ones are revived by the sweeper.
Knows nothing of how an agent thinks (see slices.agent_for)."""
