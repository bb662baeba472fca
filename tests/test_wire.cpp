// The Jupyter wire protocol: interoperability with jupyter_client's Session and bad input.
#include "protocol/hmac.hpp"
#include "protocol/wire.hpp"

#include <doctest/doctest.h>

using namespace kpool::protocol;

namespace {

// Produced by jupyter_client 7.4.9: Session(key=KEY, session="sess-1").serialize(...).
const std::string session_key = "0123456789abcdef0123456789abcdef0"; // 33 bytes, like a real key
const std::vector<std::string> jupyter_client_frames = {
    "<IDS|MSG>",
    "c2ae3fa9a5cc495599ed5f531c17ef9ab3d635f3b7faec48d34be1ca4f443d07",
    R"({"msg_id": "m-1", "msg_type": "kernel_info_reply", "username": "u", "session": "sess-1", "date": "2026-11-29T00:00:00.000000Z", "version": "5.3"})",
    R"({"msg_id": "p-1"})",
    "{}",
    R"({"status": "ok", "implementation": "ipython"})",
};

} // namespace

TEST_SUITE("wire") {
    TEST_CASE("parses and verifies a message signed by jupyter_client") {
        auto msg = parse(jupyter_client_frames, session_key);
        REQUIRE(msg.ok());
        CHECK(msg->msg_type() == "kernel_info_reply");
        CHECK(msg->parent_msg_id() == "p-1");
        CHECK(msg->content["implementation"] == "ipython");
        CHECK(msg->identities.empty());
    }

    TEST_CASE("a tampered frame or another key fails verification") {
        auto frames = jupyter_client_frames;
        frames[5] = R"({"status": "error"})";
        CHECK_FALSE(parse(frames, session_key).ok());
        CHECK_FALSE(parse(jupyter_client_frames, "other session_key").ok());
        CHECK(parse(frames, session_key).err().message == "wire message has an invalid signature");
    }

    TEST_CASE("an empty session_key means unsigned messages") {
        auto frames = jupyter_client_frames;
        frames[1] = "";
        CHECK(parse(frames, "").ok());
    }

    TEST_CASE("serialize then parse round-trips with identities and buffers") {
        auto msg = make_message("execute_request", "s1", {{"code", "1+1"}});
        msg.identities = {"peer"};
        msg.buffers = {std::string("raw\0bytes", 9)};
        auto frames = serialize(msg, session_key);
        REQUIRE(frames.size() == 8);
        CHECK(frames[0] == "peer");
        CHECK(frames[1] == "<IDS|MSG>");
        CHECK(frames[2] ==
              hmac_sha256_hex(session_key, {frames[3], frames[4], frames[5], frames[6]}));
        auto back = parse(frames, session_key);
        REQUIRE(back.ok());
        CHECK(back->msg_id() == msg.msg_id());
        CHECK(back->header["version"] == "5.3");
        CHECK(back->header["session"] == "s1");
        CHECK(back->content["code"] == "1+1");
        CHECK(back->identities == std::vector<std::string>{"peer"});
        CHECK(back->buffers.size() == 1);
    }

    TEST_CASE("every message gets a unique msg_id and an ISO 8601 UTC date") {
        auto a = make_message("x", "s");
        auto b = make_message("x", "s");
        CHECK(a.msg_id() != b.msg_id());
        const std::string date = a.header["date"];
        CHECK(date.size() == 27);
        CHECK(date[10] == 'T');
        CHECK(date.back() == 'Z');
    }

    TEST_CASE("bad input is an error, never a crash") {
        using frames_t = std::vector<std::string>;
        const std::vector<std::pair<frames_t, std::string>> table = {
            {{}, "wire message has no <IDS|MSG> delimiter"},
            {{"a", "b"}, "wire message has no <IDS|MSG> delimiter"},
            {{"<IDS|MSG>", "", "{}", "{}"},
             "wire message has fewer than 5 frames after the delimiter"},
            {{"<IDS|MSG>", "", "not json", "{}", "{}", "{}"},
             "wire message frame 2 is not a JSON object"},
            {{"<IDS|MSG>", "", "{}", "[]", "{}", "{}"},
             "wire message frame 3 is not a JSON object"},
            {{"<IDS|MSG>", "", "{}", "{}", "{}", "{}"}, "wire message header has no msg_type"},
            {{"<IDS|MSG>", "", "{\"msg_type\":\"\xff\"}", "{}", "{}", "{}"},
             "wire message frame 2 is not a JSON object"},
        };
        for (const auto& [frames, message] : table) {
            auto r = parse(frames, "");
            REQUIRE_FALSE(r.ok());
            CHECK(r.err().code == kpool::errc::bad_request);
            CHECK(r.err().message == message);
        }
    }
}
