// kpool feed's job lines (remote/serve_job.hpp): what each becomes as a request, what a wrong
// one is told, and the answer lines.
#include "remote/serve_job.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

using kpool::remote::answer_of;
using kpool::remote::http_answer;
using kpool::remote::read_job;

TEST_CASE("serve job: code goes to /v1/exec with its fields, the id as the request id") {
    auto job = read_job(R"({"id": "job-1", "code": "1+1", "timeout": 3, "env": {"A": "b"}})", 7);
    REQUIRE(job);
    CHECK(job->request.target == "/v1/exec");
    CHECK(job->line == 7);
    const auto body = nlohmann::json::parse(job->request.body);
    CHECK(body == nlohmann::json{{"code", "1+1"}, {"timeout", 3}, {"env", {{"A", "b"}}}});
    CHECK(job->request.headers == std::vector<std::string>{"X-Request-Id: job-1"});
    auto odd = read_job(R"({"id": "a b/c", "code": "1"})", 1);
    REQUIRE(odd);
    CHECK(odd->request.headers.empty()); // not a plain name: kpool serve makes one
}

TEST_CASE("serve job: a notebook under the root, its path %-encoded, its outputs asked for") {
    auto job = read_job(
        R"({"id": 2, "root_notebook": "a dir/r&d.ipynb", "parameters": {"b": 2, "a": 1}})", 1);
    REQUIRE(job);
    CHECK(job->request.target == "/v1/run/a%20dir/r%26d.ipynb?format=outputs");
    CHECK(job->request.body == R"({"parameters":{"b":2,"a":1}})"); // the caller's order kept
    CHECK(job->request.headers == std::vector<std::string>{"X-Request-Id: 2"});
}

TEST_CASE("serve job: a local notebook is read and sent; with an output the notebook comes back") {
    const auto dir = std::filesystem::temp_directory_path() / "kpool-serve-job-test";
    std::filesystem::create_directories(dir);
    const std::string nb = (dir / "in.ipynb").string();
    std::ofstream(nb) << R"({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})";
    auto job = read_job(R"({"notebook": ")" + nb + R"(", "output": "out.ipynb"})", 3);
    REQUIRE(job);
    CHECK(job->request.target == "/v1/run");
    CHECK(nlohmann::json::parse(job->request.body)["notebook"]["nbformat"] == 4);
    CHECK(job->id.is_null());
    std::filesystem::remove_all(dir);
}

TEST_CASE("serve job: what is wrong with a line, with its number") {
    for (const auto& [line, says] : std::vector<std::pair<std::string, std::string>>{
             {"{", "line 5: not JSON"},
             {"[1]", "line 5: a job is a JSON object"},
             {R"({"id": 1})", "one of \"code\""},
             {R"({"code": "1", "notebook": "x"})", "one of \"code\""},
             {R"({"code": 1})", "\"code\" must be a non-empty string"},
             {R"({"code": "1", "parameters": {}})", "go with a notebook"},
             {R"({"code": "1", "kernal": "x"})", "unknown field \"kernal\""},
             {R"({"notebook": "/nonexistent.ipynb"})",
              "cannot read the notebook /nonexistent.ipynb"},
         }) {
        CAPTURE(line);
        auto job = read_job(line, 5);
        REQUIRE_FALSE(job);
        CHECK(job.err().message.find(says) != std::string::npos);
        CHECK(job.err().message.starts_with("line 5: "));
    }
}

TEST_CASE("serve job: answer lines say the status, the outcome and what came back") {
    auto job = read_job(R"({"id": 9, "code": "1/0"})", 4);
    REQUIRE(job);
    http_answer a;
    a.status = 200;
    a.headers["kpool-outcome"] = "error";
    a.body = R"({"status": "error", "ename": "ZeroDivisionError"})";
    a.seconds = 0.0123;
    auto line = answer_of(*job, a, 2);
    CHECK_FALSE(line.ok);
    CHECK(
        line.line.dump() ==
        R"({"id":9,"line":4,"attempts":2,"status":200,"ms":12.3,"outcome":"error","result":{"ename":"ZeroDivisionError","status":"error"}})");
    a.status = 504;
    a.headers.clear();
    a.body = "not json";
    line = answer_of(*job, a, 1);
    CHECK(line.line["error"]["error"] == "http_504");
    CHECK(line.line["error"]["message"] == "not json");
}
