"""The sandbox of a forked kernel (isolation = "sandbox"), made in the zygote's child before it
becomes the kernel. daemon/sandbox/stages.hpp describes the three processes; this file is the
part of them that runs in Python, because the kernel is the zygote's memory and must not exec:

  the zygote's child (outer)  joins the kernel's cgroups, unshares the namespaces (writes the
                              user namespace's maps), starts init and forks the kernel, then
                              waits for the kernel as stages.cpp's outer does (wait_as_outer)
  init (pid 1 inside)         `kpool-sandbox init`, posix_spawn'd (with the two capabilities it
                              needs kept across exec): it builds the filesystem and sends back
                              the seccomp program
  the kernel (pid 2 inside)   waits for init, enters its working directory, gives up every
                              privilege (as daemon/sandbox/identity.cpp does for a spawned one),
                              installs the filter, and returns to become the kernel

The outer process does not exec the helper: init pivots the mount namespace the outer process
shares into the kernel's root (where the helper and its libraries need not be) at a moment the
outer process cannot know, and an exec (with the teardown of the zygote's copy it ends) cost
more at refill than the little memory the waiting copy keeps (bench/sandbox.py). Only the
kernel's fork pre-faults the zygote's hot pages (AfterFork's list); init is spawned without a
fork of our memory at all.
"""
import ctypes
import json
import os
import select
import signal

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECCOMP = 22
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_RAISE = 2
PR_CAP_AMBIENT_CLEAR_ALL = 4
CAP_SETPCAP = 8
CAP_SYS_ADMIN = 21
SECCOMP_MODE_FILTER = 2
LINUX_CAPABILITY_VERSION_3 = 0x20080522
LAST_CAP = 63  # beyond the host's last capability PR_CAPBSET_DROP says EINVAL, which is fine


class SandboxError(Exception):
    """The sandbox could not be made: the kernel never starts (kpoold sees the reason in its log)."""


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32),
                ("inheritable", ctypes.c_uint32)]


def check(rc, libc_errno, what):
    if rc != 0:
        err = libc_errno()
        raise SandboxError("%s: %s" % (what, os.strerror(err)))


def prctl(libc, option, arg=0, arg3=0):
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(arg3), ctypes.c_ulong(0),
                      ctypes.c_ulong(0))


def write_file(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def die_with_outer(libc, life_fd):
    """SIGKILL when the outer process dies; if it already has, its pipe reads as closed."""
    prctl(libc, PR_SET_PDEATHSIG, signal.SIGKILL)
    if select.select([life_fd], [], [], 0)[0]:
        os._exit(125)


def enter_namespaces(spec, libc):
    for procs in spec.get("cgroup_procs") or []:
        write_file(procs, "0\n")
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC
    if spec.get("user_namespace"):
        flags |= CLONE_NEWUSER
    if not spec.get("network", True):
        flags |= CLONE_NEWNET
    check(libc.unshare(ctypes.c_int(flags)), ctypes.get_errno, "unshare")
    if spec.get("user_namespace"):
        write_file("/proc/self/setgroups", "deny\n")
        write_file("/proc/self/uid_map", "%d %d 1\n" % (uid, uid))
        write_file("/proc/self/gid_map", "%d %d 1\n" % (gid, gid))


def drop_privileges(spec, libc):
    """identity.cpp's drop_privileges, for a kernel that does not exec."""
    for cap in range(LAST_CAP + 1):
        prctl(libc, PR_CAPBSET_DROP, cap)
    prctl(libc, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    if not spec.get("user_namespace"):
        uid, gid = int(spec["uid"]), int(spec["gid"])
        if uid == 0:
            raise SandboxError("a sandboxed kernel never runs as root")
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    none = (CapData * 2)()
    header = CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    check(libc.capset(ctypes.byref(header), ctypes.byref(none)), ctypes.get_errno, "capset")
    check(prctl(libc, PR_SET_NO_NEW_PRIVS, 1), ctypes.get_errno, "no_new_privs")
    prctl(libc, PR_SET_DUMPABLE, 1)
    if spec.get("processes"):
        import resource
        resource.setrlimit(resource.RLIMIT_NPROC, (spec["processes"], spec["processes"]))


def keep_capabilities_across_exec(libc, caps):
    """In a user namespace a process whose uid is not 0 inside loses its capabilities at exec:
    init needs these two after it execs the helper (to mount, and to empty its bounding set),
    so they become ambient (inheritable first, as the kernel of Linux requires)."""
    header = CapHeader(LINUX_CAPABILITY_VERSION_3, 0)
    data = (CapData * 2)()
    check(libc.capget(ctypes.byref(header), ctypes.byref(data)), ctypes.get_errno, "capget")
    for cap in caps:
        data[cap // 32].inheritable |= 1 << (cap % 32)
    check(libc.capset(ctypes.byref(header), ctypes.byref(data)), ctypes.get_errno, "capset")
    for cap in caps:
        check(prctl(libc, PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap), ctypes.get_errno, "ambient capability")


def install_filter(program, libc):
    if len(program) == 0 or len(program) % 8:
        raise SandboxError("init sent no whole seccomp program")
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = SockFprog(len(program) // 8, ctypes.addressof(buffer))
    check(prctl(libc, PR_SET_NO_NEW_PRIVS, 1), ctypes.get_errno, "no_new_privs")
    rc = libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog),
                    ctypes.c_ulong(0), ctypes.c_ulong(0))
    check(rc, ctypes.get_errno, "installing the seccomp filter")


def read_all(fd):
    chunks = []
    while True:
        data = os.read(fd, 65536)
        if not data:
            return b"".join(chunks)
        chunks.append(data)


def become_sandboxed_kernel(spec, libc, ready_r, life_r):
    die_with_outer(libc, life_r)
    answer = read_all(ready_r)
    os.close(ready_r)
    head, _, program = answer.partition(b"\n")
    if not head.startswith(b"ok "):
        raise SandboxError(head[6:].decode(errors="replace") if head.startswith(b"error ")
                           else "init ended before the sandbox was ready")
    os.chdir(spec.get("cwd") or "/")
    drop_privileges(spec, libc)
    die_with_outer(libc, life_r)  # a change of uid disarmed it
    install_filter(program, libc)
    os.close(life_r)


def enter(spec, helper, libc, after_fork, prefault):
    """In the zygote's child, single-threaded. Returns in the kernel's process, inside its
    sandbox; the outer process and init never return (see the module docstring)."""
    enter_namespaces(spec, libc)
    ready_r, ready_w = os.pipe()
    life_r, life_w = os.pipe()
    go_r, go_w = os.pipe()  # stages.hpp's run_init: init waits until the kernel's process exists
    for fd in (go_r, ready_w, life_r):
        os.set_inheritable(fd, True)
    if spec.get("user_namespace"):
        keep_capabilities_across_exec(libc, (CAP_SETPCAP, CAP_SYS_ADMIN))
    try:
        # posix_spawn (vfork: no copy of our page tables, none to tear down) while the host's
        # root is still ours; the first child since unshare: pid 1 of the new pid namespace.
        init_pid = os.posix_spawn(helper, ["kpool-sandbox", "init", json.dumps(spec), str(go_r), str(ready_w),
                                           str(life_r)], {})
    finally:
        prctl(libc, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    os.close(go_r)
    os.set_inheritable(ready_w, False)
    os.set_inheritable(life_r, False)
    after_fork.prefault = prefault
    try:
        kernel_pid = os.fork()
    except OSError as e:
        os.kill(init_pid, signal.SIGKILL)  # waiting for its go, which never comes
        raise SandboxError("fork: %s" % e)
    if kernel_pid == 0:
        os.close(ready_w)
        os.close(life_w)
        os.close(go_w)
        become_sandboxed_kernel(spec, libc, ready_r, life_r)
        return
    os.close(ready_r)
    os.close(ready_w)
    os.close(life_r)
    os.write(go_w, b"g")  # the kernel's process exists: init may build its root
    os.close(go_w)
    wait_as_outer(kernel_pid, init_pid)  # life_w stays open until we exit


def wait_as_outer(kernel_pid, init_pid):
    """stages.cpp's run_outer, without an exec: once init has pivoted our shared mount namespace
    into the kernel's root, no path of the host's (not even the dynamic loader's) may be needed,
    and nothing here opens a file. Touches as little of the zygote's memory as it can (every
    object written is a page copied)."""
    import gc
    gc.disable()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        signal.signal(sig, signal.SIG_IGN)  # the kernel's group gets them; we only wait
    while True:
        try:
            _, status = os.waitpid(kernel_pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            status = 125 << 8
            break
    os.kill(init_pid, signal.SIGKILL)  # init's death ends whatever the kernel left inside
    try:
        os.waitpid(init_pid, 0)
    except ChildProcessError:
        pass
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 125)
