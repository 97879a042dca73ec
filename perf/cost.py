#!/usr/bin/env python3
"""The cost model of a lock cycle (docs/PERFORMANCE.md, "Cost per lock cycle").

    perf/cost.py [--clients 1,16,64,256] [--duration S] [--client bench|libhasp]
                 [--build DIR] [--set key=value ...] [--profile] [--out DIR]

As root. Starts a 3-node cluster with scripts/cluster (HASP_NET_NAME,
HASP_SUBNET and HASP_CLUSTER_DIR as for scripts/cluster; defaults hcost,
10.81.0, a fresh directory under /tmp), and for each client count runs
uncontended lock cycles (hasp-bench's engine, or perf/peers' libhasp
driver: one client per thread) and reads, per node, before and after:

  datagrams in and out      the dataplane's rx_udp / tx_udp (SIGUSR1 stats)
  system calls              `perf stat -e raw_syscalls:sys_enter -p PID`
  io_uring submits          ... `-e syscalls:sys_enter_io_uring_enter`
  fsyncs                    wal_writes (one fdatasync per group-commit write)
  WAL bytes                 /proc/PID/io write_bytes (what reached the block layer)
  CPU                       utime + stime of /proc/PID/stat; and for the run, the
                            kernel's worker threads (kworker/*) and the whole
                            machine's busy time (/proc/stat)
  idle wakes                the dataplane's idle_sleeps

and divides each by the cycles completed. With --profile the leader is
sampled with `perf record` (cpu-clock, kernel and user) during the run
and its samples are split by stage (STAGES below, by symbol). Writes
OUT/cost-<clients>.json and prints one markdown table per run.

Every run is bounded: hasp-bench by --count and --duration, each child by a
timeout; the cluster is taken down on every exit.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "perf"))
from perf_build import ensure_build  # noqa: E402
HZ = os.sysconf("SC_CLK_TCK")

# Stage of a sampled symbol: the first pattern that matches (dso:symbol).
STAGES = [
    ("idle", r"ppoll|do_sys_poll|do_poll|poll_schedule|idle_wait|schedule_hrtimeout|"
             r"tun_chr_poll|eventfd_poll|io_uring_poll|sock_poll|pollwake|__pollwait"),
    # tun_/tap: net_tap; packet_/tpacket_: net_af_packet (the default port)
    ("packet I/O", r"tun_|eth_tap|pmd_rx_burst|pmd_tx_burst|tap_trigger|rte_eth_|rte_pktmbuf|"
                   r"packet_sendmsg|packet_rcv|packet_lookup_frame|packet_poll|tpacket_|eth_af_packet|"
                   r"rte_mempool|common_ring|lcore_rx|lcore_loop_flush|netif_|__netif|br_|"
                   r"ip_|ipv4_|udp_|skb|dev_|__dev|veth|sch_|qdisc|net_rx|napi|"
                   r"copy_user|_copy_to_iter|_copy_from_iter|copyout|copyin|"
                   r"ksys_read|ksys_write|vfs_read|vfs_write|new_sync|__x64_sys_read|__x64_sys_write|"
                   r"__x64_sys_writev|do_iter_write|do_iter_readv|readv|writev|do_readv|do_writev|iovec|fdget|classify_|csum|eth_|arp_|dp_udp"),
    ("WAL", r"wal_|storage_|uring|io_uring|io_submit|io_issue|io_req|io_cqring|ext4|jbd2|blk_|"
            r"bio|virtblk|virtqueue|iomap|filemap|folio|fdatasync|file_write|hardstate"),
    ("auth", r"sodium|crypto_|blake2|poly1305|chacha|siphash|peer_auth|wire_auth|hasp_wire_seal|"
             r"hasp_wire_open|auth_"),
    ("parse", r"hasp_wire_decode|msg_codec_decode|decode|client_auth|node_client_rx|node_peer_rx"),
    ("reply", r"hasp_wire_encode|send_reply|dispatch_applied|dispatch_reply|loop_client_send|"
              r"node_send|encode"),
    ("batch", r"dispatch_"),
    ("Raft", r"raft_|send_msgs|node_update|node_step|log_"),
    ("apply", r"locks_|apply_entries|notify_|session_|lease_|lock_"),
    ("timers", r"hrtimer|timerfd|clock_gettime|__vdso|clock_monotonic|leader_timers|tick"),
    ("scheduler", r"schedule|__schedule|pick_next|enqueue_|dequeue_|update_curr|"
                  r"finish_task_switch|context_switch|switch_mm|__switch_to|try_to_wake_up|"
                  r"ttwu|select_task_rq|psi_"),
    ("syscall entry", r"entry_SYSCALL|syscall_return|do_syscall|syscall_exit|"
                      r"exit_to_user|__x64_sys|syscall_enter|srso|retbleed|"
                      r"native_irq_return|asm_|irqentry|clear_bhb|__entry_text|pvm_|perf_trace|"
                      r"iowrite|ioread"),
]
STAGE_RE = [(name, re.compile(rx)) for name, rx in STAGES]
# Stages that are hasp's own code: their patterns name hasp's functions and
# must not catch kernel symbols that happen to contain them (the kernel's
# _raw_spin_unlock_irqrestore has "lock_" in it, crypto_shash_update
# "crypto_"), which counted the wake-up paths' interrupt re-enabling as
# "apply".
USER_STAGES = {"auth", "parse", "reply", "batch", "Raft", "apply"}


def stage_of(sym, dso):
    kernel = dso.startswith("[kernel")
    for name, rx in STAGE_RE:
        if kernel and name in USER_STAGES:
            continue
        if rx.search(sym):
            return name
    return "other (%s)" % ("kernel" if kernel else "user")


def sh(cmd, env=None, timeout=120, check=True):
    r = subprocess.run(cmd, env=env, timeout=timeout, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        sys.exit("cost: %s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr[-2000:]))
    return r


def ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(") ", 1)[1].split()
    return int(rest[11]) + int(rest[12])


def machine_busy_ticks():
    """CPU time the whole machine spent busy (user, nice, system, irq,
    softirq; not idle, iowait or steal), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:8]]
    return v[0] + v[1] + v[2] + v[5] + v[6]


def kworker_ticks():
    """utime + stime of every kernel worker thread (kworker/*) by PID: the
    kernel's work queues, where for example a RWF_DSYNC direct write's
    cache flush runs (docs/PERFORMANCE.md, "wal_sync = dsync")."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/comm" % d) as f:
                if not f.read().startswith("kworker"):
                    continue
            out[int(d)] = ticks(int(d))
        except (OSError, IndexError):
            pass  # gone meanwhile
    return out


def io_write_bytes(pid):
    with open("/proc/%d/io" % pid) as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


def node_stats(pids, stats_files):
    """SIGUSR1 every node, wait for its stats file to change, read it."""
    old = {f: os.stat(f).st_mtime_ns if os.path.exists(f) else 0 for f in stats_files}
    for pid in pids:
        os.kill(pid, signal.SIGUSR1)
    out = []
    for f in stats_files:
        for _ in range(100):
            if os.path.exists(f) and os.stat(f).st_mtime_ns != old[f]:
                break
            time.sleep(0.05)
        else:
            sys.exit("cost: %s not rewritten after SIGUSR1" % f)
        with open(f) as fh:
            out.append(json.load(fh))
    return out


def flat(s):
    d = dict(s)
    d.update({"dp_" + k: v for k, v in s.get("dp", {}).items() if isinstance(v, (int, float))})
    return d


def perf_stat_start(pid, path):
    return subprocess.Popen(["perf", "stat", "-x", ",", "-o", path, "-e",
                             "raw_syscalls:sys_enter,syscalls:sys_enter_io_uring_enter,"
                             "syscalls:sys_enter_readv,syscalls:sys_enter_writev,"
                             "syscalls:sys_enter_ppoll",
                             "-p", str(pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def perf_stat_stop(proc, path):
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)
    counts = {}
    with open(path) as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) >= 3 and parts[0].replace(".", "").isdigit():
                counts[parts[2].split(":")[-1]] = int(float(parts[0]))
    return counts


def profile_report(data, top):
    r = sh(["perf", "report", "-i", data, "--stdio", "--no-children", "--sort", "dso,sym",
            "--percent-limit", "0", "-F", "overhead,sample,dso,sym"], timeout=300)
    stages, syms = {}, []
    total = 0
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d.]+)%\s+(\d+)\s+(\S+)\s+\[[.k]\]\s+(.*)$", line)
        if not m:
            continue
        n, dso, sym = int(m.group(2)), m.group(3), m.group(4).strip()
        total += n
        st = stage_of(sym, dso)
        stages[st] = stages.get(st, 0) + n
        syms.append((n, dso, sym, st))
    syms.sort(reverse=True)
    return total, stages, syms[:top]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default="1,16,64")
    ap.add_argument("--duration", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--client", choices=["bench", "libhasp"], default="bench")
    ap.add_argument("--build", default="", help="build directory (default build/perf, built if missing)")
    ap.add_argument("--set", action="append", default=[], help="node config key=value")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("cost: run as root (starts a cluster, reads other processes' counters)")
    counts = [int(c) for c in a.clients.split(",")]
    a.build = ensure_build(ROOT, a.build, "perf", ["node/haspd", "tools/hasp-bench", "perf/peer-hasp"],
                           "perf/cost.py")
    out = a.out or os.path.join(ROOT, "build", "cost-results", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    os.makedirs(out, exist_ok=True)
    env = dict(os.environ)
    env.setdefault("HASP_NET_NAME", "hcost")
    env.setdefault("HASP_SUBNET", "10.81.0")
    made_dir = "HASP_CLUSTER_DIR" not in env
    cdir = env.get("HASP_CLUSTER_DIR") or tempfile.mkdtemp(prefix="hasp-cost.")
    env["HASP_CLUSTER_DIR"] = cdir
    env["HASP_BUILD"] = a.build
    cluster = os.path.join(ROOT, "scripts", "cluster")
    up = [cluster, "up", "-n", "3"]
    for kv in a.set:
        up += ["--set", kv]
    try:
        r = sh(up, env=env, timeout=120)
        line = [l for l in r.stdout.splitlines() if l.startswith("HASP_CLUSTER=")][-1]
        addrs = line.split("=", 1)[1]
        pids = [int(open(os.path.join(cdir, "n%d" % i, "pid")).read()) for i in (1, 2, 3)]
        stats_files = [os.path.join(cdir, "n%d" % i, "stats.json") for i in (1, 2, 3)]
        results = []
        for c in counts:
            results.append(run_one(a, c, env, cluster, addrs, pids, stats_files, out))
        print_tables(results, a)
        with open(os.path.join(out, "cost.json"), "w") as f:
            json.dump(results, f, indent=1)
        print("cost: results in %s" % out, file=sys.stderr)
    finally:
        sh([cluster, "down"], env=env, timeout=120, check=False)
        if made_dir:
            subprocess.run(["rm", "-rf", cdir])


def run_one(a, clients, env, cluster, addrs, pids, stats_files, out):
    keys = max(1024, clients * 4)
    # Settle: let the cluster elect and the previous run's sessions go.
    time.sleep(1)
    base = [os.path.join(a.build, "tools", "hasp-bench"), "--cluster", addrs, "--workload", "cycle",
            "--timeout", "1000"] if a.client == "bench" else \
           [os.path.join(a.build, "perf", "peer-hasp"), "--endpoints", addrs, "--ttl", "10000"]
    common = ["--clients", str(clients), "--keys", str(keys), "--duration", str(a.duration),
              "--warmup", str(a.warmup), "--count", "100000000",
              "--prefix", "cost%d" % clients]
    res_path = os.path.join(out, "bench-%d.json" % clients)
    cmd = [cluster, "exec", "--"] + base + common + ["--out", res_path]
    s0 = [flat(s) for s in node_stats(pids, stats_files)]
    leader = next((i for i, s in enumerate(s0) if s.get("is_leader")), 0)
    t0 = [ticks(p) for p in pids]
    w0 = [io_write_bytes(p) for p in pids]
    m0, k0 = machine_busy_ticks(), kworker_ticks()
    stat_paths = [os.path.join(out, "perfstat-%d-n%d.txt" % (clients, i + 1)) for i in range(3)]
    stats_procs = [perf_stat_start(p, sp) for p, sp in zip(pids, stat_paths)]
    rec = None
    data = os.path.join(out, "perf-%d.data" % clients)
    if a.profile:
        rec = subprocess.Popen(["perf", "record", "-q", "-e", "cpu-clock", "-F", "2000", "-o", data,
                                "-p", str(pids[leader])], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall0 = time.monotonic()
    r = sh(cmd, env=env, timeout=a.duration + a.warmup + 120, check=False)
    wall = time.monotonic() - wall0
    if rec is not None:
        rec.send_signal(signal.SIGINT)
        rec.wait(timeout=60)
    sys_counts = [perf_stat_stop(p, sp) for p, sp in zip(stats_procs, stat_paths)]
    t1 = [ticks(p) for p in pids]
    w1 = [io_write_bytes(p) for p in pids]
    m1, k1 = machine_busy_ticks(), kworker_ticks()
    # A worker that exited during the run takes its time with it, and one
    # started meanwhile counts from zero: a lower bound.
    kworker_s = sum(max(0, t - k0.get(pid, 0)) for pid, t in k1.items()) / HZ
    s1 = [flat(s) for s in node_stats(pids, stats_files)]
    if r.returncode != 0 or not os.path.exists(res_path):
        sys.exit("cost: the load at %d clients failed (%d): %s" % (clients, r.returncode, r.stderr[-2000:]))
    bench = json.load(open(res_path))
    res = bench["results"]
    cycles = res["cycles"] or 1
    # The counters cover the whole client run (warm-up, drain and session
    # set-up included): divide by every cycle the run completed, measured
    # ones plus the warm-up's (estimated at the measured rate).
    total_cycles = cycles + res["cycles_per_s"] * a.warmup
    nodes = []
    for i in range(3):
        d = lambda k: s1[i].get(k, 0) - s0[i].get(k, 0)
        nodes.append({
            "node": i + 1,
            "role": "leader" if s1[i].get("is_leader") else "follower",
            "cpu_s": (t1[i] - t0[i]) / HZ,
            "cpu_us_per_cycle": (t1[i] - t0[i]) / HZ * 1e6 / total_cycles,
            "datagrams_in_per_cycle": d("dp_rx_udp") / total_cycles,
            "datagrams_out_per_cycle": d("dp_tx_udp") / total_cycles,
            "frames_in_per_cycle": d("dp_rx_frames") / total_cycles,
            "frames_out_per_cycle": d("dp_tx_frames") / total_cycles,
            "syscalls_per_cycle": sys_counts[i].get("sys_enter", 0) / total_cycles,
            "io_uring_enter_per_cycle": sys_counts[i].get("sys_enter_io_uring_enter", 0) / total_cycles,
            "readv_per_cycle": sys_counts[i].get("sys_enter_readv", 0) / total_cycles,
            "writev_per_cycle": sys_counts[i].get("sys_enter_writev", 0) / total_cycles,
            "ppoll_per_cycle": sys_counts[i].get("sys_enter_ppoll", 0) / total_cycles,
            "fsyncs_per_cycle": d("wal_writes") / total_cycles,
            "wal_appends_per_cycle": d("wal_appends") / total_cycles,
            "wal_bytes_per_cycle": (w1[i] - w0[i]) / total_cycles,
            "idle_sleeps_per_cycle": d("dp_idle_sleeps") / total_cycles,
            "loop_iterations_per_cycle": d("dp_loop_iterations") / total_cycles,
            "raft_msgs_out_per_cycle": d("raft_msg_sent") / total_cycles,
        })
    lat = res["latency_us"].get("acquire", {})
    rec_out = {"clients": clients, "client": a.client, "cycles_per_s": res["cycles_per_s"],
               "cycles": cycles, "cycles_counted": total_cycles, "wall_s": wall,
               "acquire_p50_us": lat.get("p50"), "acquire_p99_us": lat.get("p99"),
               "cpu_s_per_1000_cycles": sum(n["cpu_s"] for n in nodes) * 1000 / total_cycles,
               # Everything else on the machine too: the client, the
               # kernel's workers, and whatever else runs (docs/PERFORMANCE.md
               # "wal_sync = dsync").
               "kworker_us_per_cycle": kworker_s * 1e6 / total_cycles,
               "machine_us_per_cycle": (m1 - m0) / HZ * 1e6 / total_cycles,
               "loadavg": open("/proc/loadavg").read().split()[:3], "nodes": nodes,
               "settings": a.set, "command": " ".join(cmd)}
    if a.profile:
        total, stages, top = profile_report(data, 25)
        cpu_leader = nodes[leader]["cpu_us_per_cycle"]
        rec_out["profile"] = {"node": leader + 1, "samples": total,
                              "stages": {k: v / total for k, v in sorted(stages.items(), key=lambda x: -x[1])},
                              "stage_us_per_cycle": {k: cpu_leader * v / total for k, v in stages.items()},
                              "top": [{"samples": n, "dso": dso, "sym": sym, "stage": st}
                                      for n, dso, sym, st in top]}
        os.unlink(data)
    with open(os.path.join(out, "cost-%d.json" % clients), "w") as f:
        json.dump(rec_out, f, indent=1)
    print("cost: %d clients: %.0f cycles/s" % (clients, res["cycles_per_s"]), file=sys.stderr)
    return rec_out


ROWS = [
    ("datagrams in", "datagrams_in_per_cycle", "%.2f"),
    ("datagrams out", "datagrams_out_per_cycle", "%.2f"),
    ("system calls", "syscalls_per_cycle", "%.1f"),
    ("  readv (tap RX)", "readv_per_cycle", "%.1f"),
    ("  writev (tap TX)", "writev_per_cycle", "%.1f"),
    ("  ppoll (idle waits)", "ppoll_per_cycle", "%.2f"),
    ("  io_uring_enter", "io_uring_enter_per_cycle", "%.2f"),
    ("fsyncs (WAL writes)", "fsyncs_per_cycle", "%.3f"),
    ("WAL bytes written", "wal_bytes_per_cycle", "%.0f"),
    ("raft messages sent", "raft_msgs_out_per_cycle", "%.2f"),
    ("loop iterations", "loop_iterations_per_cycle", "%.0f"),
    ("CPU us", "cpu_us_per_cycle", "%.0f"),
]


def print_tables(results, a):
    for r in results:
        print("\n**%d clients (%s), %.0f cycles/s, acquire p50 %s us p99 %s us, %.3f CPU-s per 1000 cycles "
              "(3 nodes), kworkers %.1f us and the machine %.1f us per cycle, load average %s**\n"
              % (r["clients"], r["client"], r["cycles_per_s"], r["acquire_p50_us"], r["acquire_p99_us"],
                 r["cpu_s_per_1000_cycles"], r["kworker_us_per_cycle"], r["machine_us_per_cycle"],
                 " ".join(r["loadavg"])))
        print("| per cycle | " + " | ".join("n%d (%s)" % (n["node"], n["role"]) for n in r["nodes"]) + " |")
        print("|---|" + "---:|" * len(r["nodes"]))
        for label, key, fmt in ROWS:
            print("| %s | " % label + " | ".join(fmt % n[key] for n in r["nodes"]) + " |")
        if "profile" in r:
            p = r["profile"]
            print("\nleader n%d, %d samples: " % (p["node"], p["samples"]) +
                  ", ".join("%s %.0f%% (%.0f us)" % (k, 100 * v, p["stage_us_per_cycle"][k])
                            for k, v in p["stages"].items()))
            for t in p["top"][:12]:
                print("    %6d  %-10s %-40s %s" % (t["samples"], t["dso"][:10], t["sym"][:40], t["stage"]))


if __name__ == "__main__":
    main()
