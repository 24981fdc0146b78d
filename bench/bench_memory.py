"""Experience retrieval: recall@3 on a labelled set, and latency at 10,000 experiences (SQLite, Redis).

The labelled set: 35 task families x 3 near-duplicate experiences (105), each family differing only by
its object (which service, which report, which file ...), and 35 queries, each a paraphrase of one
experience's task (other verbs, other word order) whose label is that one experience; the other two
of its family are the distractors. recall@3 = the share of queries whose experience is in the top 3
(goal >= 0.8, issue 17). Retrieval is the lexical default (BM25, ``bm25s``).

Latency: 10,000 experiences in one scope, retrieved through ``MemoryManager.experiences_for`` (the
version read, BM25 over the cached index, the ``used_at`` write) - p50/p95 over 200 queries, goal
<= 20 ms; ``cold_ms`` is the first retrieval, which builds the index. Baseline in the same run: a naive
retrieval that reads every record from the store and scores them with the same BM25 (``naive_ms``);
``ratio`` = warm / naive.
"""

from __future__ import annotations

import asyncio
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from codeact.engine.memory import LexicalIndex, MemoryBackend, MemoryConfig, MemoryItem, MemoryManager, memory_backend
from codeact.engine.memory.retrieval import clear_cache
from codeact.engine.store import SQLiteStore, Store

GOAL_RECALL = 0.8
GOAL_MS = 20.0
LATENCY_ITEMS = 10_000
LATENCY_QUERIES = 200

# (task template, three objects, the query paraphrase template, the index of the labelled object, lesson)
FAMILIES: list[tuple[str, tuple[str, str, str], str, int, str]] = [
    ("Deploy version 2.4 of the {} service to production", ("checkout-api", "billing-worker", "search-frontend"),
     "roll the {} out to prod again", 1, "devops.deploy_app then devops.get_deployment"),
    ("List the open login requirements of project {}", ("P-123", "P-200", "P-311"),
     "which login reqs are still open in {}?", 0, "devops.get_project_info, filter status == open"),
    ("Sum the March invoices of customer {}", ("ACME", "Globex", "Initech"),
     "how much did {} get invoiced in March", 2, "amounts are strings: float() before sum"),
    ("Plot monthly sales of the {} region as a bar chart", ("EMEA", "APAC", "LATAM"),
     "bar chart of {} sales per month", 0, "matplotlib, save into outputs/"),
    ("Translate the {} release notes into French", ("iOS", "Android", "web"),
     "french version of the {} release notes", 1, "system.parse with an instruction"),
    ("Rotate the API keys of the {} integration", ("Stripe", "Twilio", "SendGrid"),
     "new keys for {}: rotate them", 0, "secrets.rotate then verify with a ping"),
    ("Count the failed logins per user in the {} logs", ("auth", "gateway", "vpn"),
     "per-user failed login count from {} logs", 2, "regex on 'FAILED LOGIN user='"),
    ("Resize the product images of the {} catalogue to 800 pixels", ("shoes", "jackets", "bags"),
     "make the {} catalogue pictures 800px wide", 1, "PIL thumbnail keeps the ratio"),
    ("Find duplicate customer records in the {} CRM export", ("Salesforce", "HubSpot", "Zoho"),
     "dedupe the {} crm customers", 0, "normalise e-mails before grouping"),
    ("Archive the {} logs older than 30 days", ("nginx", "postgres", "kafka"),
     "move {} logs past a month into the archive", 2, "compare mtime with now - 30 days"),
    ("Restart the {} pods that are crash looping", ("payments", "orders", "inventory"),
     "{} pods keep crashing: restart them", 1, "k8s.list_pods(status=CrashLoopBackOff)"),
    ("Export the {} table to a CSV file", ("users", "orders", "refunds"),
     "dump {} into csv", 2, "csv.DictWriter, header from the first row"),
    ("Summarise the customer complaints about {}", ("shipping delays", "billing errors", "app crashes"),
     "what do customers complain about regarding {}", 0, "group by theme, then system.parse"),
    ("Check the SSL certificate expiry of {}", ("shop.example.com", "api.example.com", "mail.example.com"),
     "when does the cert of {} expire", 1, "ssl.get_server_certificate, parse notAfter"),
    ("Compute the churn rate of {} subscribers last quarter", ("premium", "basic", "trial"),
     "last quarter churn for {} subscriptions", 2, "churned / active at the start"),
    ("Merge the {} branch into main and tag the release", ("feature-search", "hotfix-login", "release-3.1"),
     "tag a release after merging {} to main", 0, "git.merge then git.tag"),
    ("Create Jira tickets for the failing {} tests", ("integration", "end-to-end", "performance"),
     "open jira issues for {} test failures", 1, "jira.create_issue per failing test"),
    ("Schedule the weekly {} report for Monday 9:00", ("revenue", "traffic", "support"),
     "every monday at nine: the {} report", 2, "scheduler.add cron '0 9 * * 1'"),
    ("Back up the {} database to S3", ("analytics", "accounts", "catalog"),
     "s3 backup of the {} db", 0, "pg_dump | gzip then s3.upload"),
    ("Scale the {} deployment to 5 replicas", ("frontend", "worker", "scheduler"),
     "five replicas for {}", 1, "k8s.scale(name, 5)"),
    ("Find the slowest SQL queries of the {} service", ("reporting", "checkout", "search"),
     "slow queries in {}: which ones", 2, "pg_stat_statements ordered by mean time"),
    ("Send the onboarding e-mail to the new {} hires", ("engineering", "sales", "marketing"),
     "onboarding mail for {} newcomers", 0, "mail.send with the template id"),
    ("Convert the {} PDF invoices to text", ("January", "February", "March"),
     "extract text from the {} invoice pdfs", 1, "pdfminer per page"),
    ("Detect anomalies in the {} metrics of yesterday", ("CPU", "memory", "latency"),
     "anything unusual in yesterday's {} numbers", 2, "z-score over a 1 h window"),
    ("Update the price of the {} plan to 49 euros", ("starter", "team", "enterprise"),
     "{} plan should cost 49 eur now", 0, "billing.update_plan then verify"),
    ("Look up the weather forecast for {} tomorrow", ("Paris", "Berlin", "Madrid"),
     "tomorrow's forecast in {}", 1, "weather.forecast(city, days=1)"),
    ("Clean the empty rows out of the {} spreadsheet", ("budget", "inventory", "headcount"),
     "drop blank lines from the {} sheet", 2, "skip rows where every cell is empty"),
    ("Compare the {} conversion rate between A and B variants", ("signup", "checkout", "upgrade"),
     "A/B {} conversion: which variant wins", 0, "two-proportion z test"),
    ("Revoke the access of former employee {}", ("jdoe", "asmith", "bwong"),
     "{} left the company: remove access", 1, "iam.list_grants then iam.revoke each"),
    ("Tally the survey answers about {}", ("remote work", "the new office", "the canteen"),
     "results of the survey on {}", 2, "Counter over the answer column"),
    ("Generate a changelog from the commits of {}", ("v2.0", "v2.1", "v3.0"),
     "changelog for {} out of the git history", 0, "git.log between tags, group by prefix"),
    ("Monitor the disk usage of the {} servers", ("build", "database", "cache"),
     "how full are the disks on the {} machines", 1, "df on each host, warn over 80%"),
    ("Book a meeting room for the {} retrospective", ("mobile team", "platform team", "data team"),
     "reserve a room: {} retro", 2, "calendar.free_rooms then calendar.book"),
    ("Validate the {} JSON configuration files", ("staging", "production", "development"),
     "are the {} json configs valid", 0, "json.loads each, report the line of errors"),
    ("Estimate the cloud cost of the {} cluster this month", ("GPU", "batch", "web"),
     "this month's spend on the {} cluster", 1, "billing.usage grouped by cluster tag"),
]  # fmt: skip


def labelled_set() -> tuple[list[MemoryItem], list[tuple[str, str]]]:
    """(experiences, [(query, id of the relevant experience)])."""
    items: list[MemoryItem] = []
    queries: list[tuple[str, str]] = []
    for f, (template, objects, query, label, lesson) in enumerate(FAMILIES):
        for o, obj in enumerate(objects):
            task = template.format(obj)
            item = MemoryItem(
                kind="experience",
                scope="agent:bench",
                id=f"f{f}-o{o}",
                title=task,
                text=f"{task}\n{lesson}",
                data={"task": task, "lesson": lesson, "code": "..."},
            )
            items.append(item)
        queries.append((query.format(objects[label]), f"f{f}-o{label}"))
    return items, queries


def recall_at_3() -> dict[str, Any]:
    """recall@3 of BM25 over the labelled set."""
    items, queries = labelled_set()
    index = LexicalIndex(items)
    hits = 0
    misses = []
    for query, relevant in queries:
        top = [item.id for item, _ in index.search(query, 3)]
        if relevant in top:
            hits += 1
        else:
            misses.append(query)
    recall = hits / len(queries)
    return {
        "experiences": len(items),
        "queries": len(queries),
        "recall_at_3": round(recall, 3),
        "goal": GOAL_RECALL,
        "meets_goal": recall >= GOAL_RECALL,
        "missed": misses,
    }


_WORDS = (
    "deploy service report invoice customer export table chart database backup restart scale query "
    "logs archive translate summarise rotate keys certificate churn tickets schedule weekly email "
    "images resize duplicate records metrics anomalies plan price forecast spreadsheet survey "
    "changelog commits disk usage meeting room config cloud cost cluster pods branch merge release"
).split()


def _synthetic(n: int) -> list[MemoryItem]:
    rng = random.Random(17)
    now = time.time()
    items = []
    for i in range(n):
        words = rng.sample(_WORDS, 8)
        task = f"{' '.join(words[:5])} item-{i}"
        items.append(
            MemoryItem(
                kind="experience",
                scope="agent:latency",
                title=task,
                text=f"{task}\n{' '.join(words[5:])}",
                data={"task": task, "lesson": " ".join(words[5:]), "code": "x = 1"},
                created_at=now - i,
            )
        )
    return items


async def _latency(store: Store) -> dict[str, Any]:
    backend: MemoryBackend = memory_backend(store)
    try:
        items = _synthetic(LATENCY_ITEMS)
        for start in range(0, len(items), 1_000):
            await backend.put(items[start : start + 1_000])
        manager = MemoryManager(backend, MemoryConfig(enabled=True))
        rng = random.Random(3)
        queries = [" ".join(rng.sample(_WORDS, 4)) for _ in range(LATENCY_QUERIES)]
        clear_cache()
        t = time.perf_counter()
        await manager.experiences_for("agent:latency", queries[0])
        cold = (time.perf_counter() - t) * 1000
        timings = []
        for query in queries:
            t = time.perf_counter()
            found = await manager.experiences_for("agent:latency", query)
            timings.append((time.perf_counter() - t) * 1000)
            assert found, query
        naive = []
        for query in queries[:5]:
            t = time.perf_counter()
            LexicalIndex(await backend.items("experience", "agent:latency")).search(query, 3)
            naive.append((time.perf_counter() - t) * 1000)
        p50 = statistics.median(timings)
        p95 = statistics.quantiles(timings, n=20)[-1]
        naive_ms = statistics.median(naive)
        return {
            "experiences": LATENCY_ITEMS,
            "p50_ms": round(p50, 2),
            "p95_ms": round(p95, 2),
            "cold_ms": round(cold, 1),
            "naive_ms": round(naive_ms, 1),
            "ratio": round(p50 / naive_ms, 4),
            "goal_ms": GOAL_MS,
            "meets_goal": p95 <= GOAL_MS,
        }
    finally:
        await backend.close()


async def _all_latencies() -> dict[str, Any]:
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bench.db")
        try:
            results["sqlite"] = await _latency(store)
        finally:
            await store.close()
    url = os.environ.get("CODEACT_TEST_REDIS_URL") or os.environ.get("CODEACT_BENCH_REDIS_URL")
    if url:
        from codeact.engine.store.redis_store import RedisStore

        prefix = f"codeact-bench-memory-{uuid.uuid4().hex[:8]}"
        redis_store = RedisStore(url, prefix=prefix)
        try:
            results["redis"] = await _latency(redis_store)
        finally:
            client = getattr(redis_store, "_client")  # noqa: B009
            keys = [key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)]
            if keys:
                await client.delete(*keys)
            await redis_store.close()
    else:
        results["redis"] = {"skipped": "set CODEACT_TEST_REDIS_URL (make bench starts Redis)"}
    return results


def run() -> dict[str, Any]:
    """recall@3 on the labelled set; retrieval latency at 10,000 experiences on SQLite and Redis."""
    return {"recall": recall_at_3(), "latency": asyncio.run(_all_latencies())}
