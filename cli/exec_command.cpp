// kpool exec: acquire, run one snippet, print as it comes, release.
#include "cli/exec_command.hpp"
#include "cli/duration.hpp"

#include "cli/commands.hpp"
#include "cli/exec_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/remote_exec.hpp"
#include "cli/remote_options.hpp"
#include "cli/stop_signals.hpp"
#include "client/leased_kernel.hpp"
#include "notebook/nbformat.hpp"
#include "notebook/outputs.hpp"
#include "protocol/python_json.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace kpool::cli {
namespace {

using json = nlohmann::json;

} // namespace

int exec_command(client::daemon_set& daemons, const exec_options& options) {
    catch_stop_signals();
    client::acquire_request request{.pool = options.pool,
                                    .cwd = options.cwd,
                                    .env = options.env,
                                    .lease_s = std::nullopt,
                                    .wait = protocol::default_acquire_timeout,
                                    .memory_history =
                                        true}; // one snippet: nothing for the user's history
    if (options.timeout_s) {
        // Should this process be killed outright, the kernel still comes back soon after.
        request.lease_s = *options.timeout_s + 60;
    }
    auto acquired = client::leased_kernel::acquire(daemons, request);
    if (auto* failure = std::get_if<client::acquire_failure>(&acquired)) {
        std::fprintf(stderr, "kpool: %s\n", failure->message.c_str());
        return failure->why == client::acquire_failure::kind::unreachable ? exit_status::unreachable
                                                                          : exit_status::failed;
    }
    auto& kernel = *std::get<std::unique_ptr<client::leased_kernel>>(acquired);

    json cells = json::array({{{"cell_type", "code"}, {"outputs", json::array()}}});
    notebook::output_builder outputs(cells);
    auto hooks = kernel.hooks(stop_requested);
    python_exit exiting;
    hooks.on_iopub = [&](const protocol::wire_message& msg) {
        json out = outputs.apply(msg, 0);
        if (!out.is_null() && !options.as_json && !exiting.swallows(out)) {
            show(out);
        }
    };
    jupyter::execute_request code{.code = options.code,
                                  .silent = false,
                                  .store_history = true,
                                  .stop_on_error = true,
                                  .timeout = std::nullopt};
    if (options.timeout_s) {
        code.timeout =
            std::chrono::milliseconds(static_cast<std::int64_t>(*options.timeout_s * 1000));
    }
    const jupyter::execution done = jupyter::execute(kernel.client(), code, hooks);
    if (options.as_json) {
        json file_form = json::array();
        for (const json& out : cells[0]["outputs"]) {
            file_form.push_back(notebook::output_for_file(out));
        }
        write_all(stdout, protocol::to_json_text(file_form, 1) + "\n");
    }
    if (done.kernel_died) {
        const std::string why = kernel.death_reason();
        std::fprintf(stderr, "kpool: kernel %s died while running the code%s\n",
                     kernel.id().c_str(), why.empty() ? "" : (": " + why).c_str());
        return exit_status::kernel_died;
    }
    if (done.cancelled) {
        std::fprintf(stderr, "kpool: interrupted\n");
        return exit_status::interrupted;
    }
    if (done.timed_out) {
        std::fprintf(stderr, "kpool: the code did not finish within %g s (interrupted)\n",
                     *options.timeout_s);
        return exit_status::failed;
    }
    if (done.reply.value("status", "") == "ok") {
        return exit_status::ok;
    }
    if (options.as_json) { // the outputs were not looked at as they came
        for (const json& out : cells[0]["outputs"]) {
            exiting.swallows(out);
        }
    }
    return exiting.code().value_or(exit_status::failed);
}

int exec_command_line(const invocation& inv) {
    exec_options exec;
    if (auto it = inv.values.find("--pool"); it != inv.values.end()) {
        exec.pool = it->second;
    }
    if (auto it = inv.values.find("--cwd"); it != inv.values.end()) {
        exec.cwd = it->second;
    }
    if (auto it = inv.values.find("--timeout"); it != inv.values.end()) {
        const auto d = parse_duration(it->second, bare_unit::seconds);
        if (!d) {
            throw usage_error{duration_usage("--timeout", it->second, bare_unit::seconds)};
        }
        exec.timeout_s = static_cast<double>(d->value.count()) / 1000;
    }
    exec.env = inv.env;
    exec.as_json = inv.as_json;
    exec.code = inv.words[0];
    if (exec.code == "-") {
        exec.code.clear();
        char buf[65536];
        for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;) {
            exec.code.append(buf, n);
        }
    }
    if (!inv.url.empty()) {
        remote::feed_settings settings;
        if (auto it = inv.values.find("--cacert"); it != inv.values.end()) {
            settings.client.cacert = it->second;
        }
        const auto token = inv.values.find("--token-file");
        resolve_remote(inv.url, token == inv.values.end() ? "" : token->second, settings);
        settings.patience_s =
            std::chrono::duration<double>(protocol::default_acquire_timeout).count();
        return exec_remote(exec, inv.values.count("--pool") > 0, settings);
    }
    if (inv.values.count("--token-file") > 0 || inv.values.count("--cacert") > 0) {
        throw usage_error{"--token-file and --cacert go with --url (a kpool serve)"};
    }
    auto daemons = inv.daemons();
    return exec_command(daemons, exec);
}

} // namespace kpool::cli
