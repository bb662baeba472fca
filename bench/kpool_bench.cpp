// kpool-bench: an ab-style load generator for kpoold's control socket, and the bare ZeroMQ
// echo server that is its baseline.
//
//   kpool-bench [--endpoint E] [-c N] [-n M] [--json] ping|status
//   kpool-bench [--endpoint E] [-c N] [-n M] [--json] [--release] [--timeout-ms T] acquire POOL
//   kpool-bench echo-server ENDPOINT            a ROUTER that answers every request at once
//
// N client threads, each with its own DEALER socket, issue M requests in all, one at a time
// each, as fast as replies come. Reported: requests/s, failures, and the latency percentiles of
// the measured request (with --release, the release that follows an acquire is not timed).
#include "client/control_client.hpp"
#include "protocol/control.hpp"

#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using json = nlohmann::json;
using steady = std::chrono::steady_clock;

struct options {
    std::string endpoint = kpool::client::default_endpoint();
    int concurrency = 1;
    int requests = 1000;
    bool as_json = false;
    bool release = false;
    long timeout_ms = 0;
    std::string op;
    std::string pool;
};

[[noreturn]] void usage(const char* why) {
    std::fprintf(stderr,
                 "kpool-bench: %s\nusage: kpool-bench [--endpoint E] [-c N] [-n M] [--json] "
                 "ping|status\n       kpool-bench [--endpoint E] [-c N] [-n M] [--json] "
                 "[--release] [--timeout-ms T] acquire POOL\n       kpool-bench echo-server "
                 "ENDPOINT\n",
                 why);
    std::exit(2);
}

// The floor: a ROUTER that sends every request straight back, with no parsing at all.
int echo_server(const std::string& endpoint) {
    zmq::context_t ctx;
    zmq::socket_t router(ctx, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    router.bind(endpoint);
    const std::string reply = R"({"ok":true})";
    std::vector<zmq::message_t> parts;
    for (;;) {
        parts.clear();
        do {
            parts.emplace_back();
            (void)router.recv(parts.back());
        } while (parts.back().more());
        for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
            router.send(parts[i], zmq::send_flags::sndmore);
        }
        router.send(zmq::buffer(reply), zmq::send_flags::none);
    }
}

struct client_result {
    std::vector<double> latencies_ms;
    int failures = 0;
    std::string first_error;
};

json round_trip(zmq::socket_t& s, const std::string& body) {
    s.send(zmq::message_t(), zmq::send_flags::sndmore);
    s.send(zmq::buffer(body), zmq::send_flags::none);
    zmq::message_t empty, reply;
    (void)s.recv(empty);
    (void)s.recv(reply);
    return json::parse(reply.to_string_view(), nullptr, false);
}

void run_client(zmq::context_t& ctx, const options& opt, std::atomic<int>& remaining,
                std::atomic<bool>& go, client_result& out) {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.connect(opt.endpoint);
    json req{{"op", opt.op}};
    if (opt.op == "acquire") {
        req["pool"] = opt.pool;
        if (opt.timeout_ms > 0) {
            req["timeout_ms"] = opt.timeout_ms;
        }
    }
    const std::string body = req.dump();
    while (!go.load()) {
        std::this_thread::yield();
    }
    while (remaining.fetch_sub(1) > 0) {
        const auto t0 = steady::now();
        json reply = round_trip(s, body);
        out.latencies_ms.push_back(
            std::chrono::duration<double, std::milli>(steady::now() - t0).count());
        if (!reply.is_object() || !reply.value("ok", false)) {
            if (out.failures++ == 0) {
                out.first_error = reply.is_object() ? reply.dump() : "unparsable reply";
            }
            continue;
        }
        if (opt.release && reply.contains("kernel_id")) {
            round_trip(s, json{{"op", "release"}, {"kernel_id", reply["kernel_id"]}}.dump());
        }
    }
}

double percentile(const std::vector<double>& sorted, double p) {
    if (sorted.empty()) {
        return 0;
    }
    const auto i =
        static_cast<std::size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
    return sorted[std::min(i, sorted.size() - 1)];
}

int bench(const options& opt) {
    zmq::context_t ctx;
    std::atomic<int> remaining{opt.requests};
    std::atomic<bool> go{false};
    std::vector<client_result> results(static_cast<std::size_t>(opt.concurrency));
    std::vector<std::thread> threads;
    for (auto& r : results) {
        threads.emplace_back(run_client, std::ref(ctx), std::cref(opt), std::ref(remaining),
                             std::ref(go), std::ref(r));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100)); // let every socket connect
    const auto start = steady::now();
    go = true;
    for (auto& t : threads) {
        t.join();
    }
    const double seconds = std::chrono::duration<double>(steady::now() - start).count();
    std::vector<double> all;
    int failures = 0;
    std::string first_error;
    for (auto& r : results) {
        all.insert(all.end(), r.latencies_ms.begin(), r.latencies_ms.end());
        failures += r.failures;
        if (first_error.empty()) {
            first_error = r.first_error;
        }
    }
    std::sort(all.begin(), all.end());
    const double rps = static_cast<double>(all.size()) / seconds;
    if (opt.as_json) {
        json out{{"op", opt.op},
                 {"concurrency", opt.concurrency},
                 {"requests", all.size()},
                 {"failures", failures},
                 {"seconds", seconds},
                 {"requests_per_s", rps},
                 {"min_ms", all.empty() ? 0 : all.front()},
                 {"p50_ms", percentile(all, 50)},
                 {"p90_ms", percentile(all, 90)},
                 {"p99_ms", percentile(all, 99)},
                 {"max_ms", all.empty() ? 0 : all.back()},
                 {"latencies_ms", all},
                 {"first_error", first_error}};
        std::printf("%s\n", out.dump().c_str());
        return 0;
    }
    std::printf("Endpoint:            %s\nOperation:           %s%s\nConcurrency level:   %d\n"
                "Time taken:          %.3f s\nComplete requests:   %zu\nFailed requests:     %d\n"
                "Requests per second: %.1f [#/sec] (mean)\n\n"
                "Percentage of the requests served within a certain time (ms)\n",
                opt.endpoint.c_str(), opt.op.c_str(), opt.release ? " (+release)" : "",
                opt.concurrency, seconds, all.size(), failures, rps);
    for (double p : {50.0, 66.0, 75.0, 80.0, 90.0, 95.0, 98.0, 99.0}) {
        std::printf("  %3.0f%%  %8.3f\n", p, percentile(all, p));
    }
    std::printf("  100%%  %8.3f (longest request)\n", all.empty() ? 0 : all.back());
    if (!first_error.empty()) {
        std::printf("\nfirst failure: %s\n", first_error.c_str());
    }
    return failures == 0 ? 0 : 1;
}

} // namespace

int main(int argc, char** argv) {
    options opt;
    std::vector<std::string> positional;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) {
                usage((a + " needs a value").c_str());
            }
            return argv[++i];
        };
        try {
            if (a == "--endpoint") {
                opt.endpoint = next();
            } else if (a == "-c") {
                opt.concurrency = std::stoi(next());
            } else if (a == "-n") {
                opt.requests = std::stoi(next());
            } else if (a == "--timeout-ms") {
                opt.timeout_ms = std::stol(next());
            } else if (a == "--json") {
                opt.as_json = true;
            } else if (a == "--release") {
                opt.release = true;
            } else if (a.starts_with("-")) {
                usage(("unknown option " + a).c_str());
            } else {
                positional.push_back(a);
            }
        } catch (const std::exception&) {
            usage((a + " needs a number").c_str());
        }
    }
    if (positional.size() == 2 && positional[0] == "echo-server") {
        return echo_server(positional[1]);
    }
    if (positional.empty() || opt.concurrency < 1 || opt.requests < 1) {
        usage("nothing to do");
    }
    opt.op = positional[0];
    if (opt.op == "acquire") {
        if (positional.size() != 2) {
            usage("acquire needs a POOL");
        }
        opt.pool = positional[1];
    } else if ((opt.op != "ping" && opt.op != "status") || positional.size() != 1) {
        usage("unknown command");
    }
    try {
        return bench(opt);
    } catch (const zmq::error_t& e) {
        std::fprintf(stderr, "kpool-bench: %s\n", e.what());
        return 3;
    }
}
