"""Where an agent's commands run and its files live.

- `base`: the Workspace protocol; `local`: a directory per conversation on the worker's host,
  commands through the sandbox; `docker`: a container per conversation (docker exec), the
  directory bind-mounted; `paths`: per-team roots and path confinement.
- `fs`: the one door for host reads and writes inside a workspace (by directory handle, links
  never followed); `fs_tree`: walking, sizing and copying a tree the same way; `browse`:
  listing and reading files for people and prompts, on top of `fs`.
- `baseline`: the git baseline taken before the agent's first command, and what changed
  since (changes, diffs, archive), fed by `staging`'s by-handle walk, never by `git add`.
- `sandbox`: the one launcher every command goes through (bubblewrap: namespaces, a clean
  environment, the workspace the only writable place, network none or host); `mounts`:
  what a sandbox may see (the site's choice) and where a command is found in it.

Imports none of the other apps.
"""
