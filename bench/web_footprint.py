"""The production web process: time until it answers, idle memory, and no LiteLLM in it.

Starts `manage.py serve` (uvicorn, production mode given DATABASE_URL and REDIS_URL), times
how long until /login/ and /api/openapi.json answer, makes a few requests, lets it idle, and
reads its resident memory from /proc. Whether the web process imports LiteLLM is checked by
a one-off interpreter with the same environment that imports everything the server serves
(canvas.asgi, canvas.urls, every URL pattern's view, the websocket routes, the OpenAPI
schema) and then looks at sys.modules.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/web_footprint.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as common  # noqa: E402

IDLE_SECONDS = 3.0
WARM_REQUESTS = 20
HEAVY_MODULES = (
    "litellm",
    "openai",
    "tiktoken",
    "orchestration.step.llm",
    "orchestration.step.runner",
    "orchestration.chain.slices",
)

# Runs in a fresh interpreter with the server's environment: everything a request can reach.
IMPORT_CHECK = """
import json, sys
import django
django.setup()
import canvas.asgi, canvas.urls, canvas.routing
from django.urls import URLPattern, URLResolver, get_resolver

def walk(patterns):
    count = 0
    for p in patterns:
        if isinstance(p, URLResolver):
            count += walk(p.url_patterns)
        elif isinstance(p, URLPattern):
            p.callback  # imports the view
            count += 1
    return count

resolver = get_resolver()
count = walk(resolver.url_patterns)
resolver.reverse_dict  # builds every route's reverse entry
for route in canvas.routing.websocket_urlpatterns:
    route.callback
from canvas.api import api
api.get_openapi_schema()
print(json.dumps({"patterns": count, "loaded": [m for m in HEAVY if m in sys.modules]}))
"""


def import_check(env: dict[str, str]) -> dict[str, Any]:
    code = f"HEAVY = {HEAVY_MODULES!r}\n" + IMPORT_CHECK
    done = subprocess.run(
        [common.PYTHON, "-c", code],
        cwd=common.REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    options = common.arg_parser(__doc__.splitlines()[0]).parse_args()
    common.setup_django()
    started = time.monotonic()
    with common.serving("web-server.log") as (base, server):
        ready = time.monotonic() - started
        api_ready = common.wait_http(f"{base}/api/openapi.json", timeout=10, proc=server)
        for _ in range(WARM_REQUESTS):
            for path in ("/login/", "/api/openapi.json"):
                try:
                    with urllib.request.urlopen(base + path, timeout=5) as response:
                        response.read()
                except urllib.error.HTTPError:
                    pass  # any answer exercises the stack
        time.sleep(IDLE_SECONDS)
        rss = common.rss_mb(server.pid)
    check = import_check(common.bench_env())
    result = {
        "ready_s": round(ready, 2),
        "openapi_answered": api_ready is not None,
        "idle_rss_mb": round(rss, 1),
        "import_check": check,
        "litellm_free": "error" not in check and not check.get("loaded"),
        "load_avg": os.getloadavg(),
    }
    print(
        f"web process: ready in {result['ready_s']:.2f} s, idle RSS {result['idle_rss_mb']:.0f} MB, "
        f"LiteLLM-free: {result['litellm_free']} "
        f"({check.get('patterns', '?')} URL patterns; heavy modules loaded: "
        f"{check.get('loaded', check.get('error'))})"
    )
    common.write_results(options.json, result)


if __name__ == "__main__":
    main()
