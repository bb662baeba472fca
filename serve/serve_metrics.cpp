// serve_metrics: prometheus-cpp's registry, serialised on demand (no exposer thread).
#include "serve/serve_metrics.hpp"

#include <prometheus/text_serializer.h>

namespace kpool::serve {

serve_metrics::serve_metrics()
    : m_registry(std::make_shared<prometheus::Registry>()),
      m_requests(prometheus::BuildCounter()
                     .Name("kpool_serve_requests_total")
                     .Help("HTTP requests answered, by route and status")
                     .Register(*m_registry)),
      m_latency(prometheus::BuildHistogram()
                    .Name("kpool_serve_request_seconds")
                    .Help("From a request's arrival to its answer, by route")
                    .Register(*m_registry)),
      m_in_flight(prometheus::BuildGauge()
                      .Name("kpool_serve_in_flight")
                      .Help("Requests being handled")
                      .Register(*m_registry)
                      .Add({})),
      m_waiting(prometheus::BuildGauge()
                    .Name("kpool_serve_waiting")
                    .Help("Requests waiting for a warm kernel")
                    .Register(*m_registry)
                    .Add({})),
      m_rejected(prometheus::BuildCounter()
                     .Name("kpool_serve_rejected_total")
                     .Help("Requests answered 429: no warm kernel within the queue timeout, or the "
                           "queue full")
                     .Register(*m_registry)
                     .Add({})),
      m_kernels_used(prometheus::BuildCounter()
                         .Name("kpool_serve_kernels_used_total")
                         .Help("Kernels handed to a request or a gateway client (each used by one, "
                               "then released)")
                         .Register(*m_registry)
                         .Add({})),
      m_gateway_kernels(prometheus::BuildGauge()
                            .Name("kpool_serve_gateway_kernels")
                            .Help("Kernels the Kernel Gateway API holds for notebook servers")
                            .Register(*m_registry)
                            .Add({})),
      m_spare_kernels(prometheus::BuildGauge()
                          .Name("kpool_serve_spare_kernels")
                          .Help("Fresh kernels held connected for the next requests (--spares)")
                          .Register(*m_registry)
                          .Add({})),
      m_connections(
          prometheus::BuildGauge()
              .Name("kpool_serve_connections")
              .Help("HTTP connections open (websockets included); at --max-connections more wait")
              .Register(*m_registry)
              .Add({})),
      m_gateway_restarts(prometheus::BuildCounter()
                             .Name("kpool_serve_gateway_replacements_total")
                             .Help("Gateway kernels replaced by a warm one, by why (restart, died)")
                             .Register(*m_registry)) {}

void serve_metrics::gateway_replaced(const std::string& why) {
    m_gateway_restarts.Add({{"why", why}}).Increment();
}

void serve_metrics::answered(const std::string& route, int status, double seconds) {
    m_requests.Add({{"route", route}, {"status", std::to_string(status)}}).Increment();
    static const prometheus::Histogram::BucketBoundaries buckets = {
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
    m_latency.Add({{"route", route}}, buckets).Observe(seconds);
}

std::string serve_metrics::text() const {
    return prometheus::TextSerializer().Serialize(m_registry->Collect());
}

} // namespace kpool::serve
