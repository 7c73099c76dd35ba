#!/usr/bin/env python3
"""Times whole commands, alternated round by round, on given cores.

    bench/alternate.py ROUNDS CORES NAME=COMMAND [NAME=COMMAND ...]

Each round runs every command once under `taskset -c CORES sh -c COMMAND`
(the order reversed every other round, so that neither always runs
first); prints min, first quartile and median wall milliseconds of each.
What docs/benchmarks/signing.md times the signers with, e.g.:

    bench/alternate.py 40 0-1 \\
        "knot=kzonesign -c knot/knot.conf -o knot/out ." \\
        "heron=target/release/examples/sign_zone . root.zone out 13 nsec"
"""
import statistics
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 4 or not sys.argv[1].isdigit():
        sys.exit(__doc__)
    rounds, cores = int(sys.argv[1]), sys.argv[2]
    commands = dict(spec.split("=", 1) for spec in sys.argv[3:])
    times = {name: [] for name in commands}
    for r in range(rounds):
        order = list(commands) if r % 2 == 0 else list(reversed(commands))
        for name in order:
            started = time.perf_counter()
            subprocess.run(["taskset", "-c", cores, "sh", "-c", commands[name]],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            times[name].append((time.perf_counter() - started) * 1000)
    for name, ms in times.items():
        ms.sort()
        print(f"{name}: min {ms[0]:.2f} p25 {ms[len(ms) // 4]:.2f} "
              f"median {statistics.median(ms):.2f} ms")


if __name__ == "__main__":
    main()
