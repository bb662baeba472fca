"""What a request's code tries against the host, the daemon and other requests (issue #48): each
attack is code run in a kernel through `kpool exec`, which prints one JSON line,
{"done": true|false, "detail": ...}: whether the attempt got what it was after. test_sandbox.py
runs each on an unsandboxed pool first (the control: proof that the attempt works there) and
then on a sandboxed one, where it must not.

{victim_file}, {victim_pid}, {daemon_pid}, {marker}, {port}, {tag}, {sibling} (another request's
folder beside the attacker's working directory, under the same root, with a file `secret`) are
replaced per run (plain text replacement: the code's own braces stay as they are)."""

PRELUDE = r'''
import ctypes, json, os, signal, socket, subprocess, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def verdict(done, detail=""):
    print(json.dumps({"done": bool(done), "detail": str(detail)[:300]}))
def errno_text():
    return os.strerror(ctypes.get_errno())
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
def in_own_mount_namespace(attempt):
    """Mounting is tried in a forked child (unshare wants a single thread), in a mount namespace
    of the attempt's own, never the host's: made where that works (an unsandboxed kernel); in a
    sandbox (where it does not) the sandbox's namespace is the kernel's own already."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        flags = CLONE_NEWNS | (0 if os.geteuid() == 0 else CLONE_NEWUSER)
        if libc.unshare(flags) == 0:
            libc.mount(None, b"/", None, 0x4000 | 0x40000, None)  # MS_REC | MS_PRIVATE
            done, detail = attempt()
        elif os.path.exists("/proc/{daemon_pid}"):  # the host's namespace: not to be touched
            done, detail = False, "unshare: " + errno_text()
        else:
            done, detail = attempt()
        os.write(w, json.dumps([done, detail]).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    verdict(*json.loads(os.read(r, 4096) or b'[false, "the child died"]'))
'''

# name -> (what it tries, code after PRELUDE)
PYTHON_ATTACKS = {
    "see_other_processes": ("see kpoold's process", r'''
pids = [p for p in os.listdir("/proc") if p.isdigit()]
verdict(os.path.exists("/proc/{daemon_pid}/cmdline") and
        b"kpoold" in open("/proc/{daemon_pid}/cmdline", "rb").read(), "%d pids visible" % len(pids))
'''),
    "signal_daemon": ("signal kpoold (signal 0: the permission check alone)", r'''
try:
    os.kill({daemon_pid}, 0)
    verdict(os.path.exists("/proc/{daemon_pid}") and b"kpoold" in open("/proc/{daemon_pid}/cmdline", "rb").read(),
            "kill(0) allowed")
except OSError as e:
    verdict(False, e)
'''),
    "read_other_connection_file": ("read another client's kernel's connection file and key", r'''
try:
    verdict("key" in json.load(open("{victim_file}")), "read it")
except OSError as e:
    verdict(False, e)
'''),
    "run_code_in_other_kernel": ("run code in another client's kernel with its key", r'''
try:
    info = json.load(open("{victim_file}"))
except OSError as e:
    verdict(False, e)
else:
    from jupyter_client import BlockingKernelClient
    c = BlockingKernelClient()
    c.load_connection_info(info)
    c.start_channels()
    try:
        c.execute_interactive("open(%r, 'w').write('x')" % "{marker}", timeout=20)
    finally:
        c.stop_channels()
    verdict(os.path.exists("{marker}"), "marker written by the other kernel")
'''),
    "read_other_environment": ("read another kernel's environment", r'''
try:
    verdict(b"KPOOL_INSTANCE" in open("/proc/{victim_pid}/environ", "rb").read(), "read it")
except OSError as e:
    verdict(False, e)
'''),
    "symlink_out_of_cwd": ("follow a link out of its working directory to another kernel's file", r'''
link = "escape-{tag}"
try:
    os.symlink("{victim_file}", link)
    verdict("key" in json.load(open(link)), "read through the link")
except OSError as e:
    verdict(False, e)
finally:
    if os.path.lexists(link):
        os.unlink(link)
'''),
    "reach_another_requests_folder": ("read and write another request's folder beside its own", r'''
tried = []
for path in ["{sibling}/secret"] + ["/.kpool-roots/%d/%s/secret" % (i, os.path.basename("{sibling}")) for i in range(3)]:
    try:
        if path.startswith("/.kpool-roots"):  # where the sandbox keeps its roots: unlock it first
            os.chmod("/.kpool-roots", 0o755)
        secret = open(path).read()
        open(os.path.join(os.path.dirname(path), "planted-{tag}"), "w").write("x")
        verdict(True, "read %r at %s and wrote beside it" % (secret, path))
        break
    except OSError as e:
        tried.append(str(e))
else:
    verdict(False, "; ".join(tried))
'''),
    "leave_a_process_behind": ("leave a process running after its kernel is released", r'''
subprocess.Popen(["sleep", "{tag}"], start_new_session=True, stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # exec'd by the time Popen returns
verdict(True, "started; whether it outlives the kernel is checked from outside")
'''),
    "mount": ("mount a filesystem (over /tmp, hiding the sandbox's own)", r'''
def attempt():
    rc = libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
    return rc == 0, "mounted" if rc == 0 else errno_text()
in_own_mount_namespace(attempt)
'''),
    "unmount_tmp": ("unmount /tmp to reveal what is beneath it", r'''
def attempt():
    if not os.path.ismount("/tmp"):  # the control has no /tmp mount of its own: it makes one
        libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
    rc = libc.umount2(b"/tmp", 2)  # MNT_DETACH
    return rc == 0, "unmounted" if rc == 0 else errno_text()
in_own_mount_namespace(attempt)
'''),
    "unshare_and_map_uid": ("make a user namespace and write its uid_map (root inside)", r'''
pid = os.fork()
if pid == 0:
    ok = libc.unshare(CLONE_NEWUSER) == 0
    if ok:
        try:
            open("/proc/self/setgroups", "w").write("deny")
            open("/proc/self/uid_map", "w").write("0 %d 1" % os.geteuid())
        except OSError:
            ok = False
    os._exit(0 if ok else 1)
verdict(os.waitpid(pid, 0)[1] == 0, "a child became root in a user namespace of its own")
'''),
    "setns_into_another_kernel": ("join another kernel's network namespace (setns), else pid 1's", r'''
rc, detail = -1, ""
for path in ("/proc/{victim_pid}/ns/net", "/proc/1/ns/net"):
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        detail += "%s; " % e
        continue
    rc = libc.setns(fd, 0)
    detail += "%s: %s; " % (path, "joined" if rc == 0 else errno_text())
    if rc == 0:
        break
verdict(rc == 0, detail)
'''),
    "ptrace": ("ptrace a process", r'''
child = subprocess.Popen(["sleep", "30"])
rc = libc.ptrace(16, child.pid, None, None)  # PTRACE_ATTACH
detail = "attached" if rc == 0 else errno_text()
if rc == 0:
    os.waitpid(child.pid, 0)
    libc.ptrace(17, child.pid, None, None)  # PTRACE_DETACH
child.kill()
child.wait()
verdict(rc == 0, detail)
'''),
    "write_for_the_next_request": ("leave files in /tmp, /var/tmp, /dev/shm and HOME", r'''
written = []
for d in ("/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~")):
    try:
        open(os.path.join(d, "kpool-left-{tag}"), "w").write("x")
        written.append(d)
    except OSError:
        pass
verdict(written, written)
'''),
    "read_what_the_last_request_left": ("read the files the previous request left", r'''
found = [d for d in ("/tmp", "/var/tmp", "/dev/shm", os.path.expanduser("~"))
         if os.path.exists(os.path.join(d, "kpool-left-{tag}"))]
verdict(found, found)
for d in found:
    os.unlink(os.path.join(d, "kpool-left-{tag}"))
'''),
    "start_many_processes": ("start 200 processes", r'''
children = []
try:
    for _ in range(200):
        children.append(subprocess.Popen(["sleep", "30"]))
    verdict(True, "200 started")
except OSError as e:
    verdict(False, "%d started, then %s" % (len(children), e))
for c in children:
    c.kill()
    c.wait()
'''),
    "memory_hog": ("allocate 1 GiB in a process it starts", r'''
hog = subprocess.run([sys.executable, "-c", "x = bytearray(1 << 30); x[::4096] = b'x' * len(x[::4096])"])
verdict(hog.returncode == 0, "the hog exited %d; the kernel goes on" % hog.returncode)
'''),
    "connect_to_host_loopback": ("connect to a port on the host's loopback", r'''
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=5).close()
    verdict(True, "connected")
except OSError as e:
    verdict(False, e)
'''),
}

# The spawned IRkernel pool: the same questions in R.
R_ATTACKS = {
    "see_other_processes": r'''
cat(sprintf('{"done": %s, "detail": "%d pids"}\n', tolower(file.exists("/proc/{daemon_pid}/cmdline")),
    length(list.files("/proc", pattern = "^[0-9]+$"))))
''',
    "read_other_connection_file": r'''
ok <- tryCatch(any(grepl("key", readLines("{victim_file}", warn = FALSE))), error = function(e) FALSE,
               warning = function(w) FALSE)
cat(sprintf('{"done": %s, "detail": ""}\n', tolower(ok)))
''',
    "reach_another_requests_folder": r'''
ok <- tryCatch(any(grepl("secret", readLines("{sibling}/secret", warn = FALSE))), error = function(e) FALSE,
               warning = function(w) FALSE)
cat(sprintf('{"done": %s, "detail": ""}\n', tolower(ok)))
''',
    "write_for_the_next_request": r'''
ok <- tryCatch({ writeLines("x", "/tmp/kpool-left-{tag}"); TRUE }, error = function(e) FALSE)
cat(sprintf('{"done": %s, "detail": ""}\n', tolower(ok)))
''',
    "read_what_the_last_request_left": r'''
cat(sprintf('{"done": %s, "detail": ""}\n', tolower(file.exists("/tmp/kpool-left-{tag}"))))
''',
    "leave_a_process_behind": r'''
system("setsid sleep {tag} > /dev/null 2>&1 &")
cat('{"done": true, "detail": "started"}\n')
''',
}
