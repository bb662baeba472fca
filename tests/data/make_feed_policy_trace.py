#!/usr/bin/env python3
"""Writes feed_policy_trace.json: a scripted run of the feed policy (python/kpool/feed_policy.py)
with what it decided after each event. tests/test_feed_policy.cpp runs the same events through
the C++ policy (remote/feed_policy.hpp) and test_serve_client.py through the Python one: both
must decide the same, so kpool feed and the Python clients keep one policy. Run it again only
when the policy changes on purpose (then both implementations change with it)."""
import json
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "python"))
from kpool.feed_policy import FeedPolicy  # noqa: E402


def main():
    rng = random.Random(50)
    settings = {"max_in_flight": 24, "initial_window": 2, "tolerance": 1.5}
    policy = FeedPolicy(**settings)
    events, now, in_flight, tickets = [], 0.0, 0, []
    # Phases: a server with 6 kernels (beyond them requests queue), then a 429 burst, then a
    # restart (no connection), then answers without Kpool-Queued-Ms, then a server whose CPU is
    # the limit (no queue: each answer takes longer the more are in flight).
    for step in range(560):
        phase = ("queue" if step < 200 else "refuse" if step < 240 else "down" if step < 260
                 else "silent" if step < 400 else "cpu")
        now += rng.uniform(0.001, 0.05) if phase != "cpu" else 0.02 * max(1, in_flight)
        if policy.may_send(now, in_flight) and rng.random() < 0.6:
            in_flight += 1
            tickets.append(policy.sent(now, in_flight))
            events.append({"op": "sent", "now": now, "in_flight": in_flight, "ticket": tickets[-1]})
        elif tickets:
            ticket = tickets.pop(rng.randrange(len(tickets)))
            in_flight -= 1
            if phase == "refuse" and rng.random() < 0.5:
                retry_after = rng.choice([-1.0, 0.0, 1.0, 5.0])
                at = policy.refused(now, in_flight + 1, retry_after)
                events.append({"op": "refused", "now": now, "in_flight": in_flight + 1,
                               "retry_after": retry_after, "returns": at})
            elif phase == "down" and rng.random() < 0.5:
                events.append({"op": "unreachable", "now": now, "returns": policy.unreachable(now)})
            elif phase == "cpu":
                own = 20.0 * (in_flight + 1) * rng.uniform(0.9, 1.1)
                events.append({"op": "answered", "now": now, "ticket": ticket, "latency": own, "queued": 0.0})
                policy.answered(now, ticket, own, 0.0)
            else:
                own = rng.uniform(40, 60)
                queued = max(0, in_flight + 1 - 6) * own * rng.uniform(0.8, 1.2)
                events.append({"op": "answered", "now": now, "ticket": ticket, "latency": own + queued,
                               "queued": queued if phase != "silent" else -1.0})
                policy.answered(now, ticket, own + queued, events[-1]["queued"])
        else:
            now = max(now, policy.held_until)
            continue
        events[-1]["window"] = policy.window
        events[-1]["held_until"] = policy.held_until
    json.dump({"settings": settings, "events": events}, sys.stdout, indent=0)
    sys.stdout.write("\n")


main()
