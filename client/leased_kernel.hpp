// A kernel taken from kpoold for as long as this object lives: acquired with the client's cwd and
// env, connected (iopub proven subscribed), released when it goes, whatever happened. Also the
// SIGINT/SIGTERM handling of the commands that run code (exec, run): a signal is recorded, the
// wait for the kernel wakes up, and the command interrupts the kernel and cleans up.
#pragma once

#include "client/daemon_set.hpp"
#include "jupyter/kernel_client.hpp"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>

namespace kpool::client {

struct acquire_request {
    std::string pool;
    std::optional<std::string> cwd;
    std::map<std::string, std::string> env;
    std::optional<double> lease_s;
    std::chrono::milliseconds wait{30000}; // for a warm kernel
};

// Why no kernel: `exit_status` is what the command exits with (1 kpoold said no, 3 unreachable).
struct acquire_failure {
    int exit_status;
    std::string message;
};

class leased_kernel {
public:
    // Acquires, connects and waits until the kernel answers kernel_info with iopub subscribed.
    static std::variant<std::unique_ptr<leased_kernel>, acquire_failure>
    acquire(daemon_set& daemons, const acquire_request& request);

    ~leased_kernel(); // releases the kernel
    leased_kernel(const leased_kernel&) = delete;
    leased_kernel& operator=(const leased_kernel&) = delete;

    jupyter::kernel_client& client() { return *m_client; }
    const nlohmann::json& kernel_info() const { return m_kernel_info; }
    const std::string& id() const { return m_id; }

    // kpoold's poll: false once the kernel process has exited.
    bool alive();
    // kpoold's signal op with SIGINT (an interrupt_request for message-mode kernels).
    void interrupt();
    // Hooks for jupyter::execute using the two above.
    jupyter::execute_hooks hooks();

private:
    leased_kernel(daemon_set& daemons, std::string id, const protocol::connection_info& info);
    // A request about this kernel, to the daemon that handed it out.
    result<nlohmann::json> request(const nlohmann::json& req);

    daemon_set& m_daemons;
    std::string m_id;
    zmq::context_t m_zmq;
    std::unique_ptr<jupyter::kernel_client> m_client;
    nlohmann::json m_kernel_info;
};

// Exit statuses of the commands that run code (exec, run).
inline constexpr int exit_interrupted = 130; // SIGINT or SIGTERM: the kernel was interrupted
inline constexpr int exit_kernel_died = 138;

// Installs SIGINT and SIGTERM handlers that record the signal (and let blocking waits return).
void catch_stop_signals();
// The signal caught since catch_stop_signals, or 0.
int stop_signal();

} // namespace kpool::client
