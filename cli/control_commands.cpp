// The commands that are one control op each: ping, status, kernelspecs, acquire, release,
// signal, poll, resize, drain; and keygen, which makes a CURVE key pair.
#include "cli/commands.hpp"
#include "cli/duration.hpp"
#include "cli/exit_status.hpp"
#include "cli/format.hpp"
#include "protocol/control.hpp"
#include "protocol/control_replies.hpp"
#include "protocol/control_requests.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>

namespace kpool::cli {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr auto quick = 5000ms; // for every op that does not wait for a kernel

int signal_number(const std::string& name) {
    static const std::map<std::string, int> names = {
        {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT},
        {"KILL", SIGKILL}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2},
        {"TERM", SIGTERM}, {"CONT", SIGCONT}, {"STOP", SIGSTOP}};
    std::string n = name.starts_with("SIG") ? name.substr(3) : name;
    if (auto it = names.find(n); it != names.end()) {
        return it->second;
    }
    return number<int>(name, "SIGNAL");
}

// Prints one daemon's answer: `on_ok` prints a successful reply in human form. Returns the exit
// status. `who` prefixes messages when several daemons answer.
int print_answer(const invocation& inv, const result<json>& reply,
                 const std::function<void(const json&)>& on_ok, const std::string& who = "") {
    if (!reply) {
        std::fprintf(stderr, "kpool: %s%s\n", who.c_str(), reply.err().message.c_str());
        return exit_status::unreachable;
    }
    if (!reply->value("ok", false)) {
        const json& e = reply->value("error", json::object());
        std::fprintf(stderr, "kpool: %s%s: %s\n", who.c_str(),
                     e.value("code", std::string("internal")).c_str(),
                     e.value("message", std::string("(no message)")).c_str());
        return exit_status::failed;
    }
    if (inv.as_json) {
        std::printf("%s\n", reply->dump(2).c_str());
    } else {
        on_ok(*reply);
    }
    return exit_status::ok;
}

// Sends to every daemon and prints each answer; the worst exit status wins.
int call_each(const invocation& inv, const json& request,
              const std::function<void(const json&, const std::string&)>& on_ok) {
    auto daemons = inv.daemons();
    int worst = exit_status::ok;
    for (const auto& e : daemons.endpoints()) {
        const std::string who = daemons.endpoints().size() > 1 ? e + ": " : "";
        worst = std::max(worst, print_answer(
                                    inv, daemons.daemon(e).request(request, quick),
                                    [&](const json& r) { on_ok(r, who); }, who));
    }
    return worst;
}

// A request about a kernel, to the daemon that owns it.
int call_for_kernel(
    const invocation& inv, const json& request,
    const std::function<void(const json&)>& on_ok = [](const json&) {}) {
    auto daemons = inv.daemons();
    const std::string id = request.value("kernel_id", "");
    return print_answer(inv, daemons.request_for_kernel(id, request, quick).reply, on_ok);
}

// A kernel's id, or the connection file `kpool acquire` printed (.../kernel-ID.json).
std::string kernel_id_of(const std::string& word) {
    const std::string name = word.substr(word.rfind('/') + 1);
    if (name.starts_with("kernel-") && name.ends_with(".json")) {
        return name.substr(7, name.size() - 7 - 5);
    }
    return word;
}

} // namespace

int ping_command(const invocation& inv) {
    auto daemons = inv.daemons();
    int worst = exit_status::ok;
    for (const auto& e : daemons.endpoints()) {
        worst = std::max(
            worst, print_answer(inv, daemons.daemon(e).request(protocol::requests::ping(), quick),
                                [&](const json& r) {
                                    std::printf("kpoold %s (protocol %d) at %s\n",
                                                r.value("version", "?").c_str(),
                                                r.value("protocol", 0), e.c_str());
                                }));
    }
    return worst;
}

int status_command(const invocation& inv) {
    auto daemons = inv.daemons();
    if (daemons.endpoints().size() == 1) {
        return print_answer(
            inv, daemons.first().request(protocol::requests::status(), quick),
            [&inv](const json& r) { std::fputs(format_status(r, inv.wide).c_str(), stdout); });
    }
    std::vector<daemon_status> all;
    json as_json = json::array();
    int worst = exit_status::ok;
    for (auto& a : daemons.statuses(quick)) {
        daemon_status d{a.endpoint, std::nullopt, ""};
        if (a.reply && a.reply->value("ok", false)) {
            d.status = *a.reply;
            as_json.push_back({{"endpoint", a.endpoint}, {"status", *a.reply}});
        } else {
            d.error = a.reply
                          ? a.reply->value("error", json::object()).value("message", std::string())
                          : a.reply.err().message;
            worst = std::max(worst, a.reply ? exit_status::failed : exit_status::unreachable);
            as_json.push_back({{"endpoint", a.endpoint}, {"error", d.error}});
        }
        all.push_back(std::move(d));
    }
    if (inv.as_json) {
        std::printf("%s\n", as_json.dump(2).c_str());
    } else {
        std::fputs(format_statuses(all, inv.wide).c_str(), stdout);
    }
    return worst;
}

int kernelspecs_command(const invocation& inv) {
    auto daemons = inv.daemons();
    return print_answer(inv, daemons.first().request(protocol::requests::kernelspecs(), quick),
                        [](const json& r) { std::fputs(format_kernelspecs(r).c_str(), stdout); });
}

int acquire_command(const invocation& inv) {
    protocol::acquire_args req;
    req.pool = inv.words[0];
    std::chrono::milliseconds wait = protocol::default_acquire_timeout;
    if (auto it = inv.values.find("--timeout"); it != inv.values.end()) {
        // A bare number stays milliseconds here, as it always was; say so, since every other
        // command reads one as seconds.
        const auto d = parse_duration(it->second, bare_unit::milliseconds, true);
        if (!d) {
            throw usage_error{duration_usage("--timeout", it->second, bare_unit::milliseconds)};
        }
        if (d->bare) {
            std::fprintf(
                stderr,
                "kpool: note: --timeout %s is %s milliseconds; write %sms, or 5s for seconds\n",
                it->second.c_str(), it->second.c_str(), it->second.c_str());
        }
        req.timeout_ms = d->value.count();
        wait = d->value;
    }
    if (auto it = inv.values.find("--lease"); it != inv.values.end()) {
        const auto d = parse_duration(it->second, bare_unit::seconds);
        if (!d) {
            throw usage_error{duration_usage("--lease", it->second, bare_unit::seconds)};
        }
        req.lease_s = static_cast<double>(d->value.count()) / 1000;
    }
    if (auto it = inv.values.find("--cwd"); it != inv.values.end()) {
        req.cwd = it->second;
    }
    req.env = inv.env;
    auto daemons = inv.daemons();
    auto answer = daemons.acquire(protocol::requests::acquire(req), wait + quick);
    if (answer.reply && answer.reply->value("ok", false) && daemons.endpoints().size() > 1) {
        (*answer.reply)["endpoint"] = answer.endpoint; // which daemon holds it
    }
    return print_answer(inv, answer.reply, [](const json& r) {
        std::printf("%s\n", r.value("connection_file", "").c_str());
    });
}

int release_command(const invocation& inv) {
    return call_for_kernel(inv, protocol::requests::release(kernel_id_of(inv.words[0])));
}

int signal_command(const invocation& inv) {
    return call_for_kernel(
        inv, protocol::requests::signal(kernel_id_of(inv.words[0]), signal_number(inv.words[1])));
}

int poll_command(const invocation& inv) {
    return call_for_kernel(inv, protocol::requests::poll(kernel_id_of(inv.words[0])),
                           [](const json& r) {
                               const auto polled = protocol::read_poll_reply(r);
                               if (!polled || polled->alive) {
                                   std::printf("running\n");
                               } else {
                                   std::printf("exited %d\n", polled->exit_code.value_or(0));
                               }
                           });
}

int resize_command(const invocation& inv) {
    return call_each(
        inv, protocol::requests::resize(inv.words[0], number<std::int64_t>(inv.words[1], "SIZE")),
        [](const json& r, const std::string& who) {
            std::printf("%s%s: size %lld (was %lld)\n", who.c_str(), r.value("pool", "").c_str(),
                        r.value("size", 0LL), r.value("previous_size", 0LL));
        });
}

int drain_command(const invocation& inv) {
    return call_each(inv, protocol::requests::drain(inv.words[0]),
                     [](const json& r, const std::string& who) {
                         std::printf("%s%s: drained (size was %lld)\n", who.c_str(),
                                     r.value("pool", "").c_str(), r.value("previous_size", 0LL));
                     });
}

int keygen_command(const invocation& inv) {
    const std::string& path = inv.words[0];
    const auto [public_key, secret_key] = client::make_curve_keypair();
    // O_EXCL: never overwrite a key someone relies on.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        std::fprintf(stderr, "kpool: cannot create %s: %s\n", path.c_str(), std::strerror(errno));
        return exit_status::failed;
    }
    const std::string text = secret_key + "\n";
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    if (::close(fd) != 0 || !written) {
        std::fprintf(stderr, "kpool: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return exit_status::failed;
    }
    std::printf("%s\n", public_key.c_str());
    return exit_status::ok;
}

} // namespace kpool::cli
