"""The feed policy, sans I/O: how many requests a client keeps in flight at kpool serve, when it
holds back, and which answers it sends again. The same rules as kpool's C++ clients
(remote/feed_policy.hpp, whose header explains them; tests/data/feed_policy_trace.json is run
through both). feed.py keeps a feed's books under it; no sockets here: the callers bring the
time and the answers."""
import math

CUT_FACTOR = 0.7        # of what was in flight, at a refusal
MIN_GRADIENT = 0.5      # at most halved by one round
MIN_ROUND = 3           # answers per round at the least
FIRST_BACKOFF_S = 0.1   # after a refused connection, doubling
MAX_BACKOFF_S = 2.0
MIN_GAIN = 0.05         # a growth must raise the rate by this much to stay,
GAIN_SHARE = 0.5        # or by this share of what it would with room for it, if less
QUIET_ROUNDS = 4        # after a growth taken back, rounds before the next

ANSWERED, RETRY, LOST, HOPELESS = "answered", "retry", "lost", "hopeless"


def classify(status: int, error_code: str, may_have_run: bool, hopeless: bool = False) -> str:
    """What becomes of a job after one attempt. `status` 0: no HTTP answer came."""
    if status == 0:
        return LOST if may_have_run else HOPELESS if hopeless else RETRY
    if status == 401:
        return HOPELESS
    if status == 429 or (status == 503 and error_code == "unavailable"):
        return RETRY
    return ANSWERED


class FeedPolicy:
    """remote/feed_policy.hpp's feed_policy, rule for rule (times in seconds, latencies in ms)."""

    def __init__(self, max_in_flight: int = 64, initial_window: int = 2, tolerance: float = 1.5):
        self.max_in_flight = max(1, max_in_flight)
        self.tolerance = tolerance
        self._window = float(min(max(initial_window, 1), self.max_in_flight))
        self._slow_start = True
        self.held_until = 0.0
        self._backoff = 0.0
        self._min_latency = 0.0
        self._tickets = 0
        self._round_first = 0
        self._grown_from = 0.0
        self._rate_before = 0.0
        self._quiet = 0
        self._new_round()

    def _new_round(self):
        self._answers = 0
        self._latency = 0.0
        self._own = 0.0
        self._peak = 0
        self._cut = False

    @property
    def window(self) -> int:
        return max(1, int(self._window))

    def may_send(self, now: float, in_flight: int) -> bool:
        return in_flight < self.window and now >= self.held_until

    def sent(self, now: float, in_flight: int) -> int:
        self._peak = max(self._peak, in_flight)
        ticket = self._tickets
        self._tickets += 1
        return ticket

    def answered(self, now: float, ticket: int, latency_ms: float, queued_ms: float) -> None:
        self._backoff = 0.0
        self.held_until = 0.0
        if ticket < self._round_first:
            return
        self._latency += latency_ms
        if queued_ms >= 0:
            self._own += max(0.0, latency_ms - queued_ms)
        else:
            self._own += min(latency_ms, self._min_latency) if self._min_latency > 0 else latency_ms
        self._answers += 1
        if self._answers >= max(MIN_ROUND, self.window):
            self._end_round()

    def _end_round(self):
        mean = self._latency / self._answers
        self._min_latency = min(self._min_latency, mean) if self._min_latency > 0 else mean
        # Answers a second, by Little's law: what was in flight over how long each took. Counted
        # over the round's clock instead, equal jobs answer in bursts and a round's rate is
        # whichever bursts it happened to span.
        rate = self._peak / max(1e-3, mean)
        self._quiet = max(0, self._quiet - 1)
        if not self._cut and self._latency > 0:
            gradient = min(max(self.tolerance * self._own / self._latency, MIN_GRADIENT), 1.0)
            wanted = 0.0
            if self._grown_from > 0:
                wanted = min(MIN_GAIN, GAIN_SHARE * (self._window / self._grown_from - 1))
            if self._grown_from > 0 and rate < self._rate_before * (1 + wanted):
                self._window = self._grown_from  # the growth bought nothing: taken back
                self._slow_start = False
                self._grown_from = 0.0
                self._quiet = QUIET_ROUNDS
            elif gradient >= 1.0:
                self._grown_from = 0.0
                if self._peak >= math.floor(self._window) and self._quiet == 0:
                    self._grown_from = self._window
                    self._rate_before = rate
                    self._window = self._window * 2 if self._slow_start else self._window + 1
            else:
                self._grown_from = 0.0
                self._slow_start = False
                self._window = max(1.0, min(self._window, self._window * gradient + 1))
            self._window = min(self._window, float(self.max_in_flight))
        self._new_round()
        self._round_first = self._tickets

    def refused(self, now: float, in_flight: int, retry_after_s: float) -> float:
        if not self._cut:
            self._cut = True
            self._slow_start = False
            self._grown_from = 0.0
            self._window = max(1.0, min(self._window, float(in_flight)) * CUT_FACTOR)
        retry_at = now + (retry_after_s if retry_after_s >= 0 else max(FIRST_BACKOFF_S, self._backoff))
        self.held_until = max(self.held_until, retry_at)
        return retry_at

    def unreachable(self, now: float) -> float:
        self._backoff = min(max(self._backoff * 2, FIRST_BACKOFF_S), MAX_BACKOFF_S)
        self.held_until = max(self.held_until, now + self._backoff)
        self._window = max(1.0, self._window / 2)
        self._slow_start = True
        return self.held_until
