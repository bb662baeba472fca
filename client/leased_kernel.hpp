// A kernel taken from kpoold for as long as this object lives: acquired with the client's cwd and
// env, connected (iopub proven subscribed), released when it goes, whatever happened.
#pragma once

#include "client/daemon_set.hpp"
#include "jupyter/kernel_handle.hpp"
#include "protocol/control.hpp"

#include <functional>
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
    std::chrono::milliseconds wait = protocol::default_acquire_timeout; // for a warm kernel
    // An IPython kernel's history in memory (a one-shot run, as papermill's kernels keep it).
    bool memory_history = false;
};

// Why no kernel: kpoold said no (or the kernel it gave was unusable), or no daemon answered.
struct acquire_failure {
    enum class kind { refused, unreachable };
    kind why;
    std::string message;
};

class leased_kernel final : public jupyter::kernel_handle {
public:
    // Acquires, connects and waits until the kernel answers kernel_info with iopub subscribed.
    static std::variant<std::unique_ptr<leased_kernel>, acquire_failure>
    acquire(daemon_set& daemons, const acquire_request& request);

    ~leased_kernel() override; // releases the kernel
    leased_kernel(const leased_kernel&) = delete;
    leased_kernel& operator=(const leased_kernel&) = delete;

    jupyter::kernel_client& client() override { return *m_client; }
    const nlohmann::json& kernel_info() const override { return m_kernel_info; }
    const std::string& id() const override { return m_id; }

    // kpoold's poll: false once the kernel process has exited.
    bool alive();
    // kpoold's signal op with SIGINT (an interrupt_request for message-mode kernels).
    void interrupt();
    // Hooks for jupyter::execute using the two above; `cancelled` says when the caller gives up
    // (the kernel is then interrupted).
    jupyter::execute_hooks hooks(std::function<bool()> cancelled) override;
    // kpoold's word on why it exited, from the poll that found it gone.
    std::string death_reason() const override { return m_death_reason; }

private:
    std::string m_death_reason;
    leased_kernel(daemon_set& daemons, std::string id, const protocol::connection_info& info);
    // A request about this kernel, to the daemon that handed it out.
    result<nlohmann::json> request(const nlohmann::json& req);

    daemon_set& m_daemons;
    std::string m_id;
    zmq::context_t m_zmq;
    std::unique_ptr<jupyter::kernel_client> m_client;
    nlohmann::json m_kernel_info;
};

} // namespace kpool::client
