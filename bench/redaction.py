"""What secret redaction costs as a team (or a process's log filter) knows more values.

    .venv/bin/python bench/redaction.py [--quick] [--json out.json]

For 10, 100 and 1,000 values (a third with quotes, & or non-ASCII, which have the most forms):
the time to build the redactor, and the median time to redact a 4 KB text that holds none of
them (the common case) and one that holds one value plainly and base64-encoded. Reports each
as a ratio to the 10-value case: redaction must stay flat as values grow. Needs no database.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from base64 import b64encode
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from conversations.redaction import Redactor  # noqa: E402

SIZES = (10, 100, 1000)


def _values(count: int, rng: random.Random) -> list[tuple[str, str]]:
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    odd = ("'&<é", '"&x', "ü'")
    return [
        (f"SECRET_{i}", "".join(rng.choices(alphabet, k=24)) + (odd[i % 3] if i % 3 == 0 else ""))
        for i in range(count)
    ]


def _median_ms(call, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer repeats.")
    parser.add_argument("--json", type=Path, help="Write the results here.")
    options = parser.parse_args()
    repeat = 20 if options.quick else 200
    rng = random.Random(1)
    filler = "".join(rng.choices("abcdefghij klmnopqrstuvwxyz\n", k=4096))
    results: dict[str, dict[str, float]] = {}
    for size in SIZES:
        values = _values(size, rng)
        started = time.perf_counter()
        redactor = Redactor(values)
        build_ms = (time.perf_counter() - started) * 1000
        secret = values[size // 2][1]
        holding = f"{filler[:2000]} {secret} {b64encode(secret.encode()).decode()} {filler[2000:]}"
        assert secret not in redactor.redact(holding)
        results[str(size)] = {
            "build_ms": build_ms,
            "miss_ms": _median_ms(lambda r=redactor: r.redact(filler), repeat),
            "hit_ms": _median_ms(lambda r=redactor, t=holding: r.redact(t), repeat),
        }
    base = results[str(SIZES[0])]
    for size in SIZES:
        row = results[str(size)]
        print(f"{size:>5} values: build {row['build_ms']:8.1f} ms, "
              f"miss {row['miss_ms']:.3f} ms ({row['miss_ms'] / base['miss_ms']:.1f}x), "
              f"hit {row['hit_ms']:.3f} ms ({row['hit_ms'] / base['hit_ms']:.1f}x)")  # fmt: skip
    if options.json:
        options.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
