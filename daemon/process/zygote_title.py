"""What `ps` and `top` show for a zygote and its kernels. kpoold starts the zygote as
`PYTHON -c SOURCE SETTINGS`, a command line of tens of KB that every forked kernel would show
too. So the zygote shows `kpool-zygote pool=NAME (PYTHON)` with the name `kpool-zygote`, and a
forked kernel the command line a launched one has (`PYTHON -m ipykernel_launcher -f FILE`, its
parent the zygote of its pool) with the interpreter's name. The command line is rewritten where
the kernel keeps it, the argument area /proc/self/stat bounds, as setproctitle does on Linux;
the name (what top shows) with prctl(PR_SET_NAME). The rest of the area stays NUL: /proc/PID/cmdline
shows the arguments padded with empty ones to the zygote's length (only CAP_SYS_RESOURCE could
move its end, PR_SET_MM_ARG_END); ps shows them alike. sys.argv is Python's own copy."""
import ctypes

PR_SET_NAME = 15
# /proc/self/stat's fields after the command's closing parenthesis start at field 3 (state);
# arg_start and arg_end are fields 48 and 49 (proc(5)).
ARG_START_INDEX, ARG_END_INDEX = 48 - 3, 49 - 3


def set_title(libc, argv, name):
    """Shows `argv` (a list: NUL-separated, as exec would give it) as the command line, cut to
    the area there is, and `name` as the process name. False if /proc did not say where."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        start, end = int(fields[ARG_START_INDEX]), int(fields[ARG_END_INDEX])
    except (OSError, IndexError, ValueError):
        return False
    if end - start < 2:
        return False
    text = b"\0".join(a.encode(errors="replace") for a in argv)[: end - start - 1]
    ctypes.memmove(start, text + b"\0" * (end - start - len(text)), end - start)
    libc.prctl(PR_SET_NAME, ctypes.c_char_p(name.encode(errors="replace")[:15]), 0, 0, 0)
    return True
