WAIT_MS = 60_000
"""How long a page waits for what a server or a worker does. Generous, since these tests check
behaviour, not speed (bench/ measures that): CI runs its lanes two to a core, and there a cold
in-process worker's first model call (LiteLLM's import) has taken more than 30 s."""


def keep_screenshot(page, name: str) -> None:
    """The page as it is now, in /tmp/ui-<name>.png for whoever reads a run; with
    CANVAS_SCREENSHOTS=1 also in docs/screenshots/<name>.png, the one the README links (off in
    CI, so a run never changes the tree)."""
    import os
    import shutil
    from pathlib import Path

    shot = Path(f"/tmp/ui-{name}.png")
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("CANVAS_SCREENSHOTS") == "1":
        docs = Path(__file__).resolve().parents[2] / "docs" / "screenshots" / f"{name}.png"
        docs.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, docs)
