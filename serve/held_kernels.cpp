// held_kernels: obtain (spare or fresh, prepared), and the one tick that renews and polls.
#include "serve/held_kernels.hpp"

#include "loop/logging.hpp"
#include "protocol/control_replies.hpp"
#include "serve/deadlines.hpp"
#include "serve/request_services.hpp"
#include "serve/spare_kernels.hpp"

#include <vector>

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {
constexpr auto tick_every = 1000ms; // a third of the shortest holder lease (3 s) at most
} // namespace

// ---- kernel_watch

struct kernel_watch::table {
    struct entry {
        kernel_lease kernel;
        lease_terms terms;
        lease_watch watch;
        held_kernels::watch_fns fns;
    };
    std::map<std::uint64_t, entry> entries;
    std::uint64_t next = 1;
};

kernel_watch::kernel_watch(kernel_watch&& other) noexcept
    : m_table(std::move(other.m_table)), m_key(other.m_key) {
    other.m_key = 0;
}

kernel_watch& kernel_watch::operator=(kernel_watch&& other) noexcept {
    if (this != &other) {
        reset();
        m_table = std::move(other.m_table);
        m_key = other.m_key;
        other.m_key = 0;
    }
    return *this;
}

kernel_watch::~kernel_watch() { reset(); }

void kernel_watch::reset() {
    if (auto t = m_table.lock(); t && m_key != 0) {
        t->entries.erase(m_key);
    }
    m_table.reset();
    m_key = 0;
}

// ---- obtain

// One obtain under way. Its steps (a spare's renew and context, in any order) join here: the
// one that finds nothing left to wait for ends it; `done` is called once.
struct held_kernels::obtaining {
    kernel_order order;
    obtained_fn done;
    int steps_left = 0;
    bool spare_gone = false;
    std::optional<http_response> failed;
    connected_kernel kernel;

    void finish(obtained outcome) {
        auto call = std::move(done);
        done = nullptr;
        if (call) {
            call(std::move(outcome));
        }
    }
};

held_kernels::held_kernels(request_services& owner, connect_fn connect)
    : m_owner(owner), m_connect(std::move(connect)),
      m_watches(std::make_shared<kernel_watch::table>()), m_tick(owner.loop()) {
    if (!m_connect) {
        m_connect = [this](const kernel_lease& lease, const kernel_order& order, auto done) {
            connect_channels(lease, order, std::move(done));
        };
    }
    m_tick.start(
        tick_every, [this] { tick(); }, tick_every);
    m_tick.unref();
}

held_kernels::~held_kernels() = default;

void held_kernels::obtain(const kernel_order& order, obtained_fn done) {
    auto o = std::make_shared<obtaining>();
    o->order = order;
    o->done = std::move(done);
    if (order.for_caller) {
        if (auto spare = m_owner.spares().take(order)) {
            return from_spare(std::move(o), std::move(*spare));
        }
    }
    fresh(std::move(o));
}

void held_kernels::from_spare(std::shared_ptr<obtaining> o, connected_kernel spare) {
    // The renew makes the lease the holder's and proves the spare still lives (it may have died,
    // alone or with its daemon, since its last poll); the context goes through kpoold's context
    // op beside it. The holder's code waits for both: a forked kernel applies the context on its
    // control thread, which nothing orders before a cell sent on shell. A spare prepared with
    // the order's cwd and history still sends the context: kpoold, on the kernel's host, checks
    // that the kernel is in that very directory (one removed and made again is entered again)
    // and answers at once when it is, so it costs the round trip the renew costs anyway.
    const kernel_order& order = o->order;
    const bool context = !order.cwd.empty() || !order.env.empty() || order.memory_history;
    o->steps_left = context ? 2 : 1; // counted before either request goes out
    o->kernel = std::move(spare);
    const kernel_lease lease = o->kernel.lease;
    auto step_done = [this, o] {
        if (--o->steps_left > 0) {
            return;
        }
        if (o->spare_gone || o->failed) {
            m_owner.leases().release(o->kernel.lease);
            m_owner.retire(std::move(o->kernel.channels));
        }
        if (o->spare_gone) {
            loop::logger("serve")->info("spare kernel {} is gone: a fresh one instead",
                                        o->kernel.lease.kernel_id);
            o->spare_gone = false;
            o->failed.reset();
            return fresh(o);
        }
        if (o->failed) {
            return refuse(o, std::move(*o->failed));
        }
        m_owner.metrics().kernels_used().Increment();
        o->finish(std::move(o->kernel));
    };
    m_owner.leases().renew(lease, m_owner.leases().lease_s(order.lease), [o, step_done](bool held) {
        o->spare_gone = !held;
        step_done();
    });
    if (!context) {
        return;
    }
    m_owner.leases().apply_context(
        lease, order.cwd, order.env, order.memory_history,
        [o, step_done](std::optional<http_response> failure, bool kernel_gone) {
            // A kernel that died since its last poll is the renew's to find: a fresh one then.
            if (failure && !kernel_gone) {
                o->failed = std::move(failure);
            }
            step_done();
        });
}

void held_kernels::fresh(std::shared_ptr<obtaining> o) {
    const kernel_order& order = o->order;
    if (order.for_caller) {
        if (const auto turn = m_owner.refusal_at_once(order.pool)) {
            return refuse(
                o, overloaded_response("requests already wait for a kernel of pool " + order.pool +
                                           " and this one would wait past the queue timeout: come "
                                           "back in " +
                                           std::to_string(*turn) + " s",
                                       *turn));
        }
        m_owner.metrics().waiting().Increment();
    }
    protocol::acquire_args request;
    request.pool = order.pool;
    request.timeout_ms = order.wait.count();
    request.lease_s = m_owner.leases().lease_s(order.lease);
    // The cwd, env and history go with the acquire: kpoold applies them in one message to the
    // kernel before it replies (a context op after the reply was a second trip to the kernel).
    request.memory_history = order.memory_history;
    if (!order.cwd.empty()) {
        request.cwd = order.cwd;
    }
    request.env = order.env;
    m_owner.leases().acquire(
        request, [this, o](result<kernel_lease> lease, const kernel_leases::refusal_fn& refused) {
            if (o->order.for_caller) {
                m_owner.metrics().waiting().Decrement(); // before the answer: Retry-After counts it
            }
            if (!lease) {
                return refuse(o, refused(), lease.err().code);
            }
            if (o->order.for_caller) {
                m_owner.metrics().kernels_used().Increment();
                m_owner.spares().used(o->order);
            }
            connect(o, std::move(*lease));
        });
}

void held_kernels::connect(std::shared_ptr<obtaining> o, kernel_lease lease) {
    m_connect(lease, o->order, [this, o, lease](result<std::unique_ptr<kernel_channels>> channels) {
        if (!channels) {
            m_owner.leases().release(lease);
            return refuse(o,
                          error_response(502, "kernel_died",
                                         "the kernel did not answer: " + channels.err().message));
        }
        o->finish(connected_kernel{lease, std::move(*channels)});
    });
}

void held_kernels::connect_channels(
    const kernel_lease& lease, const kernel_order& order,
    std::function<void(result<std::unique_ptr<kernel_channels>>)> done) {
    const std::uint64_t key = m_next_connect++;
    auto& channels = m_connecting[key] = std::make_unique<kernel_channels>(
        m_owner.loop(), m_owner.zmq(), lease.connection, order.all_ports, nullptr);
    auto proved = [this, key, done = std::move(done)](result<json> ready) {
        auto node = m_connecting.extract(key);
        if (node.empty()) {
            return;
        }
        if (!ready) {
            m_owner.retire(std::move(node.mapped())); // its callback is on the stack
            return done(ready.err());
        }
        done(std::move(node.mapped()));
    };
    if (order.needs_kernel_info) {
        channels->when_ready(kernel_ready_timeout, std::move(proved));
    } else {
        channels->when_subscribed(kernel_ready_timeout, std::move(proved));
    }
}

void held_kernels::refuse(const std::shared_ptr<obtaining>& o, http_response answer, errc code) {
    if (o->order.for_caller && answer.status == 429) {
        m_owner.metrics().rejected().Increment();
    }
    o->finish(refusal{std::move(answer), code});
}

// ---- watch

kernel_watch held_kernels::watch(const kernel_lease& kernel, const lease_terms& terms,
                                 watch_fns fns) {
    const std::uint64_t key = m_watches->next++;
    m_watches->entries.emplace(key, kernel_watch::table::entry{kernel, terms, {}, std::move(fns)});
    return kernel_watch(m_watches, key);
}

std::size_t held_kernels::watched() const { return m_watches->entries.size(); }

void held_kernels::tick() {
    // Keys first: a holder's callback may end watches (its own or, a spare taken, another's).
    std::vector<std::uint64_t> keys;
    for (const auto& [key, e] : m_watches->entries) {
        keys.push_back(key);
    }
    for (const std::uint64_t key : keys) {
        auto it = m_watches->entries.find(key);
        if (it != m_watches->entries.end() && it->second.fns.on_tick) {
            auto on_tick = it->second.fns.on_tick; // may end this watch
            on_tick();
            it = m_watches->entries.find(key);
        }
        if (it == m_watches->entries.end()) {
            continue;
        }
        auto& e = it->second;
        if (e.terms.renewed()) {
            m_owner.leases().renew_when_due(e.kernel, e.watch);
        }
        m_owner.leases().poll(e.kernel,
                              [table = std::weak_ptr(m_watches), key](result<json> reply) {
                                  const auto t = table.lock();
                                  if (!t) {
                                      return; // the registry is gone
                                  }
                                  const auto at = t->entries.find(key);
                                  if (at == t->entries.end()) {
                                      return; // the watch ended meanwhile
                                  }
                                  if (!kernel_leases::gone_after(at->second.watch, reply)) {
                                      return;
                                  }
                                  kernel_gone gone;
                                  gone.daemon_answered = reply.ok();
                                  if (reply) {
                                      if (auto polled = protocol::read_poll_reply(*reply)) {
                                          gone.reason = polled->reason;
                                      }
                                  }
                                  auto on_gone = at->second.fns.on_gone; // may end this watch
                                  on_gone(gone);
                              });
    }
    if (m_after_tick) {
        m_after_tick();
    }
}

} // namespace kpool::serve
