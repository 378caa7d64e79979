"""Python call overhead of a small operator against the same call from C++.

    python -m kiln.bench_overhead [--calls N] [--impl dawn|wgpu] [--backend B]

Times kiln.ops.add on two [1]-element float32 tensors (the kernel compiled
and cached beforehand) three ways: the Python function (operand checks,
cache lookup, the program's run), the cached program's run() called from
Python, and the same run called in a C++ loop inside the extension (output
allocation, the call's checks, recording the dispatch; no Python). Each
figure is the best of several interleaved rounds of N calls, in microseconds per call;
the work is recorded and submitted in batches of 256 dispatches as in normal
use, and waited for between rounds.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np

import kiln


def measure(device: kiln.Device, calls: int = 2000, rounds: int = 7) -> dict:
    a = kiln.tensor(np.ones(1, np.float32), device)
    b = kiln.tensor(np.ones(1, np.float32), device)
    add = kiln.ops.add
    add(a, b).numpy()  # compile, load and cache
    program = device._cache[("elementwise", "add", a._sig, b._sig)]
    inputs = [a, b]

    def python_op():
        device.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            add(a, b)
        return (time.perf_counter() - t0) / calls

    def python_run():
        device.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            program.run(inputs)
        return (time.perf_counter() - t0) / calls

    def cpp_run():
        device.synchronize()
        return program._time_cpp_calls(inputs, calls) / calls

    # Rounds interleaved, so that drift of the machine hits all three alike.
    best = {"cpp_us": float("inf"), "python_run_us": float("inf"),
            "python_op_us": float("inf")}
    for _ in range(rounds):
        for key, fn in (("cpp_us", cpp_run), ("python_run_us", python_run),
                        ("python_op_us", python_op)):
            best[key] = min(best[key], fn() * 1e6)
    result = {"device": repr(device), "calls": calls, **best}
    device.synchronize()
    result["extra_run_us"] = result["python_run_us"] - result["cpp_us"]
    result["extra_op_us"] = result["python_op_us"] - result["cpp_us"]
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--impl")
    p.add_argument("--backend")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    device = kiln.Device(impl=args.impl, backend=args.backend) if args.impl or args.backend \
        else kiln.default_device()
    r = measure(device, args.calls, args.rounds)
    r["cpu"] = platform.processor() or platform.machine()
    if args.json:
        print(json.dumps(r))
        return
    print(f"device: {r['device']}")
    print(f"kiln.ops.add, [1] + [1] float32, best of {args.rounds} rounds of {args.calls} calls")
    print(f"  C++ loop (Program::Run)        {r['cpp_us']:8.2f} us/call")
    print(f"  Python program.run([a, b])     {r['python_run_us']:8.2f} us/call "
          f"(+{r['extra_run_us']:.2f})")
    print(f"  Python kiln.ops.add(a, b)      {r['python_op_us']:8.2f} us/call "
          f"(+{r['extra_op_us']:.2f})")


if __name__ == "__main__":
    main()
