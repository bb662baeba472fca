"""Python clients for kpool serve's HTTP door, synchronous and asyncio, under the same feed
policy as `kpool feed` (feed_policy.py): as many requests in flight as the server takes without
queueing them, 429s waited out (their Retry-After), only what never ran sent again.

    import kpool
    with kpool.ServeClient("http://127.0.0.1:8890", token=TOKEN) as c:
        c.exec("6 * 7").result["outputs"]
        c.run("report.ipynb", parameters={"year": 2026}, output="out.ipynb")
        for r in c.map({"id": i, "code": "f(%d)" % i} for i in range(1000)):
            print(r.id, r.status, r.outcome)
        c.stats                                   # kpool feed's statistics of the last map

    async with kpool.AsyncServeClient(url, token=TOKEN) as c:
        async for r in c.map(jobs): ...

HTTP is httpx (Debian's python3-httpx): one library whose sync and async clients have the same
API, so one policy sits under two thin drivers; it pools keep-alive connections, verifies TLS
against a given CA file, and has no total timeout unless asked (a notebook may run for hours).
requests has no asyncio client, aiohttp no synchronous one, and the standard library has no
asyncio HTTP client at all. It is imported when a client is made, so `import kpool` works
without it."""
import asyncio
import concurrent.futures
import os
import ssl
import socket
import time
from typing import Any, AsyncIterator, Dict, Iterable, Iterator, Optional

from .feed import Answer, Feed, Result
from .feed_policy import FeedPolicy

DEFAULT_MAX_IN_FLIGHT = 64
DEFAULT_PATIENCE_S = 120.0


class ServeError(Exception):
    """A request kpool serve did not serve (a status other than 200, or no answer): `result`
    holds what came back (`status` None when nothing did)."""

    def __init__(self, result: Result):
        error = result.error or {}
        super().__init__("%s: %s" % (result.status or error.get("error"), error.get("message", "")))
        self.result = result


def _token(url: str, token: Optional[str], token_file: Optional[str]) -> Optional[str]:
    """The token given, else $KPOOL_SERVE_TOKEN, else the one a kpool serve on this host wrote
    for its port (as `kpool feed` finds it)."""
    if token:
        return token
    if token_file:
        with open(token_file, encoding="utf-8") as f:
            return f.readline().strip()
    if os.environ.get("KPOOL_SERVE_TOKEN"):
        return os.environ["KPOOL_SERVE_TOKEN"]
    from urllib.parse import urlsplit
    from .client import default_runtime_dir
    parts = urlsplit(url)
    if parts.hostname in ("127.0.0.1", "localhost", "::1") and parts.port:
        made = os.path.join(default_runtime_dir(), "serve-%d.token" % parts.port)
        if os.path.exists(made):
            with open(made, encoding="utf-8") as f:
                return f.readline().strip()
    return None


def _failure(e: Exception) -> Answer:
    """An exception of httpx's as an Answer without status: whether the request may have gone
    out (any failure after the connection was made: httpx, unlike libcurl, never sends a request
    again by itself), and whether no request can get through."""
    import httpx
    cause, seen, hopeless = e, set(), False
    while cause is not None and id(cause) not in seen:  # the chain of causes, once each
        seen.add(id(cause))
        hopeless = hopeless or isinstance(cause, (ssl.SSLCertVerificationError, socket.gaierror))
        cause = cause.__cause__ or cause.__context__
    connect = isinstance(e, (httpx.ConnectError, httpx.ConnectTimeout))
    return Answer(0, {}, b"", 0.0, failure="%s: %s" % (type(e).__name__, e),
                  may_have_run=not connect, hopeless=hopeless or isinstance(e, httpx.UnsupportedProtocol))


class _Base:
    def __init__(self, url: Optional[str] = None, token: Optional[str] = None, token_file: Optional[str] = None,
                 cacert: Optional[str] = None, max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
                 patience: float = DEFAULT_PATIENCE_S, http2: bool = False):
        url = (url or os.environ.get("KPOOL_URL") or "").rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise ValueError("kpool serve's URL (http://HOST:PORT or https://...; or $KPOOL_URL), not %r" % url)
        self.url = url
        self.max_in_flight = max_in_flight
        self.patience = patience
        self.stats: Dict[str, Any] = {}
        token = _token(url, token, token_file)
        headers = {"Authorization": "token " + token} if token else {}
        self._client_args = dict(base_url=url, headers=headers, verify=cacert or True,
                                 timeout=_timeout(), limits=_limits(max_in_flight))
        if http2:  # needs python3-h2
            self._client_args["http2"] = True

    def _feed(self, jobs, notebook_back=False) -> Feed:
        return Feed(jobs, FeedPolicy(self.max_in_flight), self.patience, notebook_back)


def _timeout():
    import httpx
    return httpx.Timeout(None, connect=10.0)  # the code's own `timeout` bounds a run, not ours


def _limits(n):
    import httpx
    return httpx.Limits(max_connections=n, max_keepalive_connections=n)


def _exec_job(code, kernel, timeout, cwd, env) -> Dict[str, Any]:
    job = {"code": code}
    job.update({k: v for k, v in (("kernel", kernel), ("timeout", timeout), ("cwd", cwd), ("env", env))
                if v is not None})
    return job


def _run_job(notebook, parameters, output, root, kernel, timeout, cwd, env) -> Dict[str, Any]:
    if (notebook is None) == (root is None):
        raise ValueError("run() takes a notebook (a path or the notebook itself) or root= (one under --root)")
    job: Dict[str, Any] = {"notebook": notebook} if notebook is not None else {"root_notebook": root}
    job.update({k: v for k, v in (("parameters", parameters), ("output", output), ("kernel", kernel),
                                  ("timeout", timeout), ("cwd", cwd), ("env", env)) if v is not None})
    return job


def _only(results) -> Result:
    (r,) = results
    if r.status != 200:
        raise ServeError(r)
    return r


class ServeClient(_Base):
    """kpool serve over HTTP, synchronously; map() keeps requests in flight on threads."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        import httpx
        self._http = httpx.Client(**self._client_args)

    def close(self):
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def exec(self, code: str, kernel=None, timeout=None, cwd=None, env=None) -> Result:
        """Runs `code` on a fresh kernel: the Result's `result` is /v1/exec's answer (outputs,
        status, ename/evalue/traceback when the code raised). ServeError when not served."""
        return _only(list(self._drive(self._feed([_exec_job(code, kernel, timeout, cwd, env)]))))

    def run(self, notebook=None, parameters=None, output=None, root=None, kernel=None, timeout=None, cwd=None,
            env=None) -> Result:
        """Runs a notebook (a local path, or the notebook as a dict; or `root`, a path under the
        server's --root) as papermill would: the Result's `notebook` is the executed one, also
        written to `output` when given. ServeError when not served."""
        job = _run_job(notebook, parameters, output, root, kernel, timeout, cwd, env)
        return _only(list(self._drive(self._feed([job], notebook_back=True))))

    def map(self, jobs: Iterable[Dict[str, Any]]) -> Iterator[Result]:
        """Every job (kpool feed's fields) through the server under the feed policy; Results as
        they come (`index` is the job's place), each job's exactly once. `stats` after."""
        return self._drive(self._feed(jobs))

    def _drive(self, feed: Feed) -> Iterator[Result]:
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.max_in_flight) as pool:
            futures = {}
            try:
                while True:
                    yield from feed.take_ready()
                    while True:
                        nxt = feed.next_request(time.monotonic())
                        if nxt is None:
                            break
                        ticket, request = nxt
                        futures[pool.submit(self._send, request)] = ticket
                    yield from feed.take_ready()
                    if feed.done:
                        break
                    if not futures:  # a retry's or the hold's time to come
                        time.sleep(feed.wait(time.monotonic()))
                        continue
                    finished, _ = concurrent.futures.wait(futures, timeout=feed.wait(time.monotonic()),
                                                          return_when=concurrent.futures.FIRST_COMPLETED)
                    for f in finished:
                        yield from feed.answered(futures.pop(f), f.result(), time.monotonic())
            finally:
                for f in futures:  # the caller stopped iterating: what is in flight is let go
                    f.cancel()
                self.stats = feed.summary(time.monotonic() - started)

    def _send(self, request) -> Answer:
        import httpx
        started = time.monotonic()
        try:
            with self._http.stream("POST", request.target, content=request.body, headers=request.headers) as r:
                body = r.read()
            return Answer(r.status_code, {k.lower(): v for k, v in r.headers.items()}, body,
                          time.monotonic() - started)
        except httpx.HTTPError as e:
            return _failure(e)


class AsyncServeClient(_Base):
    """kpool serve over HTTP, with asyncio: the same methods as coroutines, map() an async
    iterator."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        import httpx
        self._http = httpx.AsyncClient(**self._client_args)

    async def close(self):
        await self._http.aclose()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        await self.close()

    async def exec(self, code: str, kernel=None, timeout=None, cwd=None, env=None) -> Result:
        return _only([r async for r in self._drive(self._feed([_exec_job(code, kernel, timeout, cwd, env)]))])

    async def run(self, notebook=None, parameters=None, output=None, root=None, kernel=None, timeout=None,
                  cwd=None, env=None) -> Result:
        job = _run_job(notebook, parameters, output, root, kernel, timeout, cwd, env)
        return _only([r async for r in self._drive(self._feed([job], notebook_back=True))])

    def map(self, jobs: Iterable[Dict[str, Any]]) -> AsyncIterator[Result]:
        return self._drive(self._feed(jobs))

    async def _drive(self, feed: Feed) -> AsyncIterator[Result]:
        started = time.monotonic()
        tasks: Dict[asyncio.Task, int] = {}
        try:
            while True:
                for r in feed.take_ready():
                    yield r
                while True:
                    nxt = feed.next_request(time.monotonic())
                    if nxt is None:
                        break
                    ticket, request = nxt
                    tasks[asyncio.ensure_future(self._send(request))] = ticket
                for r in feed.take_ready():
                    yield r
                if feed.done:
                    break
                if not tasks:  # a retry's or the hold's time to come
                    await asyncio.sleep(feed.wait(time.monotonic()))
                    continue
                finished, _ = await asyncio.wait(tasks, timeout=feed.wait(time.monotonic()),
                                                 return_when=asyncio.FIRST_COMPLETED)
                for t in finished:
                    for r in feed.answered(tasks.pop(t), t.result(), time.monotonic()):
                        yield r
        finally:
            for t in tasks:
                t.cancel()
            self.stats = feed.summary(time.monotonic() - started)

    async def _send(self, request) -> Answer:
        import httpx
        started = time.monotonic()
        try:
            async with self._http.stream("POST", request.target, content=request.body, headers=request.headers) as r:
                body = await r.aread()
            return Answer(r.status_code, {k.lower(): v for k, v in r.headers.items()}, body,
                          time.monotonic() - started)
        except httpx.HTTPError as e:
            return _failure(e)
