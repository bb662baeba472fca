// How a client keeps kpool serve busy without flooding it: how many requests it keeps in flight,
// when it must hold back, and which answers it may send again. One policy for `kpool feed`,
// remote `kpool run`, and the Python clients (python/kpool/feed_policy.py holds the same rules;
// tests/data/feed_policy_trace.json is run through both). Pure: the time is the caller's, in
// seconds on a monotonic clock. docs/feed.md explains the rules and the figures behind them.
//
// The window grows while kpool serve hands a kernel out without a wait and shrinks when requests
// queue for one. Each answer says how long the request waited for its kernel (the
// `Kpool-Queued-Ms` header), so the policy tells the queue in front of the code from the code's
// own time, whatever the jobs cost: for a round of answers (the window's worth), the gradient
// tolerance * own / latency (own = latency - queued, summed over the round) keeps the window
// where the queue is at most (tolerance - 1) of the code's time. Growth doubles until the first
// queue (slow start), then adds one a round, and only when the window was used and the growth
// before it raised the rate of answers (in flight over latency, Little's law) by 5%, or by half
// of what it would with room for it if that is less (else it is taken back: the server's CPU,
// not its queue, is the limit, and more in flight would only be slower). A 429 cuts the
// window to 0.7 of what was in flight (once a round) and holds every new request until an answer
// comes or the Retry-After passes; a connection refused holds them with a backoff of 0.1 s
// doubling to 2 s.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace kpool::remote {

struct policy_settings {
    std::size_t max_in_flight = 256; // --max-in-flight: the window's cap
    std::size_t initial_window = 2;
    double tolerance = 1.5; // latency over the code's own time that counts as no queue
};

// What becomes of a job after one attempt.
enum class verdict {
    answered, // the server's answer is the job's answer (whatever its status)
    retry,    // nothing ran: send it again (429, 503 `unavailable`, no connection made)
    lost,     // no answer, and the request reached the server: it may have run, never resent
    hopeless, // no request can get through (a 401, an untrusted certificate): stop feeding
};

// `status` 0: no HTTP answer came. `error_code`: the JSON body's "error". `may_have_run`: some of
// the request went out on a connection (an answer lost after that may hide a run). `hopeless`:
// the failure is the address's or the certificate's, not the moment's.
verdict classify(int status, std::string_view error_code, bool may_have_run, bool hopeless = false);

class feed_policy {
public:
    explicit feed_policy(policy_settings settings = {});

    // The most requests that may be in flight now.
    std::size_t window() const;
    // Whether one more may go at `now` with `in_flight` out.
    bool may_send(double now, std::size_t in_flight) const;
    // Until when new requests wait (0: they do not).
    double held_until() const { return m_hold_until; }

    // A request went out at `now`; `in_flight` counts it. The ticket goes back with its answer.
    std::uint64_t sent(double now, std::size_t in_flight);
    // An answer that is not a refusal, to the request of `ticket`. `queued_ms` < 0: the server
    // did not say. Only requests sent under the window as it is now count for the next change
    // (those sent before it still show the old window's queue: one change a round trip).
    void answered(double now, std::uint64_t ticket, double latency_ms, double queued_ms);
    // 429, or 503 before any code ran; `in_flight` counts this request; `retry_after_s` < 0:
    // none given. Returns when the job may go again.
    double refused(double now, std::size_t in_flight, double retry_after_s);
    // No connection could be made. Returns when the job may go again.
    double unreachable(double now);

private:
    void end_round();

    policy_settings m_settings;
    double m_window;
    bool m_slow_start = true;
    double m_hold_until = 0;
    double m_backoff_s = 0; // after connections refused; 0 once an answer came
    double m_min_latency =
        0; // ms, the lowest round mean: the code's time when the server does not say
    std::uint64_t m_tickets = 0;     // requests sent
    std::uint64_t m_round_first = 0; // the first ticket the round counts
    double m_grown_from = 0;  // the window before the last growth (0: the last change was none)
    double m_rate_before = 0; // the answers a second of the round that decided that growth
    int m_quiet = 0;          // rounds left without growth, after one was taken back
    // The round under way.
    std::size_t m_round_answers = 0;
    double m_round_latency = 0;
    double m_round_own = 0;
    std::size_t m_round_peak = 0;
    bool m_round_cut = false; // a refusal cut the window this round
};

} // namespace kpool::remote
