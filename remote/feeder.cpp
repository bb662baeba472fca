// The feed loop: a reader thread hands lines over; this thread sends under the policy, retries
// what never ran, and answers every job once.
#include "remote/feeder.hpp"

#include "remote/job_source.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

namespace kpool::remote {
namespace {

using json = nlohmann::json;

constexpr double progress_every_s = 0.5;

struct pending {
    serve_job job;
    unsigned attempts = 0;
    double first_sent = 0;
};

class feeder {
public:
    feeder(const feed_settings& settings, const std::function<void(const job_answer&)>& answered)
        : m_settings(settings), m_answered(answered), m_client(settings.client),
          m_policy(settings.policy) {}

    void read_from(std::shared_ptr<std::istream> input) {
        m_source = read_lines(std::move(input), [this] { m_client.wake(); });
    }
    void take(std::vector<serve_job> jobs) { m_source = made_jobs(std::move(jobs)); }

    feed_result run() {
        const double started = monotonic_seconds();
        double last_progress = 0;
        while (true) {
            const double now = monotonic_seconds();
            if (!m_stopped && m_settings.cancelled && m_settings.cancelled()) {
                m_cancelled = true;
                stop("interrupted (Ctrl-C or SIGTERM)");
            }
            send_what_may_go(now);
            if (m_client.in_flight() == 0 && m_retries.empty() &&
                (m_stopped || m_source->finished())) {
                break;
            }
            double wait = progress_every_s;
            if (!m_retries.empty()) {
                wait = std::min(wait, m_retries.begin()->first - now);
            }
            if (m_policy.held_until() > now) {
                wait = std::min(wait, m_policy.held_until() - now);
            }
            m_client.run_for(static_cast<int>(std::max(0.0, wait) * 1000) + 1);
            if (m_settings.progress && monotonic_seconds() - last_progress >= progress_every_s) {
                last_progress = monotonic_seconds();
                show_progress(last_progress - started);
            }
        }
        if (m_settings.progress) {
            std::fputs("\r\033[K", stderr);
        }
        feed_result out;
        out.stats = m_stats;
        out.window = m_policy.window();
        out.seconds = monotonic_seconds() - started;
        out.stopped_why = m_stopped_why;
        out.cancelled = m_cancelled;
        return out;
    }

private:
    void send_what_may_go(double now) {
        while (!m_stopped && m_policy.may_send(now, m_client.in_flight())) {
            if (!m_retries.empty() && m_retries.begin()->first <= now) {
                pending p = std::move(m_retries.begin()->second);
                m_retries.erase(m_retries.begin());
                send(std::move(p), now);
                continue;
            }
            auto item = m_source->next();
            if (!item) {
                return;
            }
            if (item->job) {
                send(pending{std::move(*item->job), 0, now}, now);
                continue;
            }
            auto job = read_job(item->text, item->line);
            if (!job) {
                answer(with_id_of(item->text, bad_line(item->line, job.err().message)));
                continue;
            }
            send(pending{std::move(*job), 0, now}, now);
        }
    }

    void send(pending p, double now) {
        if (p.attempts == 0) {
            p.first_sent = now;
        } else {
            ++m_stats.retries;
        }
        ++p.attempts;
        ++m_stats.requests;
        http_request request = p.job.request;
        auto shared = std::make_shared<pending>(std::move(p));
        const std::uint64_t ticket = m_policy.sent(now, m_client.in_flight() + 1);
        m_client.send(std::move(request), [this, shared, ticket](http_answer a) {
            on_answer(std::move(*shared), ticket, std::move(a));
        });
        m_stats.peak_in_flight = std::max(m_stats.peak_in_flight, m_client.in_flight());
    }

    void on_answer(pending p, std::uint64_t ticket, http_answer a) {
        const double now = monotonic_seconds();
        m_stats.bytes_sent += a.bytes_sent;
        m_stats.bytes_received += a.bytes_received;
        // An error's body says which (a 503 `unavailable` may go again); a 200's is not read here.
        const json body = a.status >= 400 ? json::parse(a.body, nullptr, false) : json();
        const std::string code = body.is_object() ? body.value("error", "") : "";
        switch (classify(a.status, code, a.may_have_run, a.hopeless)) {
        case verdict::answered:
            ++m_stats.responses[a.status];
            m_stats.latencies_ms.push_back(a.seconds * 1000);
            m_policy.answered(now, ticket, a.seconds * 1000, a.number("kpool-queued-ms"));
            return answer(timed(answer_of(p.job, a, p.attempts), p, now));
        case verdict::hopeless:
            if (a.status != 0) {
                ++m_stats.responses[a.status];
                answer(timed(answer_of(p.job, a, p.attempts), p, now));
                return stop("kpool serve refused the token (" + std::to_string(a.status) +
                            "): " + (body.is_object() ? body.value("message", "") : a.body));
            }
            ++m_stats.no_answer;
            answer(unanswered(p.job, "no_connection", a.failure, p.attempts));
            return stop("no request can reach " + m_settings.client.base_url + ": " + a.failure);
        case verdict::retry: {
            std::string why;
            double retry_at = 0;
            if (a.status != 0) {
                ++m_stats.responses[a.status];
                why = std::to_string(a.status) +
                      (body.is_object() ? ": " + body.value("message", "") : "");
                retry_at = m_policy.refused(now, m_client.in_flight() + 1, a.number("retry-after"));
            } else {
                ++m_stats.no_answer;
                why = a.failure;
                retry_at = m_policy.unreachable(now);
            }
            if (m_stopped) {
                return answer(
                    unanswered(p.job, "not_sent", "not sent again: " + m_stopped_why, p.attempts));
            }
            if (retry_at - p.first_sent > m_settings.patience_s) {
                job_answer gave_up = unanswered(
                    p.job, "gave_up",
                    "not run: no kernel within the patience (" +
                        std::to_string(static_cast<int>(m_settings.patience_s)) + " s, " +
                        std::to_string(p.attempts) + " attempts); the last answer: " + why,
                    p.attempts);
                // 429 or 503: the server was there and had no kernel; none: no server answered.
                gave_up.line["error"]["last_status"] = a.status != 0 ? json(a.status) : json();
                return answer(gave_up);
            }
            m_retries.emplace(retry_at, std::move(p));
            return;
        }
        case verdict::lost:
            ++m_stats.no_answer;
            return answer(unanswered(p.job, "lost",
                                     "the connection was lost while the job ran (" + a.failure +
                                         "): it may have run, so it is not sent again",
                                     p.attempts));
        }
    }

    // A job's time is its caller's: from its first send to its answer, retries included.
    static job_answer timed(job_answer a, const pending& p, double now) {
        a.line["ms"] = std::round((now - p.first_sent) * 1e5) / 100;
        return a;
    }

    void answer(const job_answer& a) {
        ++m_stats.jobs;
        if (a.ok) {
            ++m_stats.ok;
        } else if (a.line.value("status", json()) == 200) {
            ++m_stats.raised;
        } else {
            ++m_stats.failed;
        }
        m_answered(a);
    }

    // No request can get through (a refused token, an untrusted certificate): nothing more goes;
    // what waits is answered, the rest of the input is not read.
    void stop(const std::string& why) {
        if (m_stopped) {
            return;
        }
        m_stopped = true;
        m_stopped_why = why;
        for (auto& [at, p] : m_retries) {
            answer(unanswered(p.job, "not_sent", "not sent: " + why, p.attempts));
        }
        m_retries.clear();
        while (auto item = m_source->next()) {
            if (item->job) {
                answer(unanswered(*item->job, "not_sent", "not sent: " + why, 0));
                continue;
            }
            job_answer skipped = bad_line(item->line, "not sent: " + why);
            skipped.line["error"]["error"] = "not_sent";
            answer(with_id_of(item->text, std::move(skipped)));
        }
    }

    // A line's own id, when it has one, on an answer made without reading it into a job.
    static job_answer with_id_of(const std::string& text, job_answer a) {
        const json parsed = json::parse(text, nullptr, false);
        if (parsed.is_object() && parsed.contains("id")) {
            a.line["id"] = parsed["id"];
        }
        return a;
    }

    void show_progress(double elapsed) {
        const std::string total =
            m_settings.total > 0 ? "/" + std::to_string(m_settings.total) : "";
        const auto throttled = m_stats.responses.count(429) ? m_stats.responses.at(429) : 0;
        std::fprintf(
            stderr,
            "\r\033[K%zu%s done, %zu in flight (window %zu), %.1f/s, %zu x 429, %zu retries",
            m_stats.jobs, total.c_str(), m_client.in_flight(), m_policy.window(),
            elapsed > 0 ? static_cast<double>(m_stats.jobs) / elapsed : 0.0, throttled,
            m_stats.retries);
        std::fflush(stderr);
    }

    const feed_settings& m_settings;
    const std::function<void(const job_answer&)>& m_answered;
    http_client m_client;
    feed_policy m_policy;
    feed_stats m_stats;
    std::multimap<double, pending> m_retries; // by when each may go again
    bool m_stopped = false;
    bool m_cancelled = false;
    std::string m_stopped_why;
    std::unique_ptr<job_source> m_source; // last: a reader's thread wakes m_client
};

} // namespace

feed_result feed(std::shared_ptr<std::istream> input, const feed_settings& settings,
                 const std::function<void(const job_answer&)>& answered) {
    feeder f(settings, answered);
    f.read_from(std::move(input));
    return f.run();
}

feed_result feed(std::vector<serve_job> jobs, const feed_settings& settings,
                 const std::function<void(const job_answer&)>& answered) {
    feeder f(settings, answered);
    f.take(std::move(jobs));
    return f.run();
}

} // namespace kpool::remote
