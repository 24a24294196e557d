"""Skills: instructions an agent loads when a task needs them.

A skill is a folder with a SKILL.md (YAML front matter: name, description, triggers; the body
is the instructions): the workspace's `.agents/skills/*/SKILL.md`, and the team's own, which
its admins write (models.TeamSkill, services). catalog.py merges them (the team's first: a
repository cannot redefine a skill its team's admins wrote); the agent sees their names and
descriptions in the `invoke_skill` tool's schema and loads one by calling it
(orchestration/tools/invoke_skill.py), or a trigger word in a user's message loads it
(triggers.py).
"""
