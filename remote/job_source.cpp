// The job sources: a vector, and a stream read on a thread of its own.
#include "remote/job_source.hpp"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace kpool::remote {
namespace {

constexpr std::size_t read_ahead = 1024; // lines read before they are needed, at most

// Jobs made by the caller (remote kpool run).
class made_job_list final : public job_source {
public:
    explicit made_job_list(std::vector<serve_job> jobs) : m_jobs(std::move(jobs)) {}
    std::optional<source_item> next() override {
        if (m_at == m_jobs.size()) {
            return std::nullopt;
        }
        source_item item;
        item.line = m_jobs[m_at].line;
        item.job = std::move(m_jobs[m_at++]);
        return item;
    }
    bool finished() const override { return m_at == m_jobs.size(); }

private:
    std::vector<serve_job> m_jobs;
    std::size_t m_at = 0;
};

// Lines from a stream, read on a thread of its own (a pipe may be slow to give them).
class line_reader final : public job_source {
public:
    line_reader(std::shared_ptr<std::istream> in, std::function<void()> wake)
        : m_shared(std::make_shared<shared>()) {
        m_shared->wake = std::move(wake);
        m_shared->in = std::move(in);
        m_thread = std::thread([s = m_shared] {
            std::string text;
            std::size_t number = 0;
            while (std::getline(*s->in, text)) {
                ++number;
                std::unique_lock lock(s->mutex);
                s->room.wait(lock, [&] { return s->lines.size() < read_ahead || s->stop; });
                if (s->stop) {
                    return;
                }
                if (text.find_first_not_of(" \t\r") != std::string::npos) {
                    s->lines.emplace_back(number, std::move(text));
                    s->wake(); // under the lock: a stop (and the client's end) waits for it
                }
            }
            std::lock_guard lock(s->mutex);
            s->ended = true;
            if (!s->stop) {
                s->wake(); // (after a stop the client it wakes may be gone)
            }
        });
    }
    ~line_reader() {
        {
            std::lock_guard lock(m_shared->mutex);
            m_shared->stop = true;
        }
        m_shared->room.notify_all();
        // A reader blocked on a pipe that never ends must not hold the process: it owns its state
        // (the stream too), and the process ends soon after.
        if (finished()) {
            m_thread.join();
        } else {
            m_thread.detach();
        }
    }
    line_reader(const line_reader&) = delete;
    line_reader& operator=(const line_reader&) = delete;

    std::optional<source_item> next() override {
        std::lock_guard lock(m_shared->mutex);
        if (m_shared->lines.empty()) {
            return std::nullopt;
        }
        source_item item;
        item.line = m_shared->lines.front().first;
        item.text = std::move(m_shared->lines.front().second);
        m_shared->lines.pop_front();
        m_shared->room.notify_one();
        return item;
    }
    bool finished() const override {
        std::lock_guard lock(m_shared->mutex);
        return m_shared->ended && m_shared->lines.empty();
    }

private:
    struct shared {
        std::mutex mutex;
        std::condition_variable room;
        std::deque<std::pair<std::size_t, std::string>> lines;
        bool ended = false;
        bool stop = false;
        std::function<void()> wake;
        std::shared_ptr<std::istream> in;
    };
    std::shared_ptr<shared> m_shared;
    std::thread m_thread;
};

} // namespace

std::unique_ptr<job_source> read_lines(std::shared_ptr<std::istream> in,
                                       std::function<void()> wake) {
    return std::make_unique<line_reader>(std::move(in), std::move(wake));
}

std::unique_ptr<job_source> made_jobs(std::vector<serve_job> jobs) {
    return std::make_unique<made_job_list>(std::move(jobs));
}

} // namespace kpool::remote
