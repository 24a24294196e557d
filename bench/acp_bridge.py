"""What the ACP bridge costs: per session, per session/update, per permission round trip.

The agent is bench/acp_agent.py (the SDK's agent side, answering as fast as it can). Each
measure runs twice: through the bridge (a whole `AcpTurn` in `run_slice` in this process,
as a worker runs it: the sandbox, the lease, translation, appends, live deltas to Redis; the
next-slice enqueues are captured, not sent) and, as the floor, through the bare SDK client
(`acp.spawn_agent_process`, unsandboxed, a client that drops updates and allows at once).

- session: a turn that sends nothing (`noop`): spawn, initialize, session/new, prompt, end.
- per update: turns of `chunks N` (message chunks, aggregated into one event) and `tools N`
  (a tool call started and completed: two updates, two appended events) against the same
  with a few. Timed from the prompt to the agent's exit (bridge: acp.session appended ->
  acp.turn appended; SDK: session/prompt sent -> the process reaped), since the agent's
  start-up varies by more than the updates cost: per-update ms = (prompt(N) - prompt(few)) /
  (updates(N) - updates(few)).
- permission round trip: `ask K`, K requests in a row, timed by the agent (request sent ->
  answer received): answered at once by the team policy (`acp_auto_allow_kinds` ["edit"]),
  and by a person who answers as soon as the request is in the inbox (a thread here polls
  `pending_actions` every 2 ms and approves "yes").
- warm vs cold: a conversation's next message -> the agent's first update in the log (the
  message's and the first action's `created_at`, `tools 1`), on the agent the last turn kept
  warm (orchestration.external.pool) and on a cold start (the pool closed first, as after a
  worker restart: spawn, initialize, a new session told the transcript). The other measures
  close the kept agent after each turn, outside their timing, so each turn starts cold.
  With `--claude`, the same for Claude Code's ACP adapter (`make acp-agents`) against the
  tests' fake Anthropic API on 127.0.0.1 (its Write granted by the team policy), the first
  update being its tool call; with `--codex`, Codex's ACP adapter against the tests' fake
  Responses API (its shell command granted by the team policy); with `--gemini`, the Gemini
  CLI against the tests' fake Gemini API (likewise; its cold start loads the session only
  past the minute the session began, gemini-cli#28693, else it is told the transcript);
  `--next-only` runs only these.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/acp_bridge.py [--quick] [--json F]
        [--claude] [--codex] [--gemini] [--next-only]
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import statistics
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

import _common as common  # noqa: E402

# This script is named like the bridge's package: take bench/ off the path, so that
# `import acp_bridge` (settings do it) finds the package, whatever PYTHONPATH says.
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != BENCH]
AGENT = BENCH / "acp_agent.py"
PROFILE = "benchagent"
CLAUDE = "claude"
CLAUDE_PROMPT = "Create hello.txt in the workspace."
CODEX = "codex"
GEMINI = "gemini"
GEMINI_COMMAND = "echo bench"
GEMINI_PROMPT = "Run the command."
FEW = 10
INBOX_POLL_SECONDS = 0.002


def profile_env(
    claude_url: str | None = None, codex_url: str | None = None, gemini_url: str | None = None
) -> dict[str, str]:
    profiles: dict[str, Any] = {
        PROFILE: {
            "command": sys.executable,
            "args": [str(AGENT)],
            "readonly": [sys.prefix, sys.base_prefix, str(AGENT.parent)],
        }
    }
    env = {}
    if claude_url is not None:
        from tests.acp_bridge.real_agent import claude_agent, site_profile

        profiles[CLAUDE] = site_profile(claude_agent(claude_url))
    if codex_url is not None:
        from tests.acp_bridge.codex_agent import codex_profile

        profiles[CODEX] = codex_profile(codex_url)
    if gemini_url is not None:
        from tests.acp_bridge.gemini_agent import gemini_profile

        profiles[GEMINI] = gemini_profile(gemini_url)
    if len(profiles) > 1:  # the real agents reach their fake model on the host's loopback
        env["CANVAS_SANDBOX_ALLOW_HOST_NETWORK"] = "true"
    return {"CANVAS_ACP_AGENTS": json.dumps(profiles), **env}


def _report(conversation_id: str) -> dict[str, Any]:
    from conversations import store
    from conversations.events import AgentMessageEvent

    texts = [s.event.text for s in store.load(conversation_id)
             if isinstance(s.event, AgentMessageEvent)]  # fmt: skip
    # Chunks join into one message: the report is the JSON at its end.
    last = texts[-1]
    return json.loads(last[last.rindex("{") :]) if "{" in last else {}


def _prompt_ms(conversation_id: str) -> float:
    """The session opened (acp.session appended) -> the turn's end (acp.turn appended, once
    the agent has exited): the turn without the agent's start-up."""
    from conversations.models import ConversationEvent

    stamps = dict(
        ConversationEvent.objects.filter(
            conversation_id=conversation_id, type__in=["acp.session", "acp.turn"]
        ).values_list("type", "created_at")
    )
    return (stamps["acp.turn"] - stamps["acp.session"]).total_seconds() * 1000


def bridge_turn(owner: Any, team: Any, prompt: str, *, answer: bool = False) -> dict[str, Any]:
    """One turn through the bridge; `answer`: a person approves each request at once."""
    from conversations.models import Conversation
    from orchestration.chain.slices import run_slice
    from orchestration.control import approvals
    from orchestration.services import conversation_create

    stop = threading.Event()
    seen: dict[str, float] = {}
    approved: dict[str, float] = {}

    def person(conversation_id: str) -> None:
        from django.db import connection

        try:
            while not stop.is_set():
                for pending in approvals.pending_actions(conversation_id):
                    if pending.action_id in approved:
                        continue
                    seen[pending.action_id] = time.monotonic()
                    approvals.action_approve(
                        conversation_id=conversation_id, action_id=pending.action_id, by=owner,
                        option_id="yes",
                    )  # fmt: skip
                    approved[pending.action_id] = time.monotonic()
                time.sleep(INBOX_POLL_SECONDS)
        finally:
            connection.close()

    with common.captured_enqueues() as sent:
        conversation = conversation_create(
            owner=owner, team=team.pk, prompt=prompt, model="demo", agent=PROFILE
        )
        conversation_id = str(conversation.pk)
        helper = threading.Thread(target=person, args=(conversation_id,), daemon=True)
        if answer:
            helper.start()
        started = time.perf_counter()
        slices = 0
        while sent and slices < 10:
            assert run_slice(*sent.pop(0)) is None
            slices += 1
        wall_ms = (time.perf_counter() - started) * 1000
        stop.set()
        if answer:
            helper.join(10)
    from orchestration.external import pool

    pool.agent_close(conversation_id)  # each measured turn starts its agent
    status = Conversation.objects.get(pk=conversation_id).status
    return {"wall_ms": wall_ms, "prompt_ms": _prompt_ms(conversation_id), "status": status,
            "report": _report(conversation_id), "seen": list(seen.values()),
            "approved": list(approved.values())}  # fmt: skip


def _first_update_ms(conversation_id: str, after_seq: int) -> float:
    """The message (the first user message after `after_seq`) -> the first action after it."""
    from conversations import store
    from conversations.events import ActionEvent, UserMessageEvent

    stored = store.load(conversation_id, after_seq=after_seq)
    sent = next(s for s in stored if isinstance(s.event, UserMessageEvent))
    first = next(s for s in stored if isinstance(s.event, ActionEvent) and s.seq > sent.seq)
    return (first.created_at - sent.created_at).total_seconds() * 1000


def next_message(owner: Any, team: Any, *, repeat: int, profile: str = PROFILE,
                 prompt: str = "tools 1") -> dict[str, Any]:  # fmt: skip
    """Message -> first agent update, on a warm agent and on a cold start, `repeat` each, in
    one conversation (alternating, so both see the same log length)."""
    from conversations import store
    from conversations.models import Conversation
    from orchestration.chain.slices import run_slice
    from orchestration.external import pool
    from orchestration.services import conversation_create, conversation_post_message

    def run(sent: list) -> None:
        slices = 0
        while sent and slices < 10:
            assert run_slice(*sent.pop(0)) is None
            slices += 1

    measured: dict[str, list[float]] = {"warm": [], "cold": []}
    statuses = set()
    with common.captured_enqueues() as sent:
        conversation = conversation_create(
            owner=owner, team=team.pk, prompt=prompt, model="demo", agent=profile
        )
        conversation_id = str(conversation.pk)
        run(sent)
        for _ in range(repeat):
            for kind in ("warm", "cold"):
                if kind == "cold":
                    pool.agent_close(conversation_id)
                after = store.load(conversation_id)[-1].seq
                conversation_post_message(
                    conversation_id=conversation_id, text=prompt, sender=owner
                )
                run(sent)
                measured[kind].append(_first_update_ms(conversation_id, after))
                statuses.add(Conversation.objects.get(pk=conversation_id).status)
        pool.agent_close(conversation_id)
    return {
        kind: {"median_ms": statistics.median(values), "runs_ms": [round(v, 1) for v in values]}
        for kind, values in measured.items()
    } | {"statuses": sorted(statuses)}


class _BareClient:
    """The SDK's client side with nothing behind it: the floor the bridge adds to."""

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if getattr(update, "session_update", "") == "agent_message_chunk":
            self.last = getattr(update.content, "text", "")

    async def request_permission(self, options: list, session_id: str, tool_call: Any, **kw: Any):
        from acp.schema import AllowedOutcome, RequestPermissionResponse

        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=options[0].option_id)
        )

    def on_connect(self, conn: Any) -> None:
        pass


async def _bare(prompt: str, cwd: Path) -> dict[str, Any]:
    import acp

    client = _BareClient()
    started = time.perf_counter()
    async with acp.spawn_agent_process(
        client, sys.executable, str(AGENT), env={"PATH": "/usr/bin:/bin"}, cwd=cwd,
        transport_kwargs={"limit": 50 * 1024 * 1024},
    ) as (conn, _process):  # fmt: skip
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        session = await conn.new_session(cwd=str(cwd), mcp_servers=[])
        prompted = time.perf_counter()
        await conn.prompt(session_id=session.session_id, prompt=[acp.text_block(prompt)])
    ended = time.perf_counter()  # the agent has exited, as the bridge's acp.turn waits for
    prompt_ms, wall_ms = (ended - prompted) * 1000, (ended - started) * 1000
    return {"wall_ms": wall_ms, "prompt_ms": prompt_ms, "status": "finished",
            "report": json.loads(client.last)}  # fmt: skip


def bare_turn(prompt: str) -> dict[str, Any]:
    cwd = common.scratch_dir() / f"bare-{uuid.uuid4().hex[:8]}"
    cwd.mkdir(parents=True)
    return asyncio.run(_bare(prompt, cwd))


def _median(runs: list[dict[str, Any]], key: str = "wall_ms") -> float:
    return statistics.median(r[key] for r in runs)


def main() -> None:
    parser = common.arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, help="Turns per measure (default 5, quick 2).")
    parser.add_argument("--claude", action="store_true", help="Also Claude Code's adapter.")
    parser.add_argument("--codex", action="store_true", help="Also Codex's adapter.")
    parser.add_argument("--gemini", action="store_true", help="Also the Gemini CLI.")
    parser.add_argument("--next-only", action="store_true", help="Only warm vs cold.")
    options = parser.parse_args()
    quick = options.quick
    repeat = options.repeat or (2 if quick else 5)
    with contextlib.ExitStack() as stack:
        claude_url = codex_url = gemini_url = None
        sys.path.insert(0, str(common.REPO))
        if options.claude:
            from tests.acp_bridge.fake_anthropic import FakeAnthropic

            target = common.scratch_dir() / "claude-target.txt"
            claude_url = stack.enter_context(FakeAnthropic(target, "hello\n")).base_url
        if options.codex:
            from tests.acp_bridge.fake_openai_responses import COMMAND, FakeResponses

            codex_url = stack.enter_context(FakeResponses(COMMAND)).base_url
        if options.gemini:
            from tests.acp_bridge.fake_gemini import FakeGemini

            gemini_url = stack.enter_context(FakeGemini(GEMINI_COMMAND)).address
        common.setup_django(profile_env(claude_url, codex_url, gemini_url))
        measure(options, quick=quick, repeat=repeat)


def measure(options: Any, *, quick: bool, repeat: int) -> None:
    from django.contrib.auth import get_user_model

    from teams.policies import policy_update
    from teams.services import team_create

    chunks, tools, asks = (300, 50, 5) if quick else (3000, 300, 20)
    name = f"bench-acp-{uuid.uuid4().hex[:8]}"  # the bench database outlives a run
    owner = get_user_model().objects.create_user(name)
    asks_team = team_create(user=owner, name=f"{name} asks")
    auto_team = team_create(user=owner, name=f"{name} auto-allows edits")
    policy_update(by=owner, team=auto_team, acp_auto_allow_kinds=["edit"])
    if options.next_only:
        results: dict[str, Any] = {"repeat": repeat}
        next_messages(results, owner, auto_team, options, repeat=repeat)
        common.write_results(options.json, results)
        return

    cases: dict[str, tuple[str, int]] = {
        # label: (prompt, session/update notifications it sends, less the report)
        "noop": ("noop", 0),
        "chunks few": (f"chunks {FEW}", FEW),
        f"chunks {chunks}": (f"chunks {chunks}", chunks),
        "tools few": (f"tools {FEW // 2}", FEW),
        f"tools {tools}": (f"tools {tools}", 2 * tools),
    }
    results = {"repeat": repeat, "bridge": {}, "bare": {}}
    bridge_turn(owner, asks_team, "noop")  # warm: imports, first connections
    bare_turn("noop")
    for label, (prompt, updates) in cases.items():
        for side, turn in (("bridge", lambda p: bridge_turn(owner, asks_team, p)),
                           ("bare", bare_turn)):  # fmt: skip
            runs = [turn(prompt) for _ in range(repeat)]
            results[side][label] = {
                "updates": updates, "median_ms": _median(runs),
                "prompt_median_ms": _median(runs, "prompt_ms"),
                "walls_ms": [round(r["wall_ms"], 1) for r in runs],
                "statuses": sorted({r["status"] for r in runs}),
                "agent_send_ms": statistics.median(r["report"]["send_ms"] for r in runs),
            }  # fmt: skip
    for side in ("bridge", "bare"):
        measured = results[side]
        for kind, many in (("chunks", chunks), ("tools", tools)):
            few, big = measured[f"{kind} few"], measured[f"{kind} {many}"]
            more = big["updates"] - few["updates"]
            measured[f"{kind} per update ms"] = (
                big["prompt_median_ms"] - few["prompt_median_ms"]
            ) / more
            measured[f"{kind} ratio"] = big["prompt_median_ms"] / few["prompt_median_ms"]
            measured[f"{kind} turn ratio"] = big["median_ms"] / few["median_ms"]

    permission: dict[str, Any] = {}
    for label, turn in (
        ("policy", lambda: bridge_turn(owner, auto_team, f"ask {asks}")),
        ("person", lambda: bridge_turn(owner, asks_team, f"ask {asks}", answer=True)),
        ("bare", lambda: bare_turn(f"ask {asks}")),
    ):
        runs = [turn() for _ in range(max(1, repeat // 2))]
        rtts = [ms for r in runs for ms in r["report"]["rtt_ms"]]
        entry = {
            "requests": len(rtts), "median_ms": statistics.median(rtts),
            "p95_ms": common.percentile(rtts, 95), "max_ms": max(rtts),
            "statuses": sorted({r["status"] for r in runs}),
            "chosen": sorted({c for r in runs for c in r["report"]["chosen"]}),
        }  # fmt: skip
        if label == "person":
            # Where a round trip goes: the request reaches the inbox, a person answers, the
            # waiting turn reads the decision back (orchestration.external.permissions polls).
            asked = [a for r in runs for a in r["report"]["asked"]]
            answered = [a for r in runs for a in r["report"]["answered"]]
            seen = [s for r in runs for s in r["seen"]]
            approved = [a for r in runs for a in r["approved"]]
            if len(seen) == len(asked):
                entry["to_inbox_median_ms"] = statistics.median(
                    (s - a) * 1000 for a, s in zip(asked, seen, strict=True)
                )
                entry["approve_median_ms"] = statistics.median(
                    (d - s) * 1000 for s, d in zip(seen, approved, strict=True)
                )
                entry["decision_to_agent_median_ms"] = statistics.median(
                    (b - d) * 1000 for d, b in zip(approved, answered, strict=True)
                )
        permission[label] = entry
    results["permission"] = permission
    next_messages(results, owner, auto_team, options, repeat=repeat)
    measures = [*results["bridge"].values(), *results["bare"].values(), *permission.values()]
    results["all_finished"] = all(
        m["statuses"] == ["finished"] for m in measures if isinstance(m, dict)
    ) and all(m["statuses"] == ["finished"] for m in results["next_message"].values())

    for side in ("bridge", "bare"):
        print(f"\n{side}: medians of {repeat} turns, ms: whole turn / prompt -> agent exited")
        for label in cases:
            m = results[side][label]
            print(f"  {label:<12} {m['median_ms']:8.1f} / {m['prompt_median_ms']:8.1f}  (agent "
                  f"sends in {m['agent_send_ms']:.1f} ms; {m['statuses']})")  # fmt: skip
        for kind in ("chunks", "tools"):
            r = results[side]
            print(f"  {kind}: {r[f'{kind} per update ms']:.3f} ms/update; the many / the few: "
                  f"prompt {r[f'{kind} ratio']:.2f}x, turn {r[f'{kind} turn ratio']:.2f}x")  # fmt: skip
    print("\npermission round trip (agent's request -> its answer), ms")
    for label, entry in permission.items():
        extra = "".join(f", {k} {v:.1f}" for k, v in entry.items() if k.endswith("median_ms")
                        and k != "median_ms")  # fmt: skip
        print(f"  {label:<7} median {entry['median_ms']:.1f}, p95 {entry['p95_ms']:.1f} "
              f"({entry['requests']} requests; {entry['statuses']}){extra}")  # fmt: skip
    common.write_results(options.json, results)


def next_messages(results: dict, owner: Any, team: Any, options: Any, *, repeat: int) -> None:
    """Warm vs cold, per agent, into `results["next_message"]`, and printed."""
    from teams.policies import policy_update

    measured = {PROFILE: next_message(owner, team, repeat=repeat)}
    if options.claude:
        policy_update(by=owner, team=team, network="host")
        measured[CLAUDE] = next_message(
            owner, team, repeat=repeat, profile=CLAUDE, prompt=CLAUDE_PROMPT
        )
    if options.codex:
        from tests.acp_bridge.fake_openai_responses import PROMPT

        policy_update(by=owner, team=team, network="host", acp_auto_allow_kinds=["execute"])
        measured[CODEX] = next_message(owner, team, repeat=repeat, profile=CODEX, prompt=PROMPT)
    if options.gemini:
        policy_update(by=owner, team=team, network="host", acp_auto_allow_kinds=["execute"])
        measured[GEMINI] = next_message(
            owner, team, repeat=repeat, profile=GEMINI, prompt=GEMINI_PROMPT
        )
    results["next_message"] = measured
    print("\nmessage -> the agent's first update in the log (its first tool call), ms")
    for agent, entry in measured.items():
        for kind in ("warm", "cold"):
            print(f"  {agent:<10} {kind:<5} median {entry[kind]['median_ms']:8.1f}  "
                  f"{entry[kind]['runs_ms']} {entry['statuses']}")  # fmt: skip


if __name__ == "__main__":
    main()
