// serve/held_kernels: obtain (fresh, refused, a spare, a spare found dead) and the tick that
// renews and polls, driven against a scripted kpoold (a fake control_service whose replies the
// test gives, in the order it chooses). The same code against real kpoolds: the serve suites.
#include "protocol/connection_info.hpp"
#include "serve/held_kernels.hpp"
#include "serve/request_services.hpp"
#include "serve/spare_kernels.hpp"

#include <doctest/doctest.h>

#include <deque>
#include <string>
#include <variant>
#include <vector>

namespace kpool::serve {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

struct pending {
    json request;
    std::function<void(result<json>)> reply;
};

// kpool serve as far as held_kernels and spare_kernels see it, with a kpoold that answers only
// when the test says so.
class scripted_serve final : public request_services {
public:
    explicit scripted_serve(std::chrono::seconds holder_lease, std::size_t spares = 0)
        : m_leases(*this, holder_lease) {
        uv_loop_init(&m_loop);
        m_options.queue_timeout = 5s;
        m_spares = std::make_unique<spare_kernels>(*this, spares);
        m_held = std::make_unique<held_kernels>(
            *this, [this](const kernel_lease& lease, const kernel_order& order, auto done) {
                connects.push_back(lease.kernel_id);
                if (!connect_ok) {
                    return done(error{errc::timeout, "no kernel_info_reply"});
                }
                done(std::make_unique<kernel_channels>(&m_loop, m_zmq, lease.connection,
                                                       order.all_ports, nullptr));
            });
    }
    ~scripted_serve() {
        m_held.reset();
        m_spares.reset();
        m_retired.clear();
        uv_run(&m_loop, UV_RUN_NOWAIT); // close callbacks
        uv_loop_close(&m_loop);
    }

    // The next unanswered request of `op`, answered with `reply`.
    void answer(const std::string& op, result<json> reply) {
        for (auto it = m_pending.begin(); it != m_pending.end(); ++it) {
            if (it->request.value("op", "") == op) {
                pending p = std::move(*it);
                m_pending.erase(it);
                p.reply(std::move(reply));
                return;
            }
        }
        FAIL("no " << op << " request is waiting");
    }
    std::vector<std::string> ops() const {
        std::vector<std::string> out;
        for (const auto& p : m_pending) {
            out.push_back(p.request.value("op", ""));
        }
        return out;
    }
    const json& request(const std::string& op) const {
        for (const auto& p : m_pending) {
            if (p.request.value("op", "") == op) {
                return p.request;
            }
        }
        FAIL("no " << op << " request is waiting");
        static const json none;
        return none;
    }

    // request_services
    const serve_options& options() const override { return m_options; }
    serve_metrics& metrics() override { return m_metrics; }
    uv_loop_t* loop() const override { return const_cast<uv_loop_t*>(&m_loop); }
    zmq::context_t& zmq() override { return m_zmq; }
    kernel_leases& leases() override { return m_leases; }
    spare_kernels& spares() override { return *m_spares; }
    held_kernels& held() override { return *m_held; }
    void request_finished() override {}
    void kernel_taken(const std::string&, std::chrono::steady_clock::time_point) override {}
    void kernel_returned(const std::string&, std::chrono::steady_clock::time_point, bool) override {
    }
    std::optional<int> refusal_at_once(const std::string&) override { return refuse_at_once; }
    void track(const std::shared_ptr<kernel_call>&) override {}
    void control(json request, std::chrono::milliseconds, control_done done) override {
        m_pending.push_back(
            {std::move(request), [done = std::move(done)](result<json> r) { done(r, 0); }});
    }
    void control_at(std::size_t, json request, std::chrono::milliseconds,
                    std::function<void(result<json>)> done) override {
        m_pending.push_back({std::move(request), std::move(done)});
    }
    int retry_after(const std::string&) override { return 7; }

    std::vector<std::string> connects;
    bool connect_ok = true;
    std::optional<int> refuse_at_once;

private:
    void retire_later(std::shared_ptr<void> thing) override {
        m_retired.push_back(std::move(thing));
    }

    uv_loop_t m_loop{};
    zmq::context_t m_zmq{1};
    serve_options m_options;
    serve_metrics m_metrics;
    kernel_leases m_leases;
    std::deque<pending> m_pending;
    std::unique_ptr<spare_kernels> m_spares;
    std::unique_ptr<held_kernels> m_held;
    std::vector<std::shared_ptr<void>> m_retired;
};

json acquired(const std::string& id) {
    protocol::connection_info info;
    info.transport = "ipc";
    info.ip = "/nonexistent/kpool-test-" + id;
    info.shell_port = 1;
    info.iopub_port = 2;
    info.stdin_port = 3;
    info.control_port = 4;
    info.hb_port = 5;
    info.key = "k";
    return {{"ok", true}, {"kernel_id", id}, {"connection", protocol::to_json(info)}};
}

json refused(const std::string& code) {
    return {{"ok", false}, {"error", {{"code", code}, {"message", code + " here"}}}};
}

const json ok = {{"ok", true}};

kernel_order caller_order(const std::string& pool) {
    kernel_order o;
    o.pool = pool;
    o.wait = 5s;
    return o;
}

} // namespace

TEST_CASE("held_kernels: a fresh kernel comes with the order's context, lease and metrics") {
    scripted_serve s(30s);
    kernel_order order = caller_order("py");
    order.cwd = "/srv/work";
    order.env = {{"A", "1"}};
    order.memory_history = true;
    order.lease = kernel_leases::call_terms(10s);
    std::optional<obtained> got;
    s.held().obtain(order, [&](obtained k) { got = std::move(k); });
    REQUIRE(s.ops() == std::vector<std::string>{"acquire"});
    const json& acquire = s.request("acquire");
    CHECK(acquire["pool"] == "py");
    CHECK(acquire["timeout_ms"] == 5000);
    CHECK(acquire["lease_s"] == 70.0); // the limit and a minute
    CHECK(acquire["cwd"] == "/srv/work");
    CHECK(acquire["env"] == json{{"A", "1"}});
    CHECK(acquire["history"] == "memory");
    CHECK(s.metrics().waiting_now() == 1);
    s.answer("acquire", acquired("k1"));
    REQUIRE(got);
    auto* k = std::get_if<connected_kernel>(&*got);
    REQUIRE(k != nullptr);
    CHECK(k->lease.kernel_id == "k1");
    CHECK(k->channels != nullptr);
    CHECK(s.connects == std::vector<std::string>{"k1"});
    CHECK(s.metrics().waiting_now() == 0);
    CHECK(s.metrics().kernels_used().Value() == 1);
    CHECK(s.ops().empty());
}

TEST_CASE("held_kernels: refusals are one type, counted, and a kernel that does not answer goes "
          "back") {
    scripted_serve s(30s);
    std::optional<obtained> got;
    auto keep = [&](obtained k) { got = std::move(k); };

    SUBCASE("no warm kernel in time: 429 with the turn") {
        s.held().obtain(caller_order("py"), keep);
        s.answer("acquire", refused("timeout"));
        auto* no = std::get_if<refusal>(&*got);
        REQUIRE(no != nullptr);
        CHECK(no->answer.status == 429);
        CHECK(no->code == errc::timeout);
        CHECK(s.metrics().rejected().Value() == 1);
        CHECK(s.metrics().waiting_now() == 0);
    }
    SUBCASE("an unknown pool: 404, its code for the spares") {
        s.held().obtain(caller_order("nope"), keep);
        s.answer("acquire", refused("unknown_pool"));
        auto* no = std::get_if<refusal>(&*got);
        REQUIRE(no != nullptr);
        CHECK(no->answer.status == 404);
        CHECK(no->code == errc::unknown_pool);
        CHECK(s.metrics().rejected().Value() == 0);
    }
    SUBCASE("the line is too long: refused at once, no acquire") {
        s.refuse_at_once = 9;
        s.held().obtain(caller_order("py"), keep);
        auto* no = std::get_if<refusal>(&*got);
        REQUIRE(no != nullptr);
        CHECK(no->answer.status == 429);
        CHECK(s.ops().empty());
        CHECK(s.metrics().rejected().Value() == 1);
    }
    SUBCASE("the handshake fails: 502, and the kernel is released") {
        s.connect_ok = false;
        s.held().obtain(caller_order("py"), keep);
        s.answer("acquire", acquired("k1"));
        auto* no = std::get_if<refusal>(&*got);
        REQUIRE(no != nullptr);
        CHECK(no->answer.status == 502);
        REQUIRE(s.ops() == std::vector<std::string>{"release"});
        CHECK(s.request("release")["kernel_id"] == "k1");
    }
}

TEST_CASE("held_kernels: a spare is renewed and given the context at once; a dead one gives way") {
    scripted_serve s(30s, 1);
    // A request used pool py: a spare is obtained (warm or nothing, not a caller's).
    s.spares().used(caller_order("py"));
    s.spares().top_up();
    REQUIRE(s.ops() == std::vector<std::string>{"acquire"});
    CHECK(s.request("acquire")["timeout_ms"] == 0);
    CHECK(s.request("acquire")["lease_s"] == 30.0);
    s.answer("acquire", acquired("spare1"));
    REQUIRE(s.spares().ready() == 1);
    CHECK(s.metrics().kernels_used().Value() == 0); // a spare's obtain is not a use
    CHECK(s.held().watched() == 1);

    kernel_order order = caller_order("py");
    order.cwd = "/srv";
    std::optional<obtained> got;
    s.held().obtain(order, [&](obtained k) { got = std::move(k); });
    CHECK(s.spares().ready() == 0);
    CHECK(s.held().watched() == 0); // the spare's watch ended: the caller watches it now
    REQUIRE(s.ops() == std::vector<std::string>{"renew", "context"});
    CHECK(s.request("renew")["kernel_id"] == "spare1");
    CHECK(s.request("context")["cwd"] == "/srv");

    SUBCASE("both answer: the spare is the caller's") {
        s.answer("context", ok);
        CHECK(!got); // the renew is still to come
        s.answer("renew", ok);
        REQUIRE(got);
        auto* k = std::get_if<connected_kernel>(&*got);
        REQUIRE(k != nullptr);
        CHECK(k->lease.kernel_id == "spare1");
        CHECK(s.metrics().kernels_used().Value() == 1);
        CHECK(s.connects == std::vector<std::string>{"spare1"}); // no second handshake
    }
    SUBCASE("the spare died: released, and a fresh kernel instead") {
        s.answer("renew", refused("unknown_kernel"));
        s.answer("context", refused("unknown_kernel"));
        CHECK(!got);
        REQUIRE(s.ops() == std::vector<std::string>{"release", "acquire"});
        CHECK(s.request("release")["kernel_id"] == "spare1");
        CHECK(s.request("acquire")["cwd"] == "/srv");
        s.answer("acquire", acquired("k2"));
        REQUIRE(got);
        auto* k = std::get_if<connected_kernel>(&*got);
        REQUIRE(k != nullptr);
        CHECK(k->lease.kernel_id == "k2");
    }
    SUBCASE("the context is refused: released, and the caller told why") {
        s.answer("renew", ok);
        s.answer("context", refused("bad_request"));
        REQUIRE(got);
        auto* no = std::get_if<refusal>(&*got);
        REQUIRE(no != nullptr);
        CHECK(no->answer.status == 400);
        REQUIRE(s.ops() == std::vector<std::string>{"release"});
        CHECK(s.request("release")["kernel_id"] == "spare1");
    }
}

TEST_CASE("spare_kernels: prepared with what a pool's requests keep asking for") {
    scripted_serve s(30s, 1);
    kernel_order run = caller_order("py"); // a /v1 run of a notebook under --root
    run.cwd = "/srv/reports";
    run.memory_history = true;
    // One request: a plain spare (one request says nothing of the next).
    s.spares().used(run);
    s.spares().top_up();
    REQUIRE(s.ops() == std::vector<std::string>{"acquire"});
    CHECK(!s.request("acquire").contains("cwd"));
    CHECK(!s.request("acquire").contains("history"));
    s.answer("acquire", acquired("plain"));

    // A second one alike takes the plain spare, which gets its context (a chdir and the history
    // move); the spare after it is prepared as they asked.
    std::optional<obtained> got;
    s.held().obtain(run, [&](obtained k) { got = std::move(k); });
    REQUIRE(s.ops() == std::vector<std::string>{"renew", "context"});
    CHECK(s.request("context")["history"] == "memory");
    s.answer("renew", ok);
    s.answer("context", ok);
    REQUIRE(got);
    CHECK(std::get<connected_kernel>(*got).lease.kernel_id == "plain");
    s.spares().top_up();
    REQUIRE(s.ops() == std::vector<std::string>{"acquire"});
    CHECK(s.request("acquire")["cwd"] == "/srv/reports");
    CHECK(s.request("acquire")["history"] == "memory");
    CHECK(s.request("acquire")["timeout_ms"] == 0);
    s.answer("acquire", acquired("prepared"));
    REQUIRE(s.spares().ready() == 1);

    SUBCASE("a request alike takes it; the context still goes to kpoold, which has it already") {
        got.reset();
        s.held().obtain(run, [&](obtained k) { got = std::move(k); });
        REQUIRE(s.ops() == std::vector<std::string>{"renew", "context"});
        CHECK(s.request("context")["cwd"] == "/srv/reports");
        s.answer("renew", ok);
        s.answer("context", ok);
        REQUIRE(got);
        CHECK(std::get<connected_kernel>(*got).lease.kernel_id == "prepared");
    }
    SUBCASE("a request in another folder cannot take it: released, a fresh kernel instead") {
        kernel_order other = run;
        other.cwd = "/srv/elsewhere";
        got.reset();
        s.held().obtain(other, [&](obtained k) { got = std::move(k); });
        REQUIRE(s.ops() == std::vector<std::string>{"release", "acquire"});
        CHECK(s.request("release")["kernel_id"] == "prepared");
        CHECK(s.request("acquire")["cwd"] == "/srv/elsewhere");
        CHECK(s.request("acquire")["timeout_ms"] == 5000); // the caller's own
        CHECK(s.spares().ready() == 0);
        s.answer("release", ok);
        s.answer("acquire", acquired("fresh"));
        REQUIRE(got);
        CHECK(std::get<connected_kernel>(*got).lease.kernel_id == "fresh");
        // The last two disagree: the next spare is a plain one, which either can take.
        s.spares().top_up();
        REQUIRE(s.ops() == std::vector<std::string>{"acquire"});
        CHECK(!s.request("acquire").contains("cwd"));
    }
    SUBCASE("a gateway's start (history kept in the file) cannot take one with it in memory") {
        kernel_order gateway = caller_order("py");
        gateway.cwd = "/srv/reports";
        got.reset();
        s.held().obtain(gateway, [&](obtained k) { got = std::move(k); });
        REQUIRE(s.ops() == std::vector<std::string>{"release", "acquire"});
        CHECK(!s.request("acquire").contains("history"));
    }
    SUBCASE("a preparation kpoold refuses (the folder removed) gives way to plain spares") {
        got.reset();
        s.held().obtain(run, [&](obtained k) { got = std::move(k); }); // takes "prepared"
        s.answer("renew", ok);
        s.answer("context", ok);
        s.spares().top_up();
        REQUIRE(s.ops() == std::vector<std::string>{"acquire"});
        CHECK(s.request("acquire")["cwd"] == "/srv/reports");
        s.answer("acquire", refused("bad_request"));
        s.spares().top_up(); // at once: the pool was not busy
        REQUIRE(s.ops() == std::vector<std::string>{"acquire"});
        CHECK(!s.request("acquire").contains("cwd"));
    }
    SUBCASE("a request with an env is never prepared for") {
        kernel_order with_env = run;
        with_env.env = {{"A", "1"}};
        got.reset();
        s.held().obtain(with_env, [&](obtained k) { got = std::move(k); });
        REQUIRE(s.ops() == std::vector<std::string>{"renew", "context"}); // it can take it
        s.answer("renew", ok);
        s.answer("context", ok);
        REQUIRE(got);
        s.held().obtain(with_env, [&](obtained) {}); // no spare: a fresh kernel
        s.answer("acquire", acquired("fresh"));
        s.spares().top_up();
        REQUIRE(s.ops() == std::vector<std::string>{"acquire"});
        CHECK(!s.request("acquire").contains("cwd"));
        CHECK(!s.request("acquire").contains("env"));
    }
}

TEST_CASE("held_kernels: one tick renews what is due, polls, and tells the holder of a death") {
    // A holder lease of 0 s: every tick is a third of it.
    scripted_serve s(0s);
    kernel_lease renewed{0, "held", {}};
    kernel_lease fixed{0, "call", {}};
    std::vector<std::string> gone;
    int ticks = 0;
    auto w1 = s.held().watch(renewed, kernel_leases::holder_terms(),
                             {.on_gone =
                                  [&](const kernel_gone& g) {
                                      gone.push_back("held:" + g.reason + ":" +
                                                     (g.daemon_answered ? "answered" : "silent"));
                                  },
                              .on_tick = [&] { ++ticks; }});
    auto w2 = s.held().watch(
        fixed, kernel_leases::call_terms(60s), {.on_gone = [&](const kernel_gone& g) {
            gone.push_back("call:" + g.reason + ":" + (g.daemon_answered ? "answered" : "silent"));
        }});
    s.held().tick();
    CHECK(ticks == 1);
    // Renewed terms are renewed; fixed ones never.
    CHECK(s.ops() == std::vector<std::string>{"renew", "poll", "poll"});
    s.answer("renew", ok);
    s.answer("poll", json{{"ok", true}, {"alive", true}});
    s.answer("poll", json{{"ok", true}, {"alive", false}, {"reason", "out of memory"}});
    CHECK(gone == std::vector<std::string>{"call:out of memory:answered"});

    SUBCASE("three unanswered polls in a row: gone, its daemon silent") {
        w2.reset();
        for (int i = 0; i < 3; ++i) {
            s.held().tick();
            s.answer("renew", ok);
            s.answer("poll", error{errc::timeout, "no reply"});
        }
        CHECK(gone.back() == "held::silent");
        CHECK(gone.size() == 2);
    }
    SUBCASE("an ended watch is polled no more, and a late reply finds nobody") {
        s.held().tick();
        w1.reset();
        w2.reset();
        s.answer("poll", json{{"ok", true}, {"alive", false}});
        s.answer("poll", json{{"ok", true}, {"alive", false}});
        CHECK(gone.size() == 1);
        s.answer("renew", ok);
        s.held().tick();
        CHECK(s.ops().empty());
        CHECK(s.held().watched() == 0);
    }
}

} // namespace kpool::serve
