"""The machine's CPU time and the hypervisor's steal, from /proc/stat, for
perf/run and perf/engines: on a virtual machine whose host gives its CPUs
to others, every rate falls and every latency rises without any change of
hasp's (25-46 % steal was seen here while a 3-node cycle fell from about
15,000 to 4,700 cycles/s), which the load average does not show."""

STEAL_NOTE_SHARE = 0.05  # above this, a run is flagged as not comparable


def cpu_times(path="/proc/stat"):
    """(all, steal) CPU time in ticks, from the "cpu" line (user nice
    system idle iowait irq softirq steal; guest time is counted in user)."""
    with open(path) as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return sum(fields[:8]), fields[7] if len(fields) > 7 else 0


def steal_share(before, after):
    """The share of the machine's CPU time stolen between two cpu_times()."""
    total = after[0] - before[0]
    return (after[1] - before[1]) / total if total > 0 else 0.0
