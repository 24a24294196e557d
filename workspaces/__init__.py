"""Where an agent's commands run and its files live.

- `base`: the Workspace protocol; `local`: a directory per conversation on the worker's host,
  commands through the sandbox; `docker`: a container per conversation (docker exec), the
  directory bind-mounted; `paths`: per-team roots and path confinement.
- `baseline`: the git baseline taken before the agent's first command, and what changed
  since (changes, diffs, archive); `browse`: listing and reading files from outside, confined.
- `sandbox`: the one launcher every command goes through (bubblewrap: namespaces, a clean
  environment, the workspace the only writable place, network none or host).

Imports none of the other apps.
"""
