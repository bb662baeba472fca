"""A feed's bookkeeping, sans I/O: jobs in (kpool feed's fields), requests out, the answers in,
one Result per job out, under the feed policy (feed_policy.py). Shared by ServeClient (threads)
and AsyncServeClient (asyncio) in serve_client.py, which only send and receive."""
import dataclasses
import heapq
import itertools
import json
import math
import os
from typing import Any, Dict, Iterator, List, Optional, Tuple

from .feed_policy import ANSWERED, HOPELESS, RETRY, FeedPolicy, classify

JOB_FIELDS = ("id", "code", "notebook", "root_notebook", "parameters", "output", "kernel", "timeout", "cwd", "env")


@dataclasses.dataclass
class Request:
    """What a driver sends: POST base_url + target with `body` (JSON text)."""
    target: str
    body: bytes
    headers: Dict[str, str]


@dataclasses.dataclass
class Answer:
    """What a driver got back: status 0 when no HTTP answer came (then `failure` says why,
    `may_have_run` whether the request went out, `hopeless` whether no request can get through)."""
    status: int
    headers: Dict[str, str]
    body: bytes
    seconds: float
    failure: str = ""
    may_have_run: bool = False
    hopeless: bool = False


@dataclasses.dataclass
class Result:
    """A job's answer: `status` the HTTP status (None: none came), `outcome` "ok"/"error" (the
    code's, on a 200), `result` the answer's JSON (a 200), `notebook` the executed notebook of a
    run job asked for it, `error` the error body, `attempts` the requests it took."""
    id: Any
    index: int
    status: Optional[int]
    attempts: int
    ms: Optional[float] = None
    outcome: Optional[str] = None
    result: Any = None
    notebook: Optional[dict] = None
    error: Optional[dict] = None
    output: Optional[str] = None  # where the executed notebook was written


    @property
    def ok(self) -> bool:
        return self.status == 200 and self.outcome != "error"


def _request_id(job_id: Any) -> Optional[str]:
    text = str(job_id) if isinstance(job_id, (str, int)) and not isinstance(job_id, bool) else None
    if text and len(text) <= 128 and all(c.isascii() and (c.isalnum() or c in "-_.") for c in text):
        return text
    return None


def build_request(job: Dict[str, Any], notebook_back: bool = False) -> Request:
    """A job (a dict with kpool feed's fields; "notebook" a path or the notebook itself) as the
    request kpool serve takes: a notebook job answers with the executed notebook when it has an
    "output" or `notebook_back`, else with its outputs. ValueError when it is no job."""
    unknown = set(job) - set(JOB_FIELDS)
    if unknown:
        raise ValueError("unknown field %r (fields: %s)" % (sorted(unknown)[0], ", ".join(JOB_FIELDS)))
    kinds = [k for k in ("code", "notebook", "root_notebook") if k in job]
    if len(kinds) != 1:
        raise ValueError('a job has one of "code", "notebook" or "root_notebook"')
    body = {k: job[k] for k in ("kernel", "timeout", "cwd", "env") if k in job}
    if "code" in job:
        if "parameters" in job or "output" in job:
            raise ValueError('"parameters" and "output" go with a notebook, not "code"')
        target, body["code"] = "/v1/exec", job["code"]
    else:
        if "parameters" in job:
            body["parameters"] = job["parameters"]
        if "notebook" in job:
            nb = job["notebook"]
            if not isinstance(nb, dict):
                with open(nb, encoding="utf-8") as f:
                    nb = json.load(f)
            body["notebook"] = nb
            target = "/v1/run"
        else:
            from urllib.parse import quote
            target = "/v1/run/" + quote(job["root_notebook"], safe="/")
        if not notebook_back and "output" not in job:
            target += "?format=outputs"
    headers = {"Content-Type": "application/json"}
    rid = _request_id(job.get("id"))
    if rid:
        headers["X-Request-Id"] = rid
    return Request(target, json.dumps(body).encode(), headers)


def write_notebook(nb: dict, path: str, input_path: Any = None) -> None:
    """Writes an executed notebook as nbformat (and `kpool run`) writes it, papermill's paths
    those of the local files."""
    papermill = nb.get("metadata", {}).get("papermill")
    if isinstance(papermill, dict):
        if isinstance(input_path, str):
            papermill["input_path"] = input_path
        papermill["output_path"] = path
    text = json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    temp = "%s.kpool-%d" % (path, os.getpid())
    with open(temp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(temp, path)  # whole or not at all, as kpool run writes


def _number(headers: Dict[str, str], name: str) -> float:
    try:
        value = float(headers.get(name, ""))
        return value if value >= 0 and math.isfinite(value) else -1
    except ValueError:
        return -1


class Feed:
    """A feed's bookkeeping, sans I/O. The driver asks next_request(now) for what may go,
    calls answered(ticket, answer, now) with what came back and collects the Results it
    returns (each job's exactly once); wait(now) says how long until something may go if no
    answer comes first; done says all jobs are answered. `stats` has kpool feed's names."""

    def __init__(self, jobs, policy: FeedPolicy, patience_s: float = 120.0, want_notebook: bool = False):
        self.policy = policy
        self.patience_s = patience_s
        self.want_notebook = want_notebook
        self._jobs = iter(enumerate(jobs))
        self._exhausted = False
        self._ready: List[Result] = []  # answered without a request (bad jobs)
        self._retries: List[Tuple[float, int, dict]] = []  # (when, seq, pending) heap
        self._seq = itertools.count()
        self._in_flight: Dict[int, dict] = {}
        self.stopped_why = ""
        self.stats = {"jobs": {"total": 0, "ok": 0, "raised": 0, "failed": 0}, "requests": 0, "responses": {},
                      "no_answer": 0, "retries": 0, "bytes": {"sent": 0, "received": 0}}
        self._latencies: List[float] = []
        self.peak_in_flight = 0

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    @property
    def done(self) -> bool:
        return not self._in_flight and not self._retries and not self._ready and (
            self._exhausted or bool(self.stopped_why))

    def take_ready(self) -> List[Result]:
        """Results that came without an answer (bad jobs, a stop)."""
        ready, self._ready = self._ready, []
        for r in ready:
            self._count(r)
        return ready

    def next_request(self, now: float) -> Optional[Tuple[int, Request]]:
        while not self.stopped_why and self.policy.may_send(now, self.in_flight):
            if self._retries and self._retries[0][0] <= now:
                _, _, p = heapq.heappop(self._retries)
                self.stats["retries"] += 1
                return self._send(p, now)
            if self._exhausted:
                return None
            try:
                index, job = next(self._jobs)
            except StopIteration:
                self._exhausted = True
                return None
            try:
                request = build_request(job, self.want_notebook)
            except (ValueError, OSError, TypeError, AttributeError) as e:
                self._ready.append(Result(job.get("id") if isinstance(job, dict) else None, index, None, 0,
                                          error={"error": "bad_job", "message": "job %d: %s" % (index, e)}))
                continue
            return self._send({"index": index, "job": job, "request": request, "attempts": 0, "first": now}, now)
        return None

    def _send(self, p: dict, now: float) -> Tuple[int, Request]:
        p["attempts"] += 1
        self.stats["requests"] += 1
        ticket = self.policy.sent(now, self.in_flight + 1)
        self._in_flight[ticket] = p
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        return ticket, p["request"]

    def wait(self, now: float) -> float:
        """Seconds until a retry or a held request may go (1 s when nothing is scheduled)."""
        due = [1.0]
        if self._retries:
            due.append(self._retries[0][0] - now)
        if self.policy.held_until > now:
            due.append(self.policy.held_until - now)
        return max(0.0, min(due))

    def answered(self, ticket: int, a: Answer, now: float) -> List[Result]:
        p = self._in_flight.pop(ticket)
        self.stats["bytes"]["received"] += len(a.body)
        self.stats["bytes"]["sent"] += len(p["request"].body)
        try:
            body = json.loads(a.body) if a.status and a.body else None
        except ValueError:
            body = None
        code = body.get("error", "") if isinstance(body, dict) else ""
        verdict = classify(a.status, code, a.may_have_run, a.hopeless)
        if a.status:
            key = str(a.status)
            self.stats["responses"][key] = self.stats["responses"].get(key, 0) + 1
        else:
            self.stats["no_answer"] += 1
        out: List[Result] = []
        if verdict == ANSWERED:
            self._latencies.append(a.seconds * 1000)
            self.policy.answered(now, ticket, a.seconds * 1000, _number(a.headers, "kpool-queued-ms"))
            out.append(self._result(p, a, body, now))
        elif verdict == HOPELESS:
            if a.status:
                out.append(self._result(p, a, body, now))
                self._stop("kpool serve refused the token (%d): %s" % (a.status, (body or {}).get("message", "")))
            else:
                out.append(Result(p["job"].get("id"), p["index"], None, p["attempts"],
                                  error={"error": "no_connection", "message": a.failure}))
                self._stop("no request can reach the server: " + a.failure)
        elif verdict == RETRY:
            if a.status:
                retry_at = self.policy.refused(now, self.in_flight + 1, _number(a.headers, "retry-after"))
                why = "%d: %s" % (a.status, (body or {}).get("message", ""))
            else:
                retry_at = self.policy.unreachable(now)
                why = a.failure
            if self.stopped_why:
                out.append(Result(p["job"].get("id"), p["index"], None, p["attempts"],
                                  error={"error": "not_sent", "message": "not sent again: " + self.stopped_why}))
            elif retry_at - p["first"] > self.patience_s:
                out.append(Result(p["job"].get("id"), p["index"], None, p["attempts"], error={
                    "error": "gave_up", "message": "not run: no kernel within the patience (%d s, %d attempts); "
                    "the last answer: %s" % (self.patience_s, p["attempts"], why), "last_status": a.status or None}))
            else:
                heapq.heappush(self._retries, (retry_at, next(self._seq), p))
        else:
            out.append(Result(p["job"].get("id"), p["index"], None, p["attempts"], error={
                "error": "lost", "message": "the connection was lost while the job ran (%s): it may have run, "
                "so it is not sent again" % a.failure}))
        for r in out:
            self._count(r)
        return out + self.take_ready()

    def _result(self, p: dict, a: Answer, body: Any, now: float) -> Result:
        # A job's time is its caller's: from its first send to its answer, retries included.
        r = Result(p["job"].get("id"), p["index"], a.status, p["attempts"], ms=round((now - p["first"]) * 1000, 2),
                   outcome=a.headers.get("kpool-outcome"))
        if a.status == 200 and p["request"].target.startswith("/v1/run") and "format=outputs" not in p["request"].target:
            r.notebook = json.loads(a.body)
        elif a.status == 200:
            r.result = body
        else:
            r.error = body if isinstance(body, dict) else {"error": "http_%d" % a.status,
                                                           "message": a.body[:2000].decode(errors="replace")}
            if "notebook" in r.error:  # a run cut short: the notebook so far
                r.notebook = r.error.pop("notebook")
        output = p["job"].get("output")
        if output and r.notebook is not None:
            write_notebook(r.notebook, output, p["job"].get("notebook"))
            r.output = output
        return r

    def _stop(self, why: str):
        self.stopped_why = why
        while self._retries:
            _, _, p = heapq.heappop(self._retries)
            self._ready.append(Result(p["job"].get("id"), p["index"], None, p["attempts"],
                                      error={"error": "not_sent", "message": "not sent: " + why}))

    def _count(self, r: Result):
        jobs = self.stats["jobs"]
        jobs["total"] += 1
        if r.ok:
            jobs["ok"] += 1
        elif r.status == 200:
            jobs["raised"] += 1
        else:
            jobs["failed"] += 1

    def summary(self, seconds: float) -> Dict[str, Any]:
        """kpool feed's statistics object."""
        s = dict(self.stats, seconds=round(seconds, 2),
                 rate=round(self.stats["jobs"]["total"] / seconds, 2) if seconds > 0 else 0.0)
        lat = sorted(self._latencies)
        if lat:
            def pct(p):
                return lat[min(max(math.ceil(p / 100 * len(lat)), 1), len(lat)) - 1]
            s["latency_ms"] = {"min": round(lat[0], 2), "p50": round(pct(50), 2), "p99": round(pct(99), 2),
                               "max": round(lat[-1], 2)}
        else:
            s["latency_ms"] = None
        s["in_flight"] = {"peak": self.peak_in_flight, "window": self.policy.window}
        return s


def results_in_order(results: Iterator[Result]) -> List[Result]:
    """map()'s results sorted back into the jobs' order."""
    return sorted(results, key=lambda r: r.index)
