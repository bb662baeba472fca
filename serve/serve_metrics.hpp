// kpool serve's Prometheus metrics, rendered in the text format for GET /metrics: requests by
// route and status, latency by route, requests in flight and waiting for a kernel, 429s, and
// kernels used, spares ready; open connections; the gateway's kernels held and replaced.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <memory>
#include <string>

namespace kpool::serve {

class serve_metrics {
public:
    serve_metrics();

    void answered(const std::string& route, int status, double seconds);
    prometheus::Gauge& in_flight() { return m_in_flight; }
    prometheus::Gauge& waiting() { return m_waiting; }
    double waiting_now() const { return m_waiting.Value(); }
    prometheus::Counter& rejected() { return m_rejected; }
    prometheus::Counter& kernels_used() { return m_kernels_used; }
    prometheus::Gauge& gateway_kernels() { return m_gateway_kernels; }
    prometheus::Gauge& spare_kernels() { return m_spare_kernels; }
    prometheus::Gauge& connections() { return m_connections; }
    void gateway_replaced(const std::string& why);

    std::string text() const;

private:
    std::shared_ptr<prometheus::Registry> m_registry;
    prometheus::Family<prometheus::Counter>& m_requests;
    prometheus::Family<prometheus::Histogram>& m_latency;
    prometheus::Gauge& m_in_flight;
    prometheus::Gauge& m_waiting;
    prometheus::Counter& m_rejected;
    prometheus::Counter& m_kernels_used;
    prometheus::Gauge& m_gateway_kernels;
    prometheus::Gauge& m_spare_kernels;
    prometheus::Gauge& m_connections;
    prometheus::Family<prometheus::Counter>& m_gateway_restarts;
};

} // namespace kpool::serve
