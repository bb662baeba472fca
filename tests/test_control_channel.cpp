// serve/control_channel against a real ROUTER socket standing in for kpoold, on one loop: replies
// matched to requests, and a lost connection (the ROUTER closed, as when kpoold is killed)
// failing what is pending at once, then every request until the connection is back.
#include "serve/control_channel.hpp"

#include "loop/zmq_frames.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>

namespace kpool::serve {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// A loop and an ipc path of its own; `run_until` turns the loop until `done` says so (or 5 s).
struct fixture {
    uv_loop_t loop{};
    zmq::context_t zmq;
    std::filesystem::path dir;
    std::string endpoint;

    fixture() {
        uv_loop_init(&loop);
        char templ[] = "/tmp/kpool-channel-XXXXXX";
        dir = ::mkdtemp(templ);
        endpoint = "ipc://" + (dir / "control").string();
    }
    ~fixture() {
        uv_run(&loop, UV_RUN_NOWAIT); // close callbacks
        uv_loop_close(&loop);
        std::filesystem::remove_all(dir);
    }
    template <typename Done>
    bool run_until(Done done) {
        const auto deadline = std::chrono::steady_clock::now() + 5s;
        for (;;) {
            if (done()) { // asked once per turn: it may receive
                return true;
            }
            if (std::chrono::steady_clock::now() >= deadline) {
                return false;
            }
            uv_run(&loop, UV_RUN_NOWAIT);
            ::usleep(1000);
        }
    }
};

zmq::socket_t daemon_at(zmq::context_t& zmq, const std::string& endpoint) {
    zmq::socket_t router(zmq, zmq::socket_type::router);
    router.set(zmq::sockopt::linger, 0);
    router.bind(endpoint);
    return router;
}

TEST_CASE("control_channel: a reply, then a dropped connection fails what is pending at once") {
    fixture f;
    auto router = daemon_at(f.zmq, f.endpoint);
    {
        control_channel channel(&f.loop, f.zmq, f.endpoint);
        std::optional<result<json>> first;
        channel.request(json{{"op", "ping"}}, 10s, [&](result<json> r) { first = std::move(r); });
        std::optional<std::vector<std::string>> frames;
        REQUIRE(f.run_until([&] { return (frames = loop::recv_frames(router)).has_value(); }));
        json request = json::parse(frames->back());
        CHECK(request["op"] == "ping");
        json reply{{"ok", true}, {"req_id", request["req_id"]}};
        (void)loop::send_frames(router, {(*frames)[0], "", reply.dump()});
        REQUIRE(f.run_until([&] { return first.has_value(); }));
        CHECK((*first)->value("ok", false));
        CHECK_FALSE(channel.lost());

        // Pending, and then the daemon is gone: failed at once, not at its 10 s deadline.
        std::optional<result<json>> pending;
        channel.request(json{{"op", "acquire"}, {"pool", "p"}}, 10s,
                        [&](result<json> r) { pending = std::move(r); });
        REQUIRE(f.run_until([&] { return (frames = loop::recv_frames(router)).has_value(); }));
        const auto dropped = std::chrono::steady_clock::now();
        router.close();
        REQUIRE(f.run_until([&] { return pending.has_value(); }));
        CHECK(std::chrono::steady_clock::now() - dropped < 2s);
        REQUIRE_FALSE(pending->ok());
        CHECK(pending->err().code == errc::unavailable);
        CHECK(pending->err().message.find("was dropped before a reply") != std::string::npos);
        REQUIRE(channel.lost());

        // While it is down a request fails as it is made.
        std::optional<result<json>> meanwhile;
        channel.request(json{{"op", "ping"}}, 10s,
                        [&](result<json> r) { meanwhile = std::move(r); });
        REQUIRE(meanwhile.has_value());
        CHECK(meanwhile->err().code == errc::unavailable);

        // kpoold back at the same socket: the connection comes back, and requests are answered.
        router = daemon_at(f.zmq, f.endpoint);
        REQUIRE(f.run_until([&] { return !channel.lost(); }));
        std::optional<result<json>> again;
        channel.request(json{{"op", "ping"}}, 10s, [&](result<json> r) { again = std::move(r); });
        REQUIRE(f.run_until([&] { return (frames = loop::recv_frames(router)).has_value(); }));
        request = json::parse(frames->back());
        reply = json{{"ok", true}, {"req_id", request["req_id"]}};
        (void)loop::send_frames(router, {(*frames)[0], "", reply.dump()});
        REQUIRE(f.run_until([&] { return again.has_value(); }));
        CHECK((*again)->value("ok", false));
    }
}

} // namespace
} // namespace kpool::serve
