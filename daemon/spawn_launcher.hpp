// Launches kernels with uv_spawn: fork+exec in a new session, output captured through pipes.
#pragma once

#include "daemon/launcher.hpp"

#include <uv.h>

namespace kpool::daemon {

class spawn_launcher final : public launcher {
public:
    explicit spawn_launcher(uv_loop_t* loop) : m_loop(loop) {}
    result<std::unique_ptr<launched_process>> launch(const launch_spec& spec,
                                                     launch_callbacks callbacks) override;

private:
    uv_loop_t* m_loop;
};

} // namespace kpool::daemon
