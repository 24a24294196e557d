"""agent_fixture.py's agent, plus one command that calls its model over HTTP: `model` POSTs
{"prompt": ...} to $MODEL_URL (through HTTP_PROXY when the sandbox gives one, as every real
agent's HTTP client does) and says the answer, or the refusal it got.

Run as `python tests/acp_bridge/model_agent.py`; the tests of what a team's profile may grant
(test_team_grants.py) point its MODEL_URL at a fake model on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import acp  # noqa: E402
from agent_fixture import FixtureAgent  # noqa: E402


class ModelAgent(FixtureAgent):
    async def _do_model(self, session_id: str, rest: str) -> None:
        answer = await asyncio.to_thread(_ask, os.environ["MODEL_URL"], rest)
        await self._say(session_id, answer)


def _ask(url: str, prompt: str) -> str:
    body = json.dumps({"prompt": prompt}).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return "model: " + response.read().decode()
    except urllib.error.HTTPError as exc:
        return f"refused {exc.code}: {exc.read().decode().strip()}"
    except OSError as exc:
        return f"unreachable: {exc}"


def main(**_: Any) -> None:
    asyncio.run(acp.run_agent(ModelAgent()))


if __name__ == "__main__":
    main()
