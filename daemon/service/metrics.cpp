// metrics: prometheus-cpp families, one series set per pool, counters mirrored from the pools.
#include "daemon/service/metrics.hpp"

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <iterator>
#include <map>
#include <vector>

namespace kpool::daemon {
namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// From a warm hand-over (well under a millisecond) to a wait for a cold start (seconds).
const Histogram::BucketBoundaries acquire_buckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
// Kernel starts: a fork-server child in tens of milliseconds, an ipykernel in about a second.
const Histogram::BucketBoundaries warm_buckets = {0.05, 0.1, 0.25, 0.5, 1,  1.5,
                                                  2,    3,   5,    10,  30, 60};

} // namespace

struct metrics::impl {
    std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
    prometheus::Exposer exposer;

    Family<Gauge>& target =
        gauge("kpool_pool_target_kernels", "Warm kernels the pool keeps ready (its size)");
    Family<Gauge>& warm = gauge("kpool_pool_warm_kernels", "Kernels ready to hand out");
    Family<Gauge>& starting =
        gauge("kpool_pool_starting_kernels", "Kernels launched and not yet ready");
    Family<Gauge>& leased = gauge("kpool_pool_leased_kernels", "Kernels handed out to clients");
    // kpool_NAME_total for each entry of pool_counter_table, in its order.
    std::vector<Family<Counter>*> counters = [this] {
        std::vector<Family<Counter>*> out;
        for (const counter_description& d : pool_counter_table) {
            out.push_back(&counter("kpool_" + std::string(d.name) + "_total", d.help));
        }
        return out;
    }();
    Family<Histogram>& acquire_seconds =
        prometheus::BuildHistogram()
            .Name("kpool_acquire_duration_seconds")
            .Help("Time from an acquire request to its reply with a kernel")
            .Register(*registry);
    Family<Histogram>& warm_seconds =
        prometheus::BuildHistogram()
            .Name("kpool_kernel_time_to_warm_seconds")
            .Help("Time from a kernel's launch to its first kernel_info_reply")
            .Register(*registry);

    // What each pool's counters were at the last update, to add only the difference.
    std::map<std::string, pool_counters> mirrored;

    explicit impl(const std::string& address) : exposer(address, 1) {
        exposer.RegisterCollectable(registry);
    }

    Family<Gauge>& gauge(const char* name, const char* help) {
        return prometheus::BuildGauge().Name(name).Help(help).Register(*registry);
    }
    Family<Counter>& counter(const std::string& name, const char* help) {
        return prometheus::BuildCounter().Name(name).Help(help).Register(*registry);
    }
};

metrics::metrics(const std::string& address) : m_impl(std::make_unique<impl>(address)) {}
metrics::~metrics() = default;

void metrics::update(const pool& p) {
    const std::map<std::string, std::string> label{{"pool", p.config().name}};
    m_impl->target.Add(label).Set(p.config().size);
    m_impl->warm.Add(label).Set(p.count(kernel_state::warm));
    m_impl->starting.Add(label).Set(p.count(kernel_state::starting));
    m_impl->leased.Add(label).Set(p.count(kernel_state::leased));
    pool_counters& last = m_impl->mirrored[p.config().name];
    const pool_counters& now = p.counters();
    auto mirror = [&](Family<Counter>& family, std::uint64_t pool_counters::*field) {
        Counter& c = family.Add(label);
        // The pool may take an increment back (a reply that could not be delivered).
        if (now.*field > last.*field) {
            c.Increment(static_cast<double>(now.*field - last.*field));
        }
        last.*field = std::max(last.*field, now.*field);
    };
    for (std::size_t i = 0; i < std::size(pool_counter_table); ++i) {
        mirror(*m_impl->counters[i], pool_counter_table[i].field);
    }
}

void metrics::forget(const std::string& pool_name) {
    const std::map<std::string, std::string> label{{"pool", pool_name}};
    for (Family<Gauge>* f : {&m_impl->target, &m_impl->warm, &m_impl->starting, &m_impl->leased}) {
        f->Remove(&f->Add(label));
    }
    for (Family<Counter>* f : m_impl->counters) {
        f->Remove(&f->Add(label));
    }
    for (Family<Histogram>* f : {&m_impl->acquire_seconds, &m_impl->warm_seconds}) {
        if (f->Has(label)) {
            f->Remove(&f->Add(label, Histogram::BucketBoundaries{}));
        }
    }
    m_impl->mirrored.erase(pool_name);
}

void metrics::observe_acquire(const std::string& pool_name, double seconds) {
    m_impl->acquire_seconds.Add({{"pool", pool_name}}, acquire_buckets).Observe(seconds);
}

void metrics::observe_time_to_warm(const std::string& pool_name, double seconds) {
    m_impl->warm_seconds.Add({{"pool", pool_name}}, warm_buckets).Observe(seconds);
}

} // namespace kpool::daemon
