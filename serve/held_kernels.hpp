// Every kernel kpool serve holds, from the moment it is obtained to its release: one owner for
// what a /v1 call, a spare and a Kernel Gateway kernel all do with one.
// - obtain(order): a ready spare (its lease renewed, which proves it still lives, and the
//   order's cwd/env/history applied, both at once) or a warm kernel from kpoold (cwd/env/history
//   with the acquire), connected and its iopub subscription proven; the waiting, rejected and
//   used metrics; the one refusal type. A spare found dead gives way to a fresh kernel.
// - watch(kernel): on one 1 s tick for all of them, renews a lease that is due (kernel_leases'
//   policy), asks kpoold whether the kernel lives and tells its holder when it is gone.
// Holders keep the kernel (its lease and channels) and the watch; they release it through
// kernel_leases. The lease policy itself lives in serve/kernel_leases.cpp.
#pragma once

#include "loop/uv_timer.hpp"
#include "serve/connected_kernel.hpp"
#include "serve/http_response.hpp"
#include "serve/kernel_leases.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>

namespace kpool::serve {

class request_services;

// What a holder asks obtain() for.
struct kernel_order {
    std::string pool;
    std::string cwd; // empty: the kernel's own
    std::map<std::string, std::string> env;
    bool memory_history = false; // a one-shot run's (protocol/PROTOCOL.md, "history")
    lease_terms lease;
    // How long to wait for a warm kernel: the queue timeout, or 0 (a spare: warm or nothing,
    // never in a request's way).
    std::chrono::milliseconds wait{0};
    // A caller's order: a ready spare first; refused at once when the line in front of it is
    // too long; counted in the waiting, rejected and used metrics; its pool gets spares. A
    // spare's own order is none of these.
    bool for_caller = true;
    bool all_ports = true;          // control and stdin connected too (a gateway kernel's)
    bool needs_kernel_info = false; // the handshake waits for the kernel_info_reply too
};

// Why no kernel came: the answer for the caller (429 with Retry-After, 503, 502, a context
// refusal), made when the refusal was (so a Retry-After counts the line as it is then).
struct refusal {
    http_response answer;
    errc code = errc::unavailable; // kpoold's, when it refused
};

using obtained = std::variant<connected_kernel, refusal>;

// What the tick found: kpoold says the kernel is gone (`reason` its word on why, if any), or
// three polls in a row went unanswered (`daemon_answered` false).
struct kernel_gone {
    std::string reason;
    bool daemon_answered = true;
};

class held_kernels;

// A watched kernel; watching stops when this is destroyed or reset. Move-only.
class kernel_watch {
public:
    kernel_watch() = default;
    kernel_watch(kernel_watch&& other) noexcept;
    kernel_watch& operator=(kernel_watch&& other) noexcept;
    ~kernel_watch();
    kernel_watch(const kernel_watch&) = delete;
    kernel_watch& operator=(const kernel_watch&) = delete;

    void reset();
    explicit operator bool() const { return m_key != 0; }

private:
    friend class held_kernels;
    struct table;
    kernel_watch(std::weak_ptr<table> entries, std::uint64_t key)
        : m_table(std::move(entries)), m_key(key) {}
    std::weak_ptr<table> m_table;
    std::uint64_t m_key = 0;
};

class held_kernels {
public:
    using obtained_fn = std::function<void(obtained)>;
    // Connects our channels to a leased kernel and proves them (the iopub subscription, and the
    // kernel_info_reply when the order needs it); `done` once. A seam for the unit tests.
    using connect_fn =
        std::function<void(const kernel_lease&, const kernel_order&,
                           std::function<void(result<std::unique_ptr<kernel_channels>>)>)>;

    explicit held_kernels(request_services& owner, connect_fn connect = {});
    ~held_kernels();
    held_kernels(const held_kernels&) = delete;
    held_kernels& operator=(const held_kernels&) = delete;

    // `done` once, with the kernel or the refusal.
    void obtain(const kernel_order& order, obtained_fn done);

    struct watch_fns {
        // Each tick on which the kernel counts as gone (a holder that replaces it or lets go
        // of it ends the watch); never after the watch ended.
        std::function<void(const kernel_gone&)> on_gone;
        // Each tick, first: a holder's own check (a call asks whether its caller is still there).
        std::function<void()> on_tick = {};
    };
    // Renews `kernel`'s lease when due (unless `terms` fixed it) and polls it, every tick.
    [[nodiscard]] kernel_watch watch(const kernel_lease& kernel, const lease_terms& terms,
                                     watch_fns fns);
    // After every tick (the spares' top-up).
    void after_tick(std::function<void()> fn) { m_after_tick = std::move(fn); }
    std::size_t watched() const;
    // One tick now (the unit tests; the timer's every second).
    void tick();

private:
    struct obtaining;
    void from_spare(std::shared_ptr<obtaining> o, connected_kernel spare);
    void fresh(std::shared_ptr<obtaining> o);
    void connect(std::shared_ptr<obtaining> o, kernel_lease lease);
    void connect_channels(const kernel_lease& lease, const kernel_order& order,
                          std::function<void(result<std::unique_ptr<kernel_channels>>)> done);
    void refuse(const std::shared_ptr<obtaining>& o, http_response answer,
                errc code = errc::unavailable);

    request_services& m_owner;
    connect_fn m_connect;
    std::shared_ptr<kernel_watch::table> m_watches;
    // Channels whose handshake is under way, owned here so nothing outlives the registry.
    std::map<std::uint64_t, std::unique_ptr<kernel_channels>> m_connecting;
    std::uint64_t m_next_connect = 1;
    std::function<void()> m_after_tick;
    loop::uv_timer m_tick;
};

} // namespace kpool::serve
