// kpool exec through a kpool serve: one streamed request, retried only while nothing ran.
#include "cli/remote_exec.hpp"

#include "cli/exec_output.hpp"
#include "cli/exit_status.hpp"
#include "cli/stop_signals.hpp"
#include "protocol/python_json.hpp"

#include <chrono>
#include <cstdio>
#include <thread>

namespace kpool::cli {
namespace {

using json = nlohmann::json;

// File-form text (lists of lines) joined, as show() takes it.
json in_memory(json output) {
    auto join = [](json& v) {
        if (v.is_array()) {
            std::string text;
            for (const json& part : v) {
                text += part.is_string() ? part.get<std::string>() : "";
            }
            v = text;
        }
    };
    if (output.contains("text")) {
        join(output["text"]);
    }
    if (output.contains("data") && output["data"].is_object()) {
        for (auto& [mime, value] : output["data"].items()) {
            if (mime.starts_with("text/") || mime == "image/svg+xml") {
                join(value);
            }
        }
    }
    return output;
}

std::string message_of(const json& body, const std::string& fallback) {
    return body.is_object() && body.contains("message") ? body["message"].get<std::string>()
                                                        : fallback;
}

} // namespace

int exec_remote(const exec_options& o, bool pool_given, const remote::feed_settings& settings) {
    catch_stop_signals();
    json body = {{"code", o.code}};
    if (pool_given) {
        body["kernel"] = o.pool;
    }
    if (o.timeout_s) {
        body["timeout"] = *o.timeout_s;
    }
    if (o.cwd) {
        body["cwd"] = *o.cwd;
    }
    if (!o.env.empty()) {
        body["env"] = o.env;
    }
    python_exit exiting;
    json answer;         // the stream's last line
    std::string pending; // a line not whole yet
    auto on_line = [&](const std::string& line) {
        const json j = json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("output")) {
            const json out = in_memory(j["output"]);
            if (!o.as_json && !exiting.swallows(out)) {
                show(out);
            }
        } else if (j.is_object() && j.contains("answer")) {
            answer = j["answer"];
        }
    };
    remote::http_request request;
    request.target = "/v1/exec";
    request.body = body.dump();
    request.headers = {"Accept: application/x-ndjson"};
    request.on_body = [&](std::string_view piece) {
        pending.append(piece);
        for (std::size_t end; (end = pending.find('\n')) != std::string::npos;) {
            on_line(pending.substr(0, end));
            pending.erase(0, end + 1);
        }
    };
    remote::feed_policy policy(settings.policy);
    const double first = remote::monotonic_seconds();
    std::optional<remote::http_answer> got;
    while (!got) {
        remote::http_client client(settings.client); // a hang-up (Ctrl-C) is this going away
        client.send(request, [&](remote::http_answer a) { got = std::move(a); });
        while (!got && !stop_requested()) {
            client.run_for(200);
        }
        if (!got) { // Ctrl-C: kpool serve sees the hang-up, interrupts the kernel, releases it
            std::fprintf(stderr, "kpool: interrupted\n");
            return exit_status::interrupted;
        }
        const json err = got->status != 0 ? json::parse(got->body, nullptr, false) : json();
        const std::string code = err.is_object() ? err.value("error", "") : "";
        if (remote::classify(got->status, code, got->may_have_run, got->hopeless) !=
            remote::verdict::retry) {
            break;
        }
        const double retry_at = got->status != 0 ? policy.refused(remote::monotonic_seconds(), 1,
                                                                  got->number("retry-after"))
                                                 : policy.unreachable(remote::monotonic_seconds());
        if (retry_at - first > settings.patience_s) {
            std::fprintf(stderr, "kpool: no kernel within %g s: %s\n", settings.patience_s,
                         got->status != 0 ? message_of(err, "").c_str() : got->failure.c_str());
            return got->status != 0 ? exit_status::failed : exit_status::unreachable;
        }
        while (remote::monotonic_seconds() < retry_at && !stop_requested()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        got.reset();
    }
    if (got->status == 0) {
        std::fprintf(stderr, "kpool: %s%s\n", got->failure.c_str(),
                     got->may_have_run ? " (the connection was lost while the code ran)" : "");
        return got->hopeless || !got->may_have_run ? exit_status::unreachable : exit_status::failed;
    }
    if (got->status != 200) { // refused before anything ran: said as the daemon's refusals are
        const json err = json::parse(got->body, nullptr, false);
        std::fprintf(stderr, "kpool: %s\n", message_of(err, got->body).c_str());
        switch (got->status) {
        case 400: return exit_status::usage;
        case 401:
        case 403: return exit_status::unreachable;
        default: return exit_status::failed;
        }
    }
    const int status = answer.value("status", 0);
    const json& result = answer.contains("body") ? answer["body"] : json();
    if (o.as_json) {
        write_all(stdout, protocol::to_json_text(result.value("outputs", json::array()), 1) + "\n");
    }
    switch (status) {
    case 200:
        if (result.value("status", "") == "ok") {
            return exit_status::ok;
        }
        if (o.as_json) { // the outputs were not looked at as they came
            for (const json& out : result.value("outputs", json::array())) {
                exiting.swallows(in_memory(out));
            }
        }
        return exiting.code().value_or(exit_status::failed);
    case 502:
        std::fprintf(stderr, "kpool: %s\n", message_of(result, "the kernel died").c_str());
        return exit_status::kernel_died;
    case 504:
        std::fprintf(stderr, "kpool: the code did not finish within %g s (interrupted)\n",
                     o.timeout_s.value_or(0));
        return exit_status::failed;
    default:
        std::fprintf(stderr, "kpool: %s\n",
                     message_of(result, "the stream ended without its answer").c_str());
        return exit_status::failed;
    }
}

} // namespace kpool::cli
