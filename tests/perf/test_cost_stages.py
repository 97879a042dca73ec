#!/usr/bin/env python3
"""perf/cost.py's profile stages without a cluster: a sampled symbol goes
to the stage of hasp's code it names, and a kernel symbol never to one of
hasp's own stages because its name happens to contain their pattern."""
import os
import sys
import unittest

import perf_script  # tests/perf/perf_script.py, beside this file

ROOT = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
KERNEL = "[kernel.kallsyms]"


class Stages(unittest.TestCase):
    def setUp(self):
        self.m = perf_script.load(ROOT, "cost.py")

    def test_hasps_functions_go_to_their_stages(self):
        for sym, stage in (("locks_apply", "apply"), ("session_seq_record", "apply"),
                           ("raft_step", "Raft"), ("hasp_wire_decode", "parse"),
                           ("send_reply", "reply"), ("hasp_wire_seal", "auth"),
                           ("wal_append", "WAL"), ("classify_frame", "packet I/O")):
            self.assertEqual(self.m.stage_of(sym, "haspd"), stage, sym)

    def test_kernel_symbols_never_land_in_hasps_stages(self):
        for sym, stage in (("_raw_spin_unlock_irqrestore", "other (kernel)"),
                           ("_raw_spin_unlock_irq", "other (kernel)"),
                           ("crypto_shash_update", "other (kernel)"),
                           ("finish_task_switch.isra.0", "scheduler"),
                           ("ext4_sync_file", "WAL"), ("veth_xmit", "packet I/O"),
                           ("packet_sendmsg", "packet I/O"), ("tpacket_rcv", "packet I/O"),
                           ("irqentry_exit_to_user_mode", "syscall entry")):
            self.assertEqual(self.m.stage_of(sym, KERNEL), stage, sym)

    def test_unknown_symbols_are_other_by_side(self):
        self.assertEqual(self.m.stage_of("frobnicate", "haspd"), "other (user)")
        self.assertEqual(self.m.stage_of("frobnicate", KERNEL), "other (kernel)")


if __name__ == "__main__":
    unittest.main()
