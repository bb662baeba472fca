// Job lines in, requests out; answers in, answer lines (and executed notebooks) out.
#include "remote/serve_job.hpp"

#include "notebook/nbformat.hpp"
#include "protocol/text.hpp"
#include "runner/notebook_files.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace kpool::remote {
namespace {

using json = nlohmann::json;
using ordered = nlohmann::ordered_json;

constexpr const char* job_fields =
    "id, code, notebook, root_notebook, parameters, output, kernel, timeout, cwd, env";

// What kpool serve takes as a request id of the caller's own (docs/serve.md: a plain name).
std::optional<std::string> request_id_of(const ordered& id) {
    std::string text;
    if (id.is_string()) {
        text = id.get<std::string>();
    } else if (id.is_number_integer()) {
        text = id.dump();
    } else {
        return std::nullopt;
    }
    if (text.empty() || text.size() > 128) {
        return std::nullopt;
    }
    for (const char c : text) {
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
            return std::nullopt;
        }
    }
    return text;
}

// A path under --root in a URL: every byte but the unreserved ones and '/' %-encoded.
std::string url_path(const std::string& path) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (const char ch : path) {
        const auto c = static_cast<unsigned char>(ch);
        if (std::isalnum(c) || c == '/' || c == '-' || c == '_' || c == '.' || c == '~') {
            out += ch;
        } else {
            out += '%';
            out += hex[c >> 4];
            out += hex[c & 15];
        }
    }
    return out;
}

result<std::string> read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return error{errc::bad_request, "cannot read the notebook " + path};
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// The answer's JSON body, or its text when it is none.
json body_of(const http_answer& a) {
    json body = json::parse(a.body, nullptr, false);
    if (!body.is_discarded()) {
        return body;
    }
    std::string text = a.body.substr(0, 2000);
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) {
        text.pop_back();
    }
    return {{"error", "http_" + std::to_string(a.status)}, {"message", text}};
}

// Writes a run's executed notebook to the job's output, with papermill's paths those of the
// local files (kpool serve knew neither); `kept` gets the notebook as written.
status write_output(const serve_job& job, const std::string& text, json& kept) {
    auto nb = notebook::read_notebook(text, "the executed notebook");
    if (!nb) {
        return nb.err();
    }
    if (nb->contains("metadata") && (*nb)["metadata"].contains("papermill")) {
        json& papermill = (*nb)["metadata"]["papermill"];
        if (!job.notebook.empty()) {
            papermill["input_path"] = job.notebook;
        }
        papermill["output_path"] = job.output;
    }
    kept = *nb;
    const std::string file = notebook::write_notebook(*nb);
    if (job.output == "-") { // papermill's stdout: the notebook once, at the end
        std::fwrite(file.data(), 1, file.size(), stdout);
        std::fflush(stdout);
        return ok_status();
    }
    return runner::write_atomically(job.output, file);
}

ordered line_head(const serve_job& job, unsigned attempts) {
    return {{"id", job.id}, {"line", job.line}, {"attempts", attempts}};
}

} // namespace

result<serve_job> read_job(const std::string& text, std::size_t line) {
    const std::string where = "line " + std::to_string(line) + ": ";
    ordered j = ordered::parse(text, nullptr, false);
    if (j.is_discarded()) {
        return error{errc::bad_request, where + "not JSON"};
    }
    if (!j.is_object()) {
        return error{errc::bad_request, where + "a job is a JSON object"};
    }
    serve_job job;
    job.line = line;
    job.id = j.contains("id") ? json::parse(j["id"].dump()) : json();
    const int kinds = static_cast<int>(j.contains("code")) +
                      static_cast<int>(j.contains("notebook")) +
                      static_cast<int>(j.contains("root_notebook"));
    if (kinds != 1) {
        return error{errc::bad_request,
                     where + "a job has one of \"code\", \"notebook\" (a local file) or "
                             "\"root_notebook\" (a path under the server's --root)"};
    }
    ordered body = ordered::object();
    for (const auto& [key, value] : j.items()) {
        if (key == "id") {
            continue;
        }
        if (key == "code" || key == "notebook" || key == "root_notebook" || key == "output") {
            if (!value.is_string() || value.get<std::string>().empty()) {
                return error{errc::bad_request,
                             where + "\"" + key + "\" must be a non-empty string"};
            }
        }
        if (key == "code") {
            body["code"] = value;
        } else if (key == "notebook") {
            job.notebook = value.get<std::string>();
        } else if (key == "output") {
            job.output = value.get<std::string>();
        } else if (key == "root_notebook") {
            job.request.target = "/v1/run/" + url_path(value.get<std::string>());
        } else if (key == "parameters" || key == "kernel" || key == "timeout" || key == "cwd" ||
                   key == "env") {
            body[key] = value; // kpool serve checks them, and says what is wrong
        } else {
            return error{errc::bad_request, where + "unknown field \"" + protocol::echo_safe(key) +
                                                "\" (fields: " + job_fields + ")"};
        }
    }
    if (j.contains("code")) {
        if (j.contains("parameters") || j.contains("output")) {
            return error{errc::bad_request,
                         where + "\"parameters\" and \"output\" go with a notebook, not \"code\""};
        }
        job.request.target = "/v1/exec";
    } else {
        if (!job.notebook.empty()) {
            auto nb_text = read_text(job.notebook);
            if (!nb_text) {
                return error{errc::bad_request, where + nb_text.err().message};
            }
            auto nb = ordered::parse(*nb_text, nullptr, false);
            if (nb.is_discarded() || !nb.is_object()) {
                return error{errc::bad_request,
                             where + job.notebook + " is not a notebook (not a JSON object)"};
            }
            body["notebook"] = std::move(nb);
            job.request.target = "/v1/run";
        }
        // The executed notebook when it is to be written; else its outputs alone.
        if (job.output.empty()) {
            job.request.target += "?format=outputs";
        }
    }
    job.request.body = body.dump();
    if (auto rid = request_id_of(j.value("id", ordered()))) {
        job.request.headers.push_back("X-Request-Id: " + *rid);
    }
    return job;
}

result<serve_job> make_notebook_job(const notebook_job& spec) {
    ordered nb = ordered::parse(spec.notebook_text, nullptr, false);
    if (nb.is_discarded() || !nb.is_object()) {
        return error{errc::bad_request, spec.input + " is not a notebook (not a JSON object)"};
    }
    ordered body = {{"notebook", std::move(nb)}, {"parameters", spec.parameters}};
    if (!spec.kernel.empty()) {
        body["kernel"] = spec.kernel;
    }
    if (spec.timeout_s) {
        body["timeout"] = *spec.timeout_s;
    }
    if (!spec.cwd.empty()) {
        body["cwd"] = spec.cwd;
    }
    if (!spec.env.empty()) {
        body["env"] = spec.env;
    }
    if (spec.report_mode) {
        body["report_mode"] = true;
    }
    serve_job job;
    job.id = spec.id;
    job.line = spec.line;
    job.notebook = spec.input;
    job.output = spec.output;
    job.request.target = "/v1/run";
    job.request.body = body.dump();
    return job;
}

job_answer answer_of(const serve_job& job, const http_answer& a, unsigned attempts) {
    job_answer out;
    out.line = line_head(job, attempts);
    out.line["status"] = a.status;
    out.line["ms"] = std::round(a.seconds * 1e5) / 100;
    const auto outcome = a.headers.find("kpool-outcome");
    if (outcome != a.headers.end()) {
        out.line["outcome"] = outcome->second;
    }
    if (const auto warned = a.headers.find("kpool-warnings"); warned != a.headers.end()) {
        const json list = json::parse(warned->second, nullptr, false);
        if (list.is_array()) {
            out.line["warnings"] = list; // papermill's: "Passed unknown parameter: x"
        }
    }
    const bool notebook_back = a.status == 200 && job.is_run() && !job.output.empty();
    json body = notebook_back ? json() : body_of(a);
    // A run cut short (502, 504) still brings the notebook so far: written, as kpool run writes it.
    if (!job.output.empty() && body.is_object() && body.contains("notebook")) {
        if (auto st = write_output(job, body["notebook"].dump(), out.notebook); st) {
            out.line["output"] = job.output;
        }
        body.erase("notebook");
    }
    if (notebook_back) {
        if (auto st = write_output(job, a.body, out.notebook); !st) {
            out.line["error"] = ordered{{"error", "cannot_write"}, {"message", st.err().message}};
            return out;
        }
        out.line["output"] = job.output;
    } else if (a.status == 200) {
        out.line["result"] = body;
    } else {
        out.line["error"] = body;
    }
    out.ok = a.status == 200 && (outcome == a.headers.end() || outcome->second != "error");
    return out;
}

job_answer unanswered(const serve_job& job, const std::string& error, const std::string& message,
                      unsigned attempts) {
    job_answer out;
    out.line = line_head(job, attempts);
    out.line["status"] = nullptr;
    out.line["error"] = ordered{{"error", error}, {"message", message}};
    return out;
}

job_answer bad_line(std::size_t line, const std::string& message) {
    job_answer out;
    out.line = {{"id", nullptr},
                {"line", line},
                {"attempts", 0},
                {"status", nullptr},
                {"error", ordered{{"error", "bad_job"}, {"message", message}}}};
    return out;
}

} // namespace kpool::remote
