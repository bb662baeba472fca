// access_policy: ZAP requests in, allow/deny out (RFC 27 framing).
#include "daemon/service/access_policy.hpp"

#include <zmq.h>

#include <charconv>

namespace kpool::daemon {
namespace {

// ZAP request frames: version, request id, domain, address, identity, mechanism, credentials...
constexpr std::size_t zap_fixed_frames = 6;

bool parse_uint(std::string_view text, unsigned& out) {
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size() && !text.empty();
}

access_decision deny(std::string reason) { return {false, {}, std::move(reason)}; }

access_decision decide_peer_credentials(const access_policy& policy, std::string_view address) {
    // The last three ':'-separated fields are uid, gid, pid.
    std::vector<std::string_view> fields;
    for (std::size_t start = 0;;) {
        const std::size_t colon = address.find(':', start);
        fields.push_back(
            address.substr(start, colon == std::string_view::npos ? colon : colon - start));
        if (colon == std::string_view::npos) {
            break;
        }
        start = colon + 1;
    }
    unsigned uid = 0;
    unsigned gid = 0;
    if (fields.size() < 3 || !parse_uint(fields[fields.size() - 3], uid) ||
        !parse_uint(fields[fields.size() - 2], gid)) {
        return deny("no peer credentials in the connection's address");
    }
    const std::string user = "uid:" + std::to_string(uid);
    if (uid == policy.own_uid || policy.allowed_uids.count(uid) != 0 ||
        policy.allowed_gids.count(gid) != 0) {
        return {true, user, {}};
    }
    return deny("uid " + std::to_string(uid) + " (gid " + std::to_string(gid) +
                ") is not in allowed_uids or allowed_gids");
}

access_decision decide_curve(const access_policy& policy, const std::string& key) {
    if (key.size() != 32) {
        return deny("malformed CURVE key");
    }
    char z85[41] = {};
    zmq_z85_encode(z85, reinterpret_cast<const std::uint8_t*>(key.data()), key.size());
    if (policy.allowed_curve_keys.count(key) != 0) {
        return {true, z85, {}};
    }
    return deny(std::string("CURVE key ") + z85 + " is not in curve_allowed_keys");
}

} // namespace

access_decision decide(const access_policy& policy, const std::vector<std::string>& request) {
    if (request.size() < zap_fixed_frames || request[0] != "1.0") {
        return deny("malformed ZAP request");
    }
    const std::string& mechanism = request[5];
    if (mechanism == "NULL") {
        if (!policy.allowed_curve_keys.empty()) {
            return deny("this endpoint requires CURVE");
        }
        return decide_peer_credentials(policy, request[3]);
    }
    if (mechanism == "CURVE" && request.size() == zap_fixed_frames + 1 &&
        !policy.allowed_curve_keys.empty()) {
        return decide_curve(policy, request[6]);
    }
    return deny("mechanism " + mechanism.substr(0, 16) + " is not accepted here");
}

std::vector<std::string> zap_reply(const std::vector<std::string>& request,
                                   const access_decision& decision) {
    const std::string request_id = request.size() > 1 ? request[1] : std::string();
    return {"1.0",
            request_id,
            decision.allowed ? "200" : "400",
            decision.allowed ? "OK" : decision.reason,
            decision.user_id,
            ""};
}

} // namespace kpool::daemon
