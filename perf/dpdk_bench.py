"""hasp-bench --dpdk on its own TAP, attached to a local cluster's bridge
(scripts/cluster's names: HASP_NET_NAME's bridge <net>br0 in the network
namespace hasp-<net>), for perf/run's dpdk scenarios and perf/engines
--dpdk. The EAL makes the TAP when hasp-bench starts; it is attached once
it appears, and goes away with the process. The DPDK runtime directory is
removed after the run."""
import os
import subprocess
import time


def names(net_name):
    """The TAP, the EAL file prefix and the bridge of a cluster's net name."""
    return net_name + "b0", net_name + "-bench", net_name + "br0"


def args(net_name, subnet):
    """hasp-bench's --dpdk arguments: address .50 of the cluster's subnet,
    the machine's last CPU, no hugepages."""
    tap, prefix, _ = names(net_name)
    core = str(max(0, (os.cpu_count() or 1) - 1))
    return ["--dpdk", "--ip", subnet + ".50/24", "--mac", "02:77:00:00:00:50", "--settle-ms", "1500",
            "--", "-l", core, "--no-huge", "-m", "64", "--no-pci", "--file-prefix", prefix,
            "--no-telemetry", "--vdev=net_tap0,iface=" + tap]


def run(cmd, in_ns, env, net_name, timeout_s):
    """Runs hasp-bench `cmd` (with args() in it) through in_ns(argv),
    attaches its TAP, and waits (bounded) for it to end. Returns the
    CompletedProcess; RuntimeError when the TAP never came or could not be
    attached (a TAP left off the bridge would make the run time out with
    no word of why)."""
    tap, prefix, bridge = names(net_name)
    proc = subprocess.Popen(in_ns(cmd), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        attached = False
        for _ in range(100):
            if subprocess.call(in_ns(["ip", "link", "show", tap]), env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL) == 0:
                for link_args in (["master", bridge], ["up"]):
                    if subprocess.call(in_ns(["ip", "link", "set", tap] + link_args), env=env) != 0:
                        raise RuntimeError("cannot attach %s to %s" % (tap, bridge))
                attached = True
                break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if not attached and proc.poll() is None:
            raise RuntimeError("hasp-bench --dpdk made no TAP %s within 10 s" % tap)
        out, err = proc.communicate(timeout=timeout_s)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        subprocess.call(["rm", "-rf", "/var/run/dpdk/" + prefix])
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
