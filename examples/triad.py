"""The triad of the 2007 placement framework in Python: a = b + s * c with
each numpy array on its own node (bind:0, bind:1, bind:2 where the machine
has three memory nodes; fewer are reused in turn), the thread on the first
CPU of the first node, every placement verified from the kernel.

    python3 examples/triad.py [ELEMENTS]
"""

import sys
import time

import numpy as np

import numalab


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 22
    everything = numalab.global_set()
    nodes = everything.nodes
    print(f"machine: {len(nodes)} memory node{'s' if len(nodes) != 1 else ''}")
    home = numalab.parse_set(f"node:{nodes[0]}")
    cpu = numalab.bind_team_member(home, "compact", 1, 0)

    arrays = {}
    for i, name in enumerate("abc"):
        policy = f"bind:{nodes[i % len(nodes)]}"
        arrays[name] = numalab.empty(n, np.float64, policy=policy)
        check = numalab.verify(arrays[name])
        shares = ", ".join(
            f"node {node}: {pages} pages ({100.0 * pages / check.pages.total:.1f}%)"
            for node, pages in sorted(check.pages.by_node.items())
        )
        state = "verified" if check.verified else "NOT VERIFIED: " + "; ".join(check.problems)
        print(f"{name}: {policy:<8} {state}  {shares}")
    thread = numalab.check_thread(numalab.parse_set(f"cpu:{cpu}"))
    print(f"thread: CPU {cpu} {'verified' if thread.verified else thread.problems}")

    a, b, c = arrays["a"], arrays["b"], arrays["c"]
    b[:] = 1.0
    c[:] = 2.0
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        np.multiply(c, 3.0, out=a)
        np.add(a, b, out=a)
        best = min(best, time.perf_counter() - t0)
    ok = bool(a[0] == 7.0 and a[-1] == 7.0)
    print(f"triad: {n} elements, best of 5 {best * 1e3:.3f} ms, result {'correct' if ok else 'WRONG'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
