// Who may talk to the control socket: the decision behind kpoold's ZAP handler, as pure code.
//
// libzmq asks a ZAP handler (RFC 27) about every new connection and accepts everyone when there
// is none, so kpoold always answers when access is restricted, and answers "no" to anything it
// does not recognise (fail closed):
//   ipc, NULL mechanism: the peer's uid/gid, which libzmq takes from SO_PEERCRED and passes as
//     the request's address ("...:<uid>:<gid>:<pid>"). Allowed: the daemon's own uid, and the
//     configured allowed_uids and allowed_gids (the peer's primary group).
//   tcp, CURVE: the client's long-term public key must be in curve_allowed_keys.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace kpool::daemon {

struct access_policy {
    unsigned own_uid = 0;
    std::set<unsigned> allowed_uids;
    std::set<unsigned> allowed_gids;
    std::set<std::string> allowed_curve_keys; // 32-byte binary public keys
};

struct access_decision {
    bool allowed = false;
    std::string user_id; // "uid:1000" or the Z85 key: who it is, for logs
    std::string reason;  // why not
};

// Decides on one ZAP request (its frames, envelope removed).
access_decision decide(const access_policy& policy, const std::vector<std::string>& request);

// The ZAP reply frames for a request and a decision.
std::vector<std::string> zap_reply(const std::vector<std::string>& request,
                                   const access_decision& decision);

} // namespace kpool::daemon
