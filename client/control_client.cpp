// control_client: one REQ socket per request, so a request that timed out never poisons the next.
#include "client/control_client.hpp"

#include "config/paths.hpp"
#include "protocol/control.hpp"

#include <sys/stat.h>

#include <cstdlib>

namespace kpool::client {

std::string default_endpoint() {
    if (const char* env = std::getenv("KPOOL_ENDPOINT"); env != nullptr && *env != '\0') {
        return env;
    }
    return config::default_control_endpoint(config::default_runtime_dir());
}

control_client::control_client(std::string endpoint) : m_endpoint(std::move(endpoint)) {}

result<nlohmann::json> control_client::request(const nlohmann::json& req,
                                               std::chrono::milliseconds timeout) {
    const std::string ipc_prefix = "ipc://";
    if (m_endpoint.starts_with(ipc_prefix)) {
        // ZeroMQ would wait quietly for a socket that may never appear: say so at once.
        struct stat st{};
        const std::string path = m_endpoint.substr(ipc_prefix.size());
        if (::stat(path.c_str(), &st) != 0) {
            return error{errc::internal, "cannot reach kpoold at " + m_endpoint +
                                             ": no socket there (is kpoold running?)"};
        }
    }
    try {
        zmq::socket_t socket(m_zmq, zmq::socket_type::req);
        socket.set(zmq::sockopt::linger, 0);
        socket.connect(m_endpoint);
        const std::string body = protocol::dump_json(req);
        socket.send(zmq::buffer(body), zmq::send_flags::none);
        zmq::pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
        if (zmq::poll(&item, 1, timeout) == 0) {
            return error{errc::timeout, "no reply from kpoold at " + m_endpoint + " within " +
                                            std::to_string(timeout.count()) + " ms"};
        }
        zmq::message_t reply;
        (void)socket.recv(reply, zmq::recv_flags::none);
        auto j = nlohmann::json::parse(reply.to_string_view(), nullptr, false);
        if (j.is_discarded() || !j.is_object()) {
            return error{errc::internal, "kpoold sent a reply that is not a JSON object"};
        }
        return j;
    } catch (const zmq::error_t& e) {
        return error{errc::internal, "cannot talk to kpoold at " + m_endpoint + ": " + e.what()};
    }
}

} // namespace kpool::client
