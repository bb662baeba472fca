// kpool: the command-line client of kpoold (control protocol v1, protocol/PROTOCOL.md).
//
// Exit status: 0 done; 1 kpoold answered with an error (printed as "code: message");
// 2 bad usage; 3 kpoold could not be reached or did not answer in time.
#include "client/control_client.hpp"
#include "cli/exec_command.hpp"
#include "cli/format.hpp"
#include "cli/run_command.hpp"
#include "kpool/version.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* usage_text = R"usage(usage: kpool [--endpoint E] [--server-key K --client-key-file F] COMMAND [ARGS]

  ping                          is kpoold there? (version, protocol)
  status [--json]               pools, counters and kernels
  kernelspecs [--json]          the kernelspecs kpoold can start
  acquire POOL [--timeout MS] [--lease S] [--cwd DIR] [--env NAME=VALUE]... [--json]
                                take a warm kernel; prints its connection file, e.g.
                                jupyter console --existing "$(kpool acquire python3)"
  release KERNEL_ID             shut an acquired kernel down
  signal KERNEL_ID SIGNAL       send a signal (INT, TERM, KILL, ... or a number)
  poll KERNEL_ID [--json]       is an acquired kernel still running?
  resize POOL SIZE              keep SIZE warm kernels in POOL from now on (until a reload)
  drain POOL                    stop POOL's idle kernels and refuse acquires until a resize
  keygen SECRET_KEY_FILE        make a CURVE key pair: writes the secret key (mode 0600)
                                and prints the public key
  run INPUT OUTPUT [-p NAME VALUE]... [options]
                                run a notebook, parameterized as papermill does
                                (kpool run --help lists the options)
  exec [--pool P] [--cwd DIR] [--env NAME=VALUE]... [--timeout S] [--json] CODE|-
                                run CODE (or stdin) in a warm kernel of pool P (default
                                python3): its output here, the kernel released afterwards;
                                exit 1 if it raised, 130 interrupted, 138 the kernel died

The endpoint defaults to $KPOOL_ENDPOINT, else kpoold's default for this user. Several daemons:
a comma-separated list, or dns:NAME:PORT (every address of NAME). Then acquire (and exec, run)
asks the daemon most likely to have a warm kernel and fails over to the next; release, signal
and poll find the daemon that owns the kernel; ping, status, resize and drain address every
daemon (status: one table, with a HOST column).
A tcp:// endpoint needs CURVE: the daemon's public key (--server-key, $KPOOL_SERVER_KEY) and
this client's secret key file (--client-key-file, $KPOOL_CLIENT_KEY_FILE).
Exit status: 0 ok, 1 kpoold answered with an error, 2 bad usage, 3 kpoold unreachable.
)usage";

struct usage_error {
    std::string message;
};

struct options {
    std::string endpoint = kpool::client::default_endpoint();
    std::string server_key;
    std::string client_key_file;
    bool as_json = false;
    std::vector<std::string> positional;
    std::map<std::string, std::string> values;   // --timeout, --lease, --cwd
    std::map<std::string, std::string> env_vars; // --env NAME=VALUE
};

options parse_args(int argc, char** argv) {
    options opt;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&]() -> std::string {
            if (i + 1 >= argc) {
                throw usage_error{arg + " needs a value"};
            }
            return argv[++i];
        };
        if (arg == "--endpoint") {
            opt.endpoint = value();
        } else if (arg == "--server-key") {
            opt.server_key = value();
        } else if (arg == "--client-key-file") {
            opt.client_key_file = value();
        } else if (arg == "--json") {
            opt.as_json = true;
        } else if (arg == "--timeout" || arg == "--lease" || arg == "--cwd" || arg == "--pool") {
            opt.values[arg] = value();
        } else if (arg == "--env") {
            const std::string kv = value();
            const auto eq = kv.find('=');
            if (eq == std::string::npos || eq == 0) {
                throw usage_error{"--env takes NAME=VALUE, not '" + kv + "'"};
            }
            opt.env_vars[kv.substr(0, eq)] = kv.substr(eq + 1);
        } else if (arg == "-h" || arg == "--help") {
            std::fputs(usage_text, stdout);
            std::exit(0);
        } else if (arg == "--version") {
            std::printf("kpool %s (control protocol %d)\n", kpool::version,
                        kpool::control_protocol_version);
            std::exit(0);
        } else if (arg.starts_with("--")) {
            throw usage_error{"unknown option " + arg};
        } else {
            opt.positional.push_back(arg);
        }
    }
    if (opt.positional.empty()) {
        throw usage_error{"no command given"};
    }
    return opt;
}

template <class T> T number(const std::string& text, const char* what) {
    try {
        std::size_t used = 0;
        T v{};
        if constexpr (std::is_floating_point_v<T>) {
            v = static_cast<T>(std::stod(text, &used));
        } else {
            v = static_cast<T>(std::stoll(text, &used));
        }
        if (used == text.size()) {
            return v;
        }
    } catch (const std::exception&) {
    }
    throw usage_error{std::string(what) + " must be a number, not '" + text + "'"};
}

int signal_number(const std::string& name) {
    static const std::map<std::string, int> names = {
        {"HUP", SIGHUP},   {"INT", SIGINT},   {"QUIT", SIGQUIT}, {"KILL", SIGKILL},
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"CONT", SIGCONT},
        {"STOP", SIGSTOP}};
    std::string n = name.starts_with("SIG") ? name.substr(3) : name;
    if (auto it = names.find(n); it != names.end()) {
        return it->second;
    }
    return number<int>(name, "SIGNAL");
}

void expect_args(const options& opt, std::size_t n, const char* form) {
    if (opt.positional.size() != n + 1) {
        throw usage_error{std::string("usage: kpool ") + form};
    }
}

kpool::client::daemon_set daemons_of(const options& opt) {
    auto keys = kpool::client::load_curve_keys(opt.server_key, opt.client_key_file);
    if (!keys) {
        throw usage_error{keys.err().message};
    }
    auto endpoints = kpool::client::parse_endpoints(opt.endpoint);
    if (!endpoints) {
        throw usage_error{endpoints.err().message};
    }
    return kpool::client::daemon_set(std::move(*endpoints), std::move(*keys));
}

// Prints one daemon's answer: `on_ok` prints a successful reply in human form. Returns the exit
// status (0 ok, 1 kpoold said no, 3 no answer). `who` prefixes messages when several daemons
// answer.
int print_answer(const options& opt, const kpool::result<json>& reply,
                 const std::function<void(const json&)>& on_ok, const std::string& who = "") {
    if (!reply) {
        std::fprintf(stderr, "kpool: %s%s\n", who.c_str(), reply.err().message.c_str());
        return 3;
    }
    if (!reply->value("ok", false)) {
        const json& e = reply->value("error", json::object());
        std::fprintf(stderr, "kpool: %s%s: %s\n", who.c_str(),
                     e.value("code", std::string("internal")).c_str(),
                     e.value("message", std::string("(no message)")).c_str());
        return 1;
    }
    if (opt.as_json) {
        std::printf("%s\n", reply->dump(2).c_str());
    } else {
        on_ok(*reply);
    }
    return 0;
}

// Sends to the (first) daemon and prints.
int call(const options& opt, json request, std::chrono::milliseconds timeout,
         const std::function<void(const json&)>& on_ok) {
    auto daemons = daemons_of(opt);
    return print_answer(opt, daemons.first().request(request, timeout), on_ok);
}

// Sends to every daemon and prints each answer; the worst exit status wins.
int call_each(const options& opt, const json& request, std::chrono::milliseconds timeout,
              const std::function<void(const json&, const std::string&)>& on_ok) {
    auto daemons = daemons_of(opt);
    int worst = 0;
    for (const auto& e : daemons.endpoints()) {
        const std::string who = daemons.endpoints().size() > 1 ? e + ": " : "";
        worst = std::max(worst, print_answer(opt, daemons.daemon(e).request(request, timeout),
                                             [&](const json& r) { on_ok(r, who); }, who));
    }
    return worst;
}

// A request about a kernel, to the daemon that owns it.
int call_for_kernel(const options& opt, const std::string& kernel_id, const json& request,
                    std::chrono::milliseconds timeout, const std::function<void(const json&)>& on_ok) {
    auto daemons = daemons_of(opt);
    return print_answer(opt, daemons.request_for_kernel(kernel_id, request, timeout).reply, on_ok);
}

int status(const options& opt, std::chrono::milliseconds timeout) {
    auto daemons = daemons_of(opt);
    if (daemons.endpoints().size() == 1) {
        return print_answer(opt, daemons.first().request({{"op", "status"}}, timeout),
                            [](const json& r) { std::fputs(kpool::client::format_status(r).c_str(), stdout); });
    }
    auto answers = daemons.statuses(timeout);
    std::vector<kpool::client::daemon_status> all;
    json as_json = json::array();
    int worst = 0;
    for (auto& a : answers) {
        kpool::client::daemon_status d{a.endpoint, std::nullopt, ""};
        if (a.reply && a.reply->value("ok", false)) {
            d.status = *a.reply;
            as_json.push_back({{"endpoint", a.endpoint}, {"status", *a.reply}});
        } else {
            d.error = a.reply ? a.reply->value("error", json::object()).value("message", std::string())
                              : a.reply.err().message;
            worst = std::max(worst, a.reply ? 1 : 3);
            as_json.push_back({{"endpoint", a.endpoint}, {"error", d.error}});
        }
        all.push_back(std::move(d));
    }
    if (opt.as_json) {
        std::printf("%s\n", as_json.dump(2).c_str());
    } else {
        std::fputs(kpool::client::format_statuses(all).c_str(), stdout);
    }
    return worst;
}

int keygen(const std::string& path) {
    const auto [public_key, secret_key] = kpool::client::make_curve_keypair();
    // O_EXCL: never overwrite a key someone relies on.
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        std::fprintf(stderr, "kpool: cannot create %s: %s\n", path.c_str(), std::strerror(errno));
        return 1;
    }
    const std::string text = secret_key + "\n";
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    if (::close(fd) != 0 || !written) {
        std::fprintf(stderr, "kpool: cannot write %s: %s\n", path.c_str(), std::strerror(errno));
        return 1;
    }
    std::printf("%s\n", public_key.c_str());
    return 0;
}

int run(const options& opt) {
    const std::string& cmd = opt.positional[0];
    const auto quick = 5000ms;
    if (cmd == "ping") {
        expect_args(opt, 0, "ping");
        auto daemons = daemons_of(opt);
        int worst = 0;
        for (const auto& e : daemons.endpoints()) {
            worst = std::max(worst, print_answer(opt, daemons.daemon(e).request({{"op", "ping"}}, quick),
                                                 [&](const json& r) {
                                                     std::printf("kpoold %s (protocol %d) at %s\n",
                                                                 r.value("version", "?").c_str(),
                                                                 r.value("protocol", 0), e.c_str());
                                                 }));
        }
        return worst;
    }
    if (cmd == "status") {
        expect_args(opt, 0, "status [--json]");
        return status(opt, quick);
    }
    if (cmd == "kernelspecs") {
        expect_args(opt, 0, "kernelspecs [--json]");
        return call(opt, {{"op", "kernelspecs"}}, quick, [](const json& r) {
            std::fputs(kpool::client::format_kernelspecs(r).c_str(), stdout);
        });
    }
    if (cmd == "acquire") {
        expect_args(opt, 1, "acquire POOL [--timeout MS] [--lease S] [--cwd DIR] [--env N=V]... [--json]");
        json req{{"op", "acquire"}, {"pool", opt.positional[1]}};
        auto wait = 30000ms; // the daemon's default
        if (auto it = opt.values.find("--timeout"); it != opt.values.end()) {
            req["timeout_ms"] = number<std::int64_t>(it->second, "--timeout");
            wait = std::chrono::milliseconds(req["timeout_ms"].get<std::int64_t>());
        }
        if (auto it = opt.values.find("--lease"); it != opt.values.end()) {
            req["lease_s"] = number<double>(it->second, "--lease");
        }
        if (auto it = opt.values.find("--cwd"); it != opt.values.end()) {
            req["cwd"] = it->second;
        }
        if (!opt.env_vars.empty()) {
            req["env"] = opt.env_vars;
        }
        auto daemons = daemons_of(opt);
        auto answer = daemons.acquire(req, wait + quick);
        if (answer.reply && answer.reply->value("ok", false) && daemons.endpoints().size() > 1) {
            (*answer.reply)["endpoint"] = answer.endpoint; // which daemon holds it
        }
        return print_answer(opt, answer.reply, [](const json& r) {
            std::printf("%s\n", r.value("connection_file", "").c_str());
        });
    }
    if (cmd == "release") {
        expect_args(opt, 1, "release KERNEL_ID");
        return call_for_kernel(opt, opt.positional[1], {{"op", "release"}, {"kernel_id", opt.positional[1]}},
                               quick, [](const json&) {});
    }
    if (cmd == "signal") {
        expect_args(opt, 2, "signal KERNEL_ID SIGNAL");
        return call_for_kernel(opt, opt.positional[1],
                               {{"op", "signal"},
                                {"kernel_id", opt.positional[1]},
                                {"signum", signal_number(opt.positional[2])}},
                               quick, [](const json&) {});
    }
    if (cmd == "poll") {
        expect_args(opt, 1, "poll KERNEL_ID [--json]");
        return call_for_kernel(opt, opt.positional[1], {{"op", "poll"}, {"kernel_id", opt.positional[1]}},
                               quick, [](const json& r) {
                        if (r.value("alive", false)) {
                            std::printf("running\n");
                        } else {
                            std::printf("exited %lld\n", r.value("exit_code", 0LL));
                        }
                    });
    }
    if (cmd == "resize") {
        expect_args(opt, 2, "resize POOL SIZE");
        return call_each(opt,
                         {{"op", "resize"},
                          {"pool", opt.positional[1]},
                          {"size", number<std::int64_t>(opt.positional[2], "SIZE")}},
                         quick, [](const json& r, const std::string& who) {
                             std::printf("%s%s: size %lld (was %lld)\n", who.c_str(),
                                         r.value("pool", "").c_str(), r.value("size", 0LL),
                                         r.value("previous_size", 0LL));
                         });
    }
    if (cmd == "drain") {
        expect_args(opt, 1, "drain POOL");
        return call_each(opt, {{"op", "drain"}, {"pool", opt.positional[1]}}, quick,
                         [](const json& r, const std::string& who) {
                             std::printf("%s%s: drained (size was %lld)\n", who.c_str(),
                                         r.value("pool", "").c_str(), r.value("previous_size", 0LL));
                         });
    }
    if (cmd == "exec") {
        expect_args(opt, 1, "exec [--pool P] [--cwd DIR] [--env N=V]... [--timeout S] [--json] CODE|-");
        kpool::client::exec_options exec;
        if (auto it = opt.values.find("--pool"); it != opt.values.end()) {
            exec.pool = it->second;
        }
        if (auto it = opt.values.find("--cwd"); it != opt.values.end()) {
            exec.cwd = it->second;
        }
        if (auto it = opt.values.find("--timeout"); it != opt.values.end()) {
            exec.timeout_s = number<double>(it->second, "--timeout");
        }
        exec.env = opt.env_vars;
        exec.as_json = opt.as_json;
        exec.code = opt.positional[1];
        if (exec.code == "-") {
            exec.code.clear();
            char buf[65536];
            for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;) {
                exec.code.append(buf, n);
            }
        }
        auto daemons = daemons_of(opt);
        return kpool::client::run_exec(daemons, exec);
    }
    if (cmd == "keygen") {
        expect_args(opt, 1, "keygen SECRET_KEY_FILE");
        return keygen(opt.positional[1]);
    }
    throw usage_error{"unknown command '" + cmd + "'"};
}

} // namespace

// `kpool run` has papermill's options (-p NAME VALUE, -k, -f ...), so it parses its own words;
// the global options (--endpoint and the CURVE keys) may stand anywhere. Nothing if the command
// is another one.
std::optional<int> maybe_run(int argc, char** argv) {
    std::vector<std::string> rest;
    std::string endpoint = kpool::client::default_endpoint();
    std::string server_key;
    std::string client_key_file;
    bool is_run = false;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        std::string* global = arg == "--endpoint" ? &endpoint
                              : arg == "--server-key" ? &server_key
                              : arg == "--client-key-file" ? &client_key_file
                                                           : nullptr;
        if (global != nullptr && i + 1 < argc) {
            *global = argv[++i];
        } else if (!is_run && rest.empty() && arg == "run") {
            is_run = true;
        } else if (!is_run && !arg.starts_with("-")) {
            return std::nullopt; // another command
        } else {
            rest.push_back(arg);
        }
    }
    if (!is_run) {
        return std::nullopt;
    }
    if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
        std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
        std::fputs(kpool::client::run_usage, stdout);
        return 0;
    }
    auto keys = kpool::client::load_curve_keys(server_key, client_key_file);
    if (!keys) {
        std::fprintf(stderr, "kpool: %s\n", keys.err().message.c_str());
        return 2;
    }
    return kpool::client::run_run(endpoint, *keys, rest);
}

int main(int argc, char** argv) {
    try {
        if (auto status = maybe_run(argc, argv)) {
            return *status;
        }
        return run(parse_args(argc, argv));
    } catch (const usage_error& e) {
        std::fprintf(stderr, "kpool: %s\n\n%s", e.message.c_str(), usage_text);
        return 2;
    }
}
