"""Webhook front door under load: ack latency of signed deliveries, memory under forged bodies.

    python benchmarks/webhook.py [--concurrency 50] [--rounds 10] [--slow 20]

A real ``attune serve`` process, under the limits ``attune serve`` deploys
(``bot/github/http_limits.py``; one worker draining commands), talks to the loopback fake
GitHub of the test suite.

Latency: each round sends ``--concurrency`` signed ``issue_comment`` deliveries at once (each a
new ``/attune help`` comment: verified, validated, written to the inbox with its delivery,
answered 202; the worker replies on the fake meanwhile) and, as the baseline measured on the same
server in the same run at the same concurrency, as many ``GET /healthz`` (the HTTP stack alone).
Rounds alternate, so machine noise hits both alike; the worker answers the queued commands
all along (PyGithub spaces its writes by a second, so it is at work through every round of
both kinds alike). Prints p50 and p99 of each
over all rounds and their ratios; target: ack p99 at most 1.2 x healthz p99. (The median of
the per-round p99 ratios is printed too: with 50 samples a round's p99 is its slowest request,
so it is noisy.)

Memory: ``--concurrency`` concurrent maximal bodies (exactly ``ATTUNE_MAX_BODY_BYTES`` with a
forged signature, sent as fast as the loopback takes them) together with ``--slow`` slow clients
(half dribble their headers, half their body, a byte every 0.5 s), then the server's peak
resident memory (VmHWM); target under 200 MB. Slow clients must be closed at the read deadline,
and a signed delivery sent in the middle of it all must still be acknowledged.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.github.settings import Settings  # noqa: E402
from bot.github.signature import sign  # noqa: E402
from tests.fakegithub import FakeGitHub  # noqa: E402
from tests.github_harness import SECRET, seed_repo, serve_process  # noqa: E402

TARGET_RATIO = 1.2
TARGET_RSS_BYTES = 200 * 1000 * 1000
BODY_CAP = Settings.model_fields["max_body_bytes"].default
READ_DEADLINE_S = Settings.model_fields["read_timeout_s"].default


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _open(url: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = url.removeprefix("http://").split(":")
    return await asyncio.open_connection(host, int(port))


async def one(url: str, request: bytes) -> tuple[float, int]:
    """Seconds from connecting to the end of the response, on a fresh connection (GitHub opens
    one per delivery), and the status. A raw HTTP/1.1 client: a full Python HTTP client costs
    more CPU per request than the server does, and would measure itself on 2 cores."""
    start = time.perf_counter()
    reader, writer = await _open(url)
    try:
        writer.write(request)
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = next(
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        await reader.readexactly(length)
    except (ConnectionError, asyncio.IncompleteReadError):
        status = 0  # closed while we were still sending: the server answered early
    elapsed = time.perf_counter() - start
    writer.close()
    return elapsed, status


def http_request(method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


async def burst(url: str, requests: list[bytes], expect: tuple[int, ...]) -> list[float]:
    answers = await asyncio.gather(*(one(url, r) for r in requests))
    wrong = sorted({status for _, status in answers if status not in expect})
    if wrong:
        raise RuntimeError(f"answered {wrong}, expected {expect}")
    return [seconds for seconds, _ in answers]


def delivery(fake: FakeGitHub, number: int, tag: str) -> bytes:
    body = json.dumps(fake.webhooks.issue_comment(number, "reader", "/attune help")).encode()
    headers = {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": f"bench-{tag}",
        "X-Hub-Signature-256": sign(body, SECRET),
        "Content-Type": "application/json",
    }
    return http_request("POST", "/webhook", headers, body)


def forged(i: int) -> bytes:
    """A maximal body, with a signature that is not the secret's."""
    headers = {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": f"forged-{i}",
        "X-Hub-Signature-256": "sha256=" + "0" * 64,
    }
    return http_request("POST", "/webhook", headers, b"x" * BODY_CAP)


async def slow_client(url: str, i: int) -> float:
    """Seconds until the server closes a client that sends a byte every 0.5 s (its headers,
    or, for odd ``i``, its body after complete headers); 60 if it never does."""
    reader, writer = await _open(url)
    start = time.perf_counter()
    if i % 2:
        head = http_request("POST", "/webhook", {"X-Hub-Signature-256": "sha256=" + "0" * 64})
        writer.write(head.replace(b"Content-Length: 0", f"Content-Length: {BODY_CAP}".encode()))
    else:
        writer.write(b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    try:
        while time.perf_counter() - start < 60:
            writer.write(b"X")
            await writer.drain()
            try:
                if await asyncio.wait_for(reader.read(65536), 0.5) == b"":
                    break
            except TimeoutError:
                continue
    except ConnectionError:
        pass
    writer.close()
    return time.perf_counter() - start


async def attack(
    url: str, count: int, slow: int, probe: bytes
) -> tuple[list[int], list[float], float, int]:
    """Forged maximal bodies and slow clients at once, and a signed delivery in their midst."""
    slow_tasks = [asyncio.create_task(slow_client(url, i)) for i in range(slow)]
    await asyncio.sleep(0.2)
    forged_tasks = [asyncio.create_task(one(url, forged(i))) for i in range(count)]
    await asyncio.sleep(0.05)
    probe_seconds, probe_status = await one(url, probe)
    codes = [status for _, status in await asyncio.gather(*forged_tasks)]
    return codes, list(await asyncio.gather(*slow_tasks)), probe_seconds, probe_status


def peak_rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc status")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--slow", type=int, default=20)
    parser.add_argument("--workers", default="1", help="ATTUNE_WORKERS of the server")
    args = parser.parse_args()

    with FakeGitHub() as fake, tempfile.TemporaryDirectory() as tmp:
        number = seed_repo(fake)
        timed = [sys.executable, str(ROOT / "benchmarks" / "timed_serve.py"), "--port"]
        with serve_process(
            fake, Path(tmp), argv=lambda port: [*timed, str(port)], ATTUNE_WORKERS=args.workers
        ) as (url, pid):
            started_rss = peak_rss_bytes(pid)
            acks: list[list[float]] = []
            health: list[list[float]] = []
            probe = http_request("GET", "/healthz", {})
            asyncio.run(burst(url, [probe] * args.concurrency, (200,)))  # warm both paths up
            warm = [delivery(fake, number, f"warm-{i}") for i in range(args.concurrency)]
            asyncio.run(burst(url, warm, (202,)))
            for r in range(args.rounds):
                health.append(asyncio.run(burst(url, [probe] * args.concurrency, (200,))))
                sent = [delivery(fake, number, f"{r}-{i}") for i in range(args.concurrency)]
                acks.append(asyncio.run(burst(url, sent, (202,))))
            before = peak_rss_bytes(pid)
            codes, slow, probe_s, probe_status = asyncio.run(
                attack(url, args.concurrency, args.slow, delivery(fake, number, "probe"))
            )
            after = peak_rss_bytes(pid)

    pooled_acks = [s for round_ in acks for s in round_]
    pooled_health = [s for round_ in health for s in round_]
    ratios = [percentile(a, 0.99) / percentile(h, 0.99) for a, h in zip(acks, health, strict=True)]
    print(f"{args.rounds} rounds of {args.concurrency} concurrent requests, fresh connections")
    print(f"{'':26}{'p50 ms':>10}{'p99 ms':>10}")
    for name, values in (("signed webhook (202)", pooled_acks), ("healthz", pooled_health)):
        p50, p99 = statistics.median(values), percentile(values, 0.99)
        print(f"{name:26}{p50 * 1000:>10.1f}{p99 * 1000:>10.1f}")
    pooled = percentile(pooled_acks, 0.99) / percentile(pooled_health, 0.99)
    middle = statistics.median(pooled_acks) / statistics.median(pooled_health)
    print(f"p99 ratio webhook/healthz per round (noisy): median {statistics.median(ratios):.2f}")
    verdict = "met" if pooled <= TARGET_RATIO else "MISSED"
    print(
        f"ratio webhook/healthz: p50 {middle:.2f}, p99 {pooled:.2f} "
        f"(p99 target <= {TARGET_RATIO}: {verdict})"
    )
    print(
        f"{args.concurrency} concurrent forged bodies of {BODY_CAP} bytes + {args.slow} slow "
        f"clients: answers {sorted(set(codes))}; slow clients closed after "
        f"{min(slow):.1f}-{max(slow):.1f} s (read deadline {READ_DEADLINE_S:g} s)"
    )
    print(f"signed delivery during the attack: {probe_status} in {probe_s * 1000:.0f} ms")
    verdict = "met" if after < TARGET_RSS_BYTES else "MISSED"
    print(
        f"server peak RSS: {started_rss / 1e6:.0f} MB at start, {before / 1e6:.0f} MB after the "
        f"latency rounds, {after / 1e6:.0f} MB after the attack (target < 200 MB: {verdict})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
