// syscall_filter: the sandbox's seccomp deny-list (see syscall_filter.hpp for why it exists).
#include "daemon/sandbox/syscall_filter.hpp"

#include "daemon/sandbox/sys_status.hpp"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <memory>

namespace kpool::sandbox {
namespace {

// Refused with EPERM whatever their arguments.
constexpr int refused[] = {
    SCMP_SYS(unshare),
    SCMP_SYS(setns),
    SCMP_SYS(mount),
    SCMP_SYS(umount2),
    SCMP_SYS(pivot_root),
    SCMP_SYS(chroot),
    SCMP_SYS(move_mount),
    SCMP_SYS(open_tree),
    SCMP_SYS(fsopen),
    SCMP_SYS(fsconfig),
    SCMP_SYS(fsmount),
    SCMP_SYS(fspick),
    SCMP_SYS(mount_setattr),
    SCMP_SYS(ptrace),
    SCMP_SYS(process_vm_readv),
    SCMP_SYS(process_vm_writev),
    SCMP_SYS(kexec_load),
    SCMP_SYS(kexec_file_load),
    SCMP_SYS(init_module),
    SCMP_SYS(finit_module),
    SCMP_SYS(delete_module),
    SCMP_SYS(bpf),
    SCMP_SYS(perf_event_open),
    SCMP_SYS(keyctl),
    SCMP_SYS(add_key),
    SCMP_SYS(request_key),
    SCMP_SYS(userfaultfd),
    SCMP_SYS(open_by_handle_at),
    SCMP_SYS(name_to_handle_at),
    SCMP_SYS(swapon),
    SCMP_SYS(swapoff),
    SCMP_SYS(reboot),
    SCMP_SYS(syslog),
    SCMP_SYS(acct),
    SCMP_SYS(quotactl),
    SCMP_SYS(lookup_dcookie),
    SCMP_SYS(pidfd_getfd),
    SCMP_SYS(kcmp),
};

// clone() flags that would make a namespace: each refused where it is set.
constexpr unsigned long namespace_flags[] = {CLONE_NEWUSER,  CLONE_NEWNS,  CLONE_NEWPID,
                                             CLONE_NEWNET,   CLONE_NEWIPC, CLONE_NEWUTS,
                                             CLONE_NEWCGROUP};

struct ctx_release {
    void operator()(void* ctx) const noexcept { seccomp_release(ctx); }
};
using filter_ctx = std::unique_ptr<void, ctx_release>;

result<filter_ctx> build() {
    filter_ctx ctx(seccomp_init(SCMP_ACT_ALLOW));
    if (!ctx) {
        return error{errc::internal, "seccomp_init failed"};
    }
    // Only the native architecture's numbers are checked: another's is killed (libseccomp's
    // default bad-arch action), else its numbers would slip past the rules.
    const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
    for (int call : refused) {
        if (call < 0) {
            continue; // not a system call on this architecture
        }
        if (const int rc = seccomp_rule_add(ctx.get(), eperm, call, 0); rc < 0) {
            return sys_error("seccomp rule", -rc);
        }
    }
    for (unsigned long flag : namespace_flags) {
        const int rc = seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(clone), 1,
                                        SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
        if (rc < 0) {
            return sys_error("seccomp clone rule", -rc);
        }
    }
    // clone3's flags sit in memory a filter cannot read: ENOSYS makes glibc use clone.
    if (const int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
        rc < 0) {
        return sys_error("seccomp clone3 rule", -rc);
    }
    // Typing into the terminal of whoever started us.
    if (const int rc = seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(ioctl), 1,
                                        SCMP_A1(SCMP_CMP_MASKED_EQ, 0xFFFFFFFFUL, TIOCSTI));
        rc < 0) {
        return sys_error("seccomp ioctl rule", -rc);
    }
    return ctx;
}

} // namespace

result<std::vector<std::uint8_t>> filter_program() {
    auto ctx = build();
    if (!ctx) {
        return ctx.err();
    }
    const int fd = ::memfd_create("kpool-seccomp", MFD_CLOEXEC);
    if (fd < 0) {
        return sys_error("memfd_create");
    }
    std::vector<std::uint8_t> program;
    if (const int rc = seccomp_export_bpf(ctx->get(), fd); rc < 0) {
        ::close(fd);
        return sys_error("seccomp_export_bpf", -rc);
    }
    const off_t size = ::lseek(fd, 0, SEEK_END);
    program.resize(static_cast<std::size_t>(size > 0 ? size : 0));
    const ssize_t n = ::pread(fd, program.data(), program.size(), 0);
    ::close(fd);
    if (n != static_cast<ssize_t>(program.size()) || program.empty() ||
        program.size() % sizeof(sock_filter) != 0) {
        return error{errc::internal, "seccomp_export_bpf wrote no whole program"};
    }
    return program;
}

status install_filter(const std::vector<std::uint8_t>& program) {
    sock_fprog prog{};
    prog.len = static_cast<unsigned short>(program.size() / sizeof(sock_filter));
    // The kernel copies the program; it only reads through this pointer.
    prog.filter = reinterpret_cast<sock_filter*>(const_cast<std::uint8_t*>(program.data()));
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) != 0) {
        return sys_error("no_new_privs");
    }
    return check(::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0UL, 0UL),
                 "installing the seccomp filter");
}

} // namespace kpool::sandbox
