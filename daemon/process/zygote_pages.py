"""Which of a kpool zygote's pages its kernels write, learned so that each new kernel breaks
copy-on-write for them in bulk as it starts (MADV_POPULATE_WRITE, in a refill nobody waits
for) instead of taking one fault per page while its user waits. daemon/process/zygote.py runs
this file in a namespace of its own; kpoold passes its source, compiled in.

A sampled kernel (PageReport) scans /proc/self/pagemap over the zygote's private writable
mappings for the pages it maps alone, the ones it has written, and reports them on a pipe:
after its first answer ("first": what every kernel's start writes) and as it ends ("life").
HotPageLearner in the zygote keeps the start pages and the pages most recent lives wrote,
capped, and hands them to the zygote's after-fork hook.
"""
import collections
import ctypes
import json
import os

MADV_POPULATE_WRITE = 23  # Linux 5.14
PAGE = os.sysconf("SC_PAGE_SIZE")
MAX_PREFAULT_PAGES = 16384  # 64 MiB: a kernel writes 3,000-4,500 of our pages
RECENT_LIVES = 8  # sampled kernels' whole-life page reports kept (HotPageLearner)
MIN_LIVES = 3  # every pre-built fork is a sample until this many reports are in
SAMPLE_EVERY = 8  # then one pre-built fork in this many
MAX_OPEN_REPORTS = 4  # samples running at once (a pipe each)
MAX_REPORT_BYTES = 16 << 20  # a report line longer than this is not ours (a kernel's code can write the pipe)


def writable_private_ranges():
    """(start, end) of this process's private writable mappings."""
    ranges = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if fields[1].startswith("rw") and fields[1].endswith("p"):
                start, end = (int(x, 16) for x in fields[0].split("-"))
                ranges.append((start, end))
    return ranges


def exclusive_pages(ranges):
    """Runs [address, pages] of the pages in `ranges` present and mapped by this process alone:
    in a forked child, given the zygote's private writable ranges, those of its pages that the
    child has written."""
    runs = []
    with open("/proc/self/pagemap", "rb") as pagemap:
        for start, end in ranges:
            first = start // PAGE
            count = (end - start) // PAGE
            pagemap.seek(first * 8)
            entries = memoryview(pagemap.read(count * 8)).cast("Q")
            run_start = None
            for i, entry in enumerate(entries):
                hot = (entry >> 63) & 1 and (entry >> 56) & 1
                if hot and run_start is None:
                    run_start = i
                elif not hot and run_start is not None:
                    runs.append([(first + run_start) * PAGE, i - run_start])
                    run_start = None
            if run_start is not None:
                runs.append([(first + run_start) * PAGE, count - run_start])
    return runs


def send_page_report(report, kind):
    """One line to the zygote: {KIND: runs of the zygote's pages this kernel has written}."""
    data = (json.dumps({kind: exclusive_pages(report.zygote_ranges)}) + "\n").encode()
    fd = report.fd
    try:
        while data:
            data = data[os.write(fd, data):]
    except OSError:
        pass  # the zygote is gone


def report_hot_pages_after_first(kernel, msg_type, report):
    """Wraps the handler of `msg_type` (kernel_info_request is bound on shell and control alike)
    so that the first answer, and only the first, is followed by the "first" page report: by
    then the kernel has written what every kernel writes before its user's first cell."""
    original = kernel.shell_handlers[msg_type]
    pending = [report]

    async def answer_then_report(stream, ident, parent):
        await original(stream, ident, parent)
        if pending:
            send_page_report(pending.pop(), "first")

    kernel.shell_handlers[msg_type] = answer_then_report
    if msg_type in kernel.control_handlers:
        kernel.control_handlers[msg_type] = answer_then_report


class PageReport:
    """A sample's report pipe: `fd` the child's end, `read_fd` the zygote's; `first`: the
    child also reports after its first answer; `zygote_ranges`: the zygote's private writable
    mappings, read by the child as it starts (the only pages it scans: the rest is its own)."""

    def __init__(self, fd, read_fd, first):
        self.fd = fd
        self.read_fd = read_fd
        self.first = first
        self.zygote_ranges = []


class HotPageLearner:
    """Learns which of our pages kernels write, for AfterFork to break copy-on-write for in bulk
    in every later child (off the request: a refill nobody waits for), so that a kernel's first
    writes to them fault no page in one by one while its user waits:
    - the pages the first pre-built kernel writes before its user's first cell (its start and
      priming, the same in every kernel), from its "first" report after its first answer;
    - the pages most of the recent sampled kernels wrote over their whole life (what the pool's
      notebooks touch: their imports' objects, caches, the allocator's arenas), from each
      sample's "life" report as it ends, if its user ran a cell. A sample is forked with only the
      start pages pre-faulted, so that what it reports it wrote itself; every pre-built fork is
      one until MIN_LIVES reports are in, then one in SAMPLE_EVERY, so that a workload that
      changes is followed and a page no longer used leaves with the reports that had it.
    All of it is capped at MAX_PREFAULT_PAGES; a kernel's pre-faulted pages are its own memory
    from its start, which status reports (hot_pages)."""

    def __init__(self, after_fork, mode, nothing_to_learn):
        self.after_fork = after_fork
        self.mode = mode  # the pool's `prefault`: "learn", "start" (no samples) or "off"
        self.disabled = nothing_to_learn or mode == "off"
        self.start_pages = None  # page numbers from the "first" report
        self.first_asked = False  # a child running was asked for it
        self.lives = collections.deque(maxlen=RECENT_LIVES)  # page-number sets, newest last
        self.reports = {}  # read fd -> [unread bytes, asked for "first"], one per sample running
        self.forks_since_sample = 0
        self.start_prefault = []  # (address, length) runs of the start pages: a sample's
        self.published = None

    def ask(self):
        """For a pre-built fork about to happen: None, or a new PageReport for its child (and
        the read end kept here)."""
        if self.disabled or len(self.reports) >= MAX_OPEN_REPORTS:
            return None
        first = self.start_pages is None and not self.first_asked
        self.forks_since_sample += 1
        if not first and (self.mode != "learn" or
                          len(self.lives) >= MIN_LIVES and self.forks_since_sample < SAMPLE_EVERY):
            return None
        self.forks_since_sample = 0
        read_fd, write_fd = os.pipe()
        self.reports[read_fd] = [b"", first]
        self.first_asked = self.first_asked or first
        return PageReport(write_fd, read_fd, first)

    def initial(self):
        """The message for kpoold before any report, if there is one to give."""
        if self.mode == "off":
            return {"learned": 0, "why_not": 'prefault = "off"', "kernels": 0}
        return None

    def fork_failed(self, report):
        os.close(report.fd)
        self.forget(report.read_fd)

    def forget(self, fd):
        _, first = self.reports.pop(fd)
        os.close(fd)
        if first and self.start_pages is None:
            self.first_asked = False  # it ended before its first answer: the next one teaches us

    def fds(self):
        return list(self.reports)

    def read(self, fd):
        """Reads what a sample wrote; the message for kpoold when what is pre-faulted changed,
        else None."""
        try:
            data = os.read(fd, 1 << 16)
        except OSError:
            data = b""
        if not data:
            self.forget(fd)
            return None
        entry = self.reports[fd]
        *lines, entry[0] = (entry[0] + data).split(b"\n")
        if len(entry[0]) > MAX_REPORT_BYTES:
            self.forget(fd)
            return None
        changed = False
        for line in lines:
            try:
                report = json.loads(line)
                kind, runs = next(iter(report.items()))
                pages = self.ours(runs)
            except (ValueError, TypeError, AttributeError, StopIteration):
                continue  # a kernel's (not ours to trust blindly): dropped
            if kind == "first" and self.start_pages is None:
                self.start_pages = pages
                changed = True
            elif kind == "life" and self.mode == "learn":
                self.lives.append(pages)
                changed = True
        return self.publish() if changed else None

    def ours(self, runs):
        """The page numbers of the reported runs that lie in our own private writable mappings
        (both sorted by address: one sweep)."""
        pages = set()
        ranges = sorted(writable_private_ranges())
        i = 0
        for address, count in sorted((int(a), int(n)) for a, n in runs):
            start, end = address, address + count * PAGE
            while i < len(ranges) and ranges[i][1] <= start:
                i += 1
            j = i
            while j < len(ranges) and ranges[j][0] < end:
                a, b = max(start, ranges[j][0]), min(end, ranges[j][1])
                if a < b:
                    pages.update(range(a // PAGE, b // PAGE))
                j += 1
        return pages

    def chosen(self):
        """The start pages, then those written by most recent lives (by how many), capped."""
        start = sorted(self.start_pages or ())[:MAX_PREFAULT_PAGES]
        counts = collections.Counter(p for life in self.lives for p in life)
        most = max(2, (len(self.lives) + 1) // 2)
        taken = set(start)
        life = [p for p, n in counts.most_common() if n >= most and p not in taken]
        return start, life[:MAX_PREFAULT_PAGES - len(start)]

    def publish(self):
        start, life = self.chosen()
        total = len(start) + len(life)
        if not total:
            message = {"learned": 0, "why_not": "the kernels wrote none of our pages", "kernels": len(self.lives)}
        elif self.published is None and not self.madvise_works(start[0] if start else life[0]):
            self.disabled = True
            message = {"learned": 0, "why_not": "madvise(MADV_POPULATE_WRITE): %s" % os.strerror(ctypes.get_errno()),
                       "kernels": len(self.lives)}
        else:
            self.start_prefault = page_runs(start)
            self.after_fork.prefault = page_runs(start + life)
            message = {"learned": total, "why_not": None, "kernels": len(self.lives)}
        if message == self.published:
            return None
        self.published = message
        return message

    def madvise_works(self, page):
        """Probes the call once: a Linux before 5.14 refuses MADV_POPULATE_WRITE."""
        return self.after_fork.populate(page * PAGE, PAGE) == 0

    def close_in_child(self):
        for fd in self.reports:
            os.close(fd)


def page_runs(pages):
    """(address, length) runs of consecutive page numbers."""
    runs = []
    for page in sorted(pages):
        if runs and runs[-1][0] + runs[-1][1] == page * PAGE:
            runs[-1][1] += PAGE
        else:
            runs.append([page * PAGE, PAGE])
    return [tuple(run) for run in runs]
