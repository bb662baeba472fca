// control_client: one REQ socket per request, so a request that timed out never poisons the next.
#include "client/control_client.hpp"

#include "client/connection_events.hpp"

#include "config/paths.hpp"
#include "protocol/text.hpp"

#include <sys/stat.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kpool::client {

std::string default_endpoint() {
    if (const char* env = std::getenv("KPOOL_ENDPOINT"); env != nullptr && *env != '\0') {
        return env;
    }
    return config::default_control_endpoint(config::default_runtime_dir());
}

namespace {

std::string trimmed(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) {
        s.pop_back();
    }
    return s;
}

std::string env_or(std::string value, const char* name) {
    if (value.empty()) {
        if (const char* env = std::getenv(name); env != nullptr) {
            value = env;
        }
    }
    return value;
}

} // namespace

result<curve_keys> load_curve_keys(std::string server_key, std::string client_key_file) {
    server_key = env_or(std::move(server_key), "KPOOL_SERVER_KEY");
    client_key_file = env_or(std::move(client_key_file), "KPOOL_CLIENT_KEY_FILE");
    if (server_key.empty() && client_key_file.empty()) {
        return curve_keys{};
    }
    if (server_key.empty() || client_key_file.empty()) {
        return error{errc::bad_request, "CURVE needs both the server's public key "
                                        "(--server-key / $KPOOL_SERVER_KEY) and a client key "
                                        "file (--client-key-file / $KPOOL_CLIENT_KEY_FILE)"};
    }
    // As ssh refuses a private key others may read: a secret key is not one if it is shared.
    if (struct stat st{}; ::stat(client_key_file.c_str(), &st) == 0 && (st.st_mode & 077) != 0) {
        char mode[8];
        std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
        return error{errc::bad_request, "the client key file " + client_key_file +
                                            " may be read by others (mode " + mode +
                                            "): chmod 600 it (kpool keygen writes it so)"};
    }
    std::ifstream in(client_key_file);
    std::stringstream text;
    text << in.rdbuf();
    curve_keys keys{trimmed(server_key), std::string(40, '\0'), trimmed(text.str())};
    if (!in || keys.client_secret.size() != 40 ||
        zmq_curve_public(keys.client_public.data(), keys.client_secret.c_str()) != 0) {
        return error{errc::bad_request, "cannot read a Z85 secret key from " + client_key_file};
    }
    keys.client_public.resize(40);
    std::uint8_t decoded[32];
    if (keys.server_public.size() != 40 ||
        zmq_z85_decode(decoded, keys.server_public.c_str()) == nullptr) {
        return error{errc::bad_request, "the server key must be 40 characters of Z85 text"};
    }
    return keys;
}

std::pair<std::string, std::string> make_curve_keypair() {
    char public_key[41] = {};
    char secret_key[41] = {};
    if (zmq_curve_keypair(public_key, secret_key) != 0) {
        throw std::runtime_error("this libzmq cannot make CURVE keys");
    }
    return {public_key, secret_key};
}

control_client::control_client(std::string endpoint, curve_keys keys)
    : m_endpoint(std::move(endpoint)), m_keys(std::move(keys)) {}

result<nlohmann::json> control_client::request(const nlohmann::json& req,
                                               std::chrono::milliseconds timeout) {
    const std::string ipc_prefix = "ipc://";
    if (m_endpoint.starts_with("tcp://") && m_keys.empty()) {
        // kpoold takes tcp only with CURVE: without keys the handshake would just be dropped.
        return error{errc::internal,
                     "cannot reach kpoold at " + m_endpoint +
                         ": a tcp:// endpoint needs CURVE keys (--server-key or $KPOOL_SERVER_KEY, "
                         "and --client-key-file or $KPOOL_CLIENT_KEY_FILE)"};
    }
    if (m_endpoint.starts_with(ipc_prefix)) {
        // ZeroMQ would wait quietly for a socket that may never appear: say so at once.
        struct stat st {};
        const std::string path = m_endpoint.substr(ipc_prefix.size());
        if (::stat(path.c_str(), &st) != 0) {
            return error{errc::internal, "cannot reach kpoold at " + m_endpoint +
                                             ": no socket there (is kpoold running?)"};
        }
    }
    try {
        zmq::socket_t socket(m_zmq, zmq::socket_type::req);
        socket.set(zmq::sockopt::linger, 0);
        if (!m_keys.empty()) {
            socket.set(zmq::sockopt::curve_serverkey, m_keys.server_public);
            socket.set(zmq::sockopt::curve_publickey, m_keys.client_public);
            socket.set(zmq::sockopt::curve_secretkey, m_keys.client_secret);
        }
        // A refused handshake is silent on the socket itself; the monitor hears of it.
        // So is a daemon that is not there (connection refused) or goes away mid-request, and
        // one that does not complete the handshake within connect_timeout (libzmq drops such a
        // connection: a disconnect). Only events that mean "no reply will come" are watched:
        // an event on every request (handshake succeeded) would cost each one a wake-up.
        socket.set(zmq::sockopt::handshake_ivl, static_cast<int>(connect_timeout.count()));
        socket.set(zmq::sockopt::connect_timeout, static_cast<int>(connect_timeout.count()));
        connection_monitor watch(m_zmq, socket, lost_connection_events);
        zmq::socket_t& monitor = watch.socket();
        socket.connect(m_endpoint);
        const std::string body = protocol::dump_json(req);
        socket.send(zmq::buffer(body), zmq::send_flags::none);
        zmq::pollitem_t items[] = {{socket.handle(), 0, ZMQ_POLLIN, 0},
                                   {monitor.handle(), 0, ZMQ_POLLIN, 0}};
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (;;) {
            const auto left = std::chrono::ceil<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0 || zmq::poll(items, 2, left) == 0) {
                return error{errc::timeout, "no reply from kpoold at " + m_endpoint + " within " +
                                                std::to_string(timeout.count()) + " ms"};
            }
            if ((items[0].revents & ZMQ_POLLIN) != 0) {
                break;
            }
            zmq::message_t event;
            zmq::message_t address;
            (void)monitor.recv(event, zmq::recv_flags::none);
            (void)monitor.recv(address, zmq::recv_flags::none);
            if (auto lost =
                    lost_connection_error(monitor_event_id(event.to_string_view()), m_endpoint)) {
                return *lost;
            }
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
