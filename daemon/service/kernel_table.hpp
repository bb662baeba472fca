// The daemon's one record per kernel process: the process, the pool it belongs to, and whether
// its client has been given it; after a delivered kernel exits, how it ended (bounded), for poll.
//
// Who decides what: the pool owns a kernel's state (starting, warm, leased, stopping) and its
// lease deadline; this table owns the process and the delivery. "Leased" (the pool) begins when
// an acquire takes the kernel; "delivered" (here) when the acquire's reply went out, after the
// client's cwd/env were applied: only then may the client signal, poll or release it.
#pragma once

#include "daemon/core/pool.hpp"
#include "daemon/process/kernel_process.hpp"

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

namespace kpool::daemon {

class kernel_table {
public:
    // How many exits of delivered kernels poll can still report.
    static constexpr std::size_t remembered_exits = 4096;

    void add(const std::string& id, std::unique_ptr<kernel_process> process, pool& owner);
    // The process, or nullptr.
    kernel_process* process(const std::string& id) const;
    // The pool it belongs to, or nullptr.
    pool* pool_of(const std::string& id) const;

    void mark_delivered(const std::string& id);
    // The process of a kernel its client holds (delivered, not exited), or nullptr.
    kernel_process* delivered(const std::string& id) const;
    // How a delivered kernel ended, if it did and is still remembered.
    std::optional<exit_status> exit_of(const std::string& id) const;

    // The kernel exited: the record goes (with its process: safe from inside the process's own
    // exit callback, which calls the daemon last), a delivered kernel's exit is remembered.
    void remove_exited(const std::string& id, const exit_status& status);

    bool empty() const { return m_records.empty(); }
    void for_each_process(const std::function<void(kernel_process&)>& fn);
    // Drops every process (their groups are killed); for the daemon's teardown.
    void clear() { m_records.clear(); }

private:
    struct record {
        std::unique_ptr<kernel_process> process;
        pool* owner = nullptr;
        bool delivered = false;
    };
    std::unordered_map<std::string, record> m_records;
    std::unordered_map<std::string, exit_status> m_exits;
    std::deque<std::string> m_exit_order; // oldest first, to forget
};

} // namespace kpool::daemon
