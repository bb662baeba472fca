// kernel_process, what runs on a kernel handed out: setup code on shell, the context (cwd, env,
// in-memory history) on control, a sandboxed kernel's working directory; each under a deadline,
// answered once. Launch, probe, heartbeats and stop: kernel_process.cpp.
#include "daemon/process/kernel_process.hpp"

#include "languages/language.hpp"
#include "languages/python.hpp"
#include "protocol/text.hpp"

#include <string>

#include <sys/stat.h>

namespace kpool::daemon {

using json = nlohmann::json;

void kernel_process::run_code(const std::string& code, std::chrono::milliseconds timeout,
                              code_done done) {
    if (m_phase != phase::ready || m_code_done) {
        done(error{errc::internal, "kernel " + m_setup.id + " cannot run code now"});
        return;
    }
    try {
        open_shell();
    } catch (const zmq::error_t& e) {
        done(error{errc::capacity, std::string("cannot connect to the kernel: ") + e.what()});
        return;
    }
    begin_code(timeout, std::move(done));
    m_shell.send("execute_request", languages::traceless_execute(code),
                 [this](const protocol::wire_message& reply) {
                     if (reply.msg_type() == "execute_reply") {
                         on_code_reply(reply);
                     }
                 });
}

void kernel_process::apply_context(const languages::kernel_context& context,
                                   const std::string& code, std::chrono::milliseconds timeout,
                                   code_done done) {
    if (context.memory_history) {
        done = [this, done = std::move(done)](const status& outcome) {
            m_history_in_memory = m_history_in_memory || outcome.ok();
            done(outcome);
        };
    }
    if (!applies_context_message()) {
        run_code(code, timeout, std::move(done));
        return;
    }
    if (m_phase != phase::ready || m_code_done) {
        done(error{errc::internal, "kernel " + m_setup.id + " cannot apply a context now"});
        return;
    }
    try {
        m_control.open(m_info.endpoint(m_info.control_port), m_info.key, m_session);
    } catch (const zmq::error_t& e) {
        done(error{errc::capacity, std::string("cannot connect to the kernel: ") + e.what()});
        return;
    }
    begin_code(timeout, std::move(done));
    json content = {{"cwd", context.cwd ? json(*context.cwd) : json(nullptr)},
                    {"env", context.env}};
    if (context.memory_history) {
        content["python"] = languages::memory_history_python; // run by the kernel after cwd and env
    }
    m_control.send("kpool_context_request", std::move(content),
                   [this](const protocol::wire_message& reply) {
                       if (reply.msg_type() == "kpool_context_reply") {
                           on_code_reply(reply);
                       }
                   });
}

languages::kernel_context kernel_process::still_needed(languages::kernel_context wanted) const {
    if (m_history_in_memory) {
        wanted.memory_history = false;
    }
    if (wanted.cwd && !m_workdir && pid() > 0) {
        struct stat now {};
        struct stat asked {};
        const std::string proc_cwd = "/proc/" + std::to_string(pid()) + "/cwd";
        if (::stat(proc_cwd.c_str(), &now) == 0 && ::stat(wanted.cwd->c_str(), &asked) == 0 &&
            now.st_dev == asked.st_dev && now.st_ino == asked.st_ino) {
            wanted.cwd.reset();
        }
    }
    return wanted;
}

void kernel_process::open_workdir(const std::optional<std::string>& cwd, code_done done) {
    if (!m_workdir || !cwd) {
        done(ok_status());
        return;
    }
    if (m_phase != phase::ready) {
        done(
            error{errc::internal, "kernel " + m_setup.id + " cannot take a working directory now"});
        return;
    }
    m_workdir->open(pid(), *cwd, std::move(done));
}

void kernel_process::begin_code(std::chrono::milliseconds timeout, code_done done) {
    m_code_done = std::move(done);
    m_code_deadline.start(timeout, [this, timeout] {
        finish_code(error{errc::timeout, "the kernel did not run the setup code within " +
                                             std::to_string(timeout.count()) + " ms"});
    });
}

void kernel_process::on_code_reply(const protocol::wire_message& msg) {
    const json& content = msg.content;
    if (content.value("status", "") == "ok") {
        finish_code(ok_status());
        return;
    }
    finish_code(error{errc::bad_request,
                      protocol::echo_safe(content.value("ename", std::string("error")) + ": " +
                                          content.value("evalue", std::string()))});
}

void kernel_process::finish_code(const status& outcome) {
    if (!m_code_done) {
        return;
    }
    m_code_deadline.stop();
    close_shell(); // not kept for a leased kernel
    // The control channel stays: a context is applied to a kernel handed out, which keeps it
    // open (handed_out()).
    auto done = std::move(m_code_done);
    m_code_done = nullptr;
    done(outcome);
}

} // namespace kpool::daemon
