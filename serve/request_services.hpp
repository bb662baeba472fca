// What a request's flow needs of kpool serve (exec_call, run_call, kernel_call, the gateway and
// the spares): the loop, the options, the metrics, the daemons (control_service), the kernels'
// leases, the spares, the registry of held kernels, and the request's life in the server (finished,
// tracked for shut_down, parts retired on the next loop turn). The server provides it; the request
// types include this and never server.hpp, so the server is the only one that knows them all.
#pragma once

#include "serve/control_service.hpp"
#include "serve/kernel_leases.hpp"
#include "serve/serve_metrics.hpp"
#include "serve/serve_options.hpp"

#include <uv.h>
#include <zmq.hpp>

#include <memory>
#include <optional>

namespace kpool::serve {

class held_kernels;
class kernel_call;
class spare_kernels;

class request_services : public control_service {
public:
    virtual const serve_options& options() const = 0;
    virtual serve_metrics& metrics() = 0;
    virtual uv_loop_t* loop() const = 0;
    virtual zmq::context_t& zmq() = 0;
    // The kernels requests, spares and the gateway hold, and their lease policy.
    virtual kernel_leases& leases() = 0;
    virtual spare_kernels& spares() = 0;
    // Obtains kernels for all of them and watches those held (serve/held_kernels.hpp).
    virtual held_kernels& held() = 0;
    // An admitted request has its answer out and its kernel back.
    virtual void request_finished() = 0;
    // A request got a kernel of `pool` (as it asked for it) at `at`, and gave it back: how fast
    // kernels come round says a refused caller's turn (retry_after). `used` false: a kernel
    // given back before the request could use it (a dead spare), whose hold says nothing.
    virtual void kernel_taken(const std::string& pool,
                              std::chrono::steady_clock::time_point at) = 0;
    virtual void kernel_returned(const std::string& pool,
                                 std::chrono::steady_clock::time_point taken, bool used) = 0;
    // When requests already wait for a kernel of `pool` and one arriving now would wait past the
    // queue timeout behind them, it is refused at once with its turn (the Retry-After, returned
    // here): it would only be refused later, having held a place that callers told to come back now
    // need.
    virtual std::optional<int> refusal_at_once(const std::string& pool) = 0;
    // A request running code, for shut_down to stop after its grace.
    virtual void track(const std::shared_ptr<kernel_call>& call) = 0;
    // Destroys `thing` (a session, a kernel's channels) on the next loop turn: a callback of its
    // own may be on the stack now.
    template <class T>
    void retire(std::unique_ptr<T> thing) {
        retire_later(std::shared_ptr<void>(std::move(thing)));
    }

protected:
    ~request_services() = default;
    virtual void retire_later(std::shared_ptr<void> thing) = 0;
};

} // namespace kpool::serve
