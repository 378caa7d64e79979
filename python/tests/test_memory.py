"""Device memory: a dropped tensor's buffer serves later work on the same
queue (queue-ordered reuse), never work that would run before the earlier
uses are done, and never while a view of it lives."""

import os
import subprocess
import sys

import numpy as np
import pytest

import kiln


def _reuses(device):
    return device.memory_stats()["queue_ordered_reuses"]


def _own_device(device, monkeypatch):
    """A device of the fixture's kind with the automatic pool, whatever
    KILN_BUFFER_POOL_MB says, and no earlier test's buffers."""
    monkeypatch.delenv("KILN_BUFFER_POOL_MB", raising=False)
    return kiln.Device(impl=device.impl, backend=device.backend)


def test_memory_stats_names_its_counts(device):
    stats = device.memory_stats()
    assert set(stats) == {"allocated_bytes", "peak_allocated_bytes", "buffers_created",
                          "pooled_bytes", "reusable_bytes", "reusable_buffers",
                          "queue_ordered_reuses", "pool_capacity_bytes"}
    assert all(isinstance(v, int) and v >= 0 for v in stats.values())
    assert stats["peak_allocated_bytes"] >= stats["allocated_bytes"]
    if "KILN_BUFFER_POOL_MB" not in os.environ:  # else fixed
        assert stats["pool_capacity_bytes"] == max(256 << 20, stats["peak_allocated_bytes"])


def test_a_reused_buffer_is_written_after_its_earlier_reads(device, rng):
    xs = rng.standard_normal((33, 1000)).astype(np.float32)
    x = kiln.tensor(xs, device=device)
    device.synchronize()
    before = _reuses(device)
    a = x * np.float32(2)
    b = a + np.float32(1)   # reads a: recorded, not yet run
    del a                   # its buffer is kept for reuse, b's read still to run
    c = x - np.float32(3)   # takes it: its write must run after b's read
    d = c * c
    assert _reuses(device) > before
    np.testing.assert_array_equal(b.numpy(), xs * np.float32(2) + np.float32(1))
    np.testing.assert_array_equal(c.numpy(), xs - np.float32(3))
    np.testing.assert_array_equal(d.numpy(), (xs - np.float32(3)) * (xs - np.float32(3)))


def test_an_upload_takes_no_buffer_recorded_work_still_uses(device, rng):
    xs = rng.standard_normal((7, 33)).astype(np.float32)
    ys = rng.standard_normal((7, 33)).astype(np.float32)
    x = kiln.tensor(xs, device=device)
    device.synchronize()
    a = x * np.float32(2)   # recorded, not submitted: it writes a's buffer
    b = a + np.float32(1)
    del a
    # Submitted at once, the upload runs before the recorded work: in a's
    # buffer it would be overwritten by a's write.
    y = kiln.tensor(ys, device=device)
    np.testing.assert_array_equal(y.numpy(), ys)
    np.testing.assert_array_equal(b.numpy(), xs * np.float32(2) + np.float32(1))
    # Once the work is done, a's buffer is idle: the upload may take it.
    del b
    device.synchronize()
    created = device.memory_stats()["buffers_created"]
    z = kiln.tensor(xs, device=device)
    assert device.memory_stats()["buffers_created"] == created
    np.testing.assert_array_equal(z.numpy(), xs)


def test_a_view_keeps_its_buffer_from_reuse(device, rng):
    xs = rng.standard_normal((5, 40)).astype(np.float32)
    x = kiln.tensor(xs, device=device)
    m = x > np.float32(0)   # a bool view of the comparison's 32-bit result
    r = kiln.ops.reshape(x, (40, 5))
    flat = kiln.ops.reshape(r, (200,))
    del r
    # Work of the same byte size as m's buffer: none of it may take it.
    ys = [x * np.float32(i) for i in range(1, 6)]
    np.testing.assert_array_equal(m.numpy(), xs > 0)
    np.testing.assert_array_equal(flat.numpy(), xs.reshape(200))
    for i, y in enumerate(ys, 1):
        np.testing.assert_array_equal(y.numpy(), xs * np.float32(i))


def test_a_loop_of_passes_holds_one_pass_of_memory(device, rng):
    n, width = 64, 96
    xs = rng.standard_normal((n, width)).astype(np.float32)
    ws = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
    x, w = kiln.tensor(xs, device=device), kiln.tensor(ws, device=device)
    device.synchronize()

    def step(h):
        t = kiln.ops.matmul(h, w)
        return kiln.ops.tanh(t + np.float32(0.5)) + h

    h, ref = x, xs.astype(np.float64)
    held = []
    for i in range(24):
        h = step(h)
        ref = np.tanh(ref @ ws.astype(np.float64) + 0.5) + ref
        held.append(device.memory_stats()["allocated_bytes"])
    # Nothing waited: without reuse every pass's buffers stay allocated
    # until the work is done; with it, later passes take earlier ones'.
    assert held[-1] - held[3] < n * width * 4 * 2, held
    np.testing.assert_allclose(h.numpy(), ref, rtol=2e-4, atol=2e-4)


def test_no_pool_no_reuse(device, rng, monkeypatch):
    monkeypatch.setenv("KILN_BUFFER_POOL_MB", "0")
    d = kiln.Device(impl=device.impl, backend=device.backend)
    xs = rng.standard_normal((3, 50)).astype(np.float32)
    x = kiln.tensor(xs, device=d)
    a = x + np.float32(1)
    del a
    b = x * np.float32(3)
    stats = d.memory_stats()
    assert stats["queue_ordered_reuses"] == 0 and stats["reusable_bytes"] == 0, stats
    np.testing.assert_array_equal(b.numpy(), xs * np.float32(3))


def test_uploads_while_work_is_recorded_hold_bounded_memory(device, rng):
    """Batches uploaded while earlier work is recorded take no kept buffer;
    once that work is done, theirs go to the idle pool, which later uploads
    take: the loop's memory stops growing."""
    ws = rng.standard_normal((256, 10)).astype(np.float32)
    w = kiln.tensor(ws, device=device)
    acc = kiln.tensor(np.zeros((64, 10), np.float32), device=device)
    batches = [rng.standard_normal((64, 256)).astype(np.float32) for _ in range(3)]
    created = []
    for i in range(400):
        x = kiln.tensor(batches[i % 3], device=device)
        acc = acc + kiln.ops.matmul(x, w)
        if i % 100 == 99:
            created.append(device.memory_stats()["buffers_created"])
    assert created[-1] - created[-2] <= 2, created
    want = sum((b.astype(np.float64) @ ws.astype(np.float64)) for b in batches) * 133 + \
        batches[0].astype(np.float64) @ ws.astype(np.float64)
    np.testing.assert_allclose(acc.numpy(), want, rtol=1e-4, atol=1e-2)


def test_kept_and_idle_buffers_share_the_pool_capacity(device, monkeypatch):
    monkeypatch.setenv("KILN_BUFFER_POOL_MB", "1")
    d = kiln.Device(impl=device.impl, backend=device.backend)
    x = kiln.tensor(np.ones(16384, np.float32), device=d)  # 64 KiB

    def held():
        s = d.memory_stats()
        assert s["reusable_bytes"] + s["pooled_bytes"] <= 1 << 20, s
        return s
    ys = [x * np.float32(i) for i in range(24)]  # 1.5 MiB, recorded
    del ys
    assert held()["reusable_bytes"] > 0
    d.synchronize()
    assert held()["reusable_bytes"] == 0  # the work done: idle, pooled
    z = x * np.float32(2)
    us = [kiln.tensor(np.full(4096, i, np.float32), device=d) for i in range(64)]
    d.synchronize()
    del us
    held()
    np.testing.assert_array_equal(z.numpy(), np.full(16384, 2, np.float32))


def test_an_upload_asks_what_is_recorded_after_waiting(device, rng):
    """A wait inside kiln.tensor (for work an earlier wait gave up on) runs
    Python's signal handlers; one that records work taking a kept buffer
    must not leave that buffer to the upload."""
    import signal
    xs = rng.standard_normal(1000).astype(np.float32)
    x = kiln.tensor(xs, device=device)
    g = x * np.float32(5)
    del g
    device.synchronize()
    w = kiln.tensor((rng.standard_normal((512, 512)) / 23).astype(np.float32), device=device)
    h = w
    for _ in range(12):
        h = kiln.ops.matmul(h, w)
    device.timeout = 0.001
    try:
        device.synchronize()
        gave_up = False
    except kiln.DeadlineExceeded:
        gave_up = True
    finally:
        device.timeout = None
    if not gave_up:
        pytest.skip("the device finished the work within 1 ms: no wait to give up on")
    fired = []

    def handler(signum, frame):
        if not fired:
            fired.append(1)
            tmp = x * np.float32(2)  # takes the kept buffer; recorded, not submitted
            del tmp
    old = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.0005)
        ys = rng.standard_normal(1000).astype(np.float32)
        y = kiln.tensor(ys, device=device)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if not fired:
        pytest.skip("the wait ended before the signal came")
    np.testing.assert_array_equal(y.numpy(), ys)


def test_a_loop_past_the_pool_floor_makes_no_buffer_after_its_first_step(device, rng,
                                                                        monkeypatch):
    """The pool keeps as many bytes as were ever allocated at once (at least
    256 MiB): a step holding more than 256 MiB live finds every buffer its
    last step freed."""
    device = _own_device(device, monkeypatch)
    n = 6 << 20   # 24 MiB a tensor; 14 of them live at once
    xs = rng.standard_normal(n).astype(np.float32)
    x = kiln.tensor(xs, device=device)

    def step():
        ys = [x * np.float32(i) for i in range(12)]
        total = ys[0]
        for y in ys[1:]:
            total = total + y
        return total
    made = []
    for _ in range(4):
        before = device.memory_stats()["buffers_created"]
        total = step()
        got = total.numpy()
        made.append(device.memory_stats()["buffers_created"] - before)
    stats = device.memory_stats()
    assert stats["peak_allocated_bytes"] > 256 << 20, stats
    assert stats["pool_capacity_bytes"] == stats["peak_allocated_bytes"], stats
    # (The second step makes one more: the first's result is held while it runs.)
    assert made[0] >= 12 and made[1] <= 1 and made[2:] == [0, 0], made
    np.testing.assert_allclose(got, xs * np.float32(66), rtol=1e-5)
    del total
    device.empty_cache()
    stats = device.memory_stats()
    assert stats["pooled_bytes"] == 0 and stats["reusable_bytes"] == 0, stats


def test_empty_cache_waits_then_gives_kept_and_idle_buffers_back(device, rng, monkeypatch):
    device = _own_device(device, monkeypatch)
    xs = rng.standard_normal((33, 100)).astype(np.float32)
    x = kiln.tensor(xs, device=device)
    ys = [x + np.float32(i) for i in range(4)]   # recorded
    del ys                                        # kept: work still uses them
    z = x * np.float32(3)
    assert device.memory_stats()["reusable_bytes"] > 0
    device.empty_cache()
    stats = device.memory_stats()
    assert stats["pooled_bytes"] == 0 and stats["reusable_bytes"] == 0, stats
    np.testing.assert_array_equal(z.numpy(), xs * np.float32(3))
    # The next tensor makes its buffer anew.
    before = device.memory_stats()["buffers_created"]
    w = x - np.float32(1)
    assert device.memory_stats()["buffers_created"] == before + 1
    np.testing.assert_array_equal(w.numpy(), xs - np.float32(1))


def test_out_of_memory_waits_for_queued_work_and_tries_again(device, rng, monkeypatch):
    """Where the device is out of memory, the buffers queued work and kept
    tensors hold are freed by waiting for the work, and the allocation is
    tried once more; only a second failure is an error, which names the
    size."""
    d = _own_device(device, monkeypatch)
    xs = rng.standard_normal((17, 100)).astype(np.float32)
    x = kiln.tensor(xs, device=d)
    d.empty_cache()         # nothing idle: the allocator's own retry finds nothing to free
    a = x * np.float32(2)
    b = a + np.float32(1)   # recorded, not submitted
    del a                   # kept for reuse
    assert d.memory_stats()["reusable_bytes"] > 0
    d._fail_buffer_creations(1)
    c = kiln.empty((5, 999), np.float32, device=d)   # a new size class
    stats = d.memory_stats()
    assert stats["reusable_bytes"] == 0, stats   # waited: kept buffers freed
    np.testing.assert_array_equal(b.numpy(), xs * np.float32(2) + np.float32(1))
    d.empty_cache()
    e = x - np.float32(1)   # recorded work again, then three failures: the
    f = e * e               # first try, after the wait, and after the wait
    del e                   # put e's buffer in the pool and it was emptied
    d._fail_buffer_creations(3)
    with pytest.raises(kiln.OutOfMemory, match="after waiting for queued work and emptying "
                       "kiln's pool of idle buffers: allocating a buffer of 19980 bytes: out "
                       "of memory"):
        kiln.empty((5, 999), np.float32, device=d)
    assert d.memory_stats()["pooled_bytes"] == 0
    np.testing.assert_array_equal(f.numpy(), (xs - np.float32(1)) ** 2)
    d._fail_buffer_creations(0)
    assert c.shape == (5, 999)


_REAL_OUT_OF_MEMORY = r"""
import resource, sys
import numpy as np
import kiln
d = kiln.Device(impl=sys.argv[1], backend=sys.argv[2])
kiln.tensor(np.ones(16, np.float32), device=d).numpy()
vm = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024
hard = resource.getrlimit(resource.RLIMIT_AS)[1]
limit = vm + (3 << 30) if hard == resource.RLIM_INFINITY else min(vm + (3 << 30), hard)
resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
held = []
try:
    for _ in range(12):
        held.append(kiln.empty((128 << 20,), np.float32, device=d))   # 512 MiB each
except kiln.OutOfMemory as e:
    print("refused:", e)
if not held or len(held) == 12:
    print("no out of memory")
    sys.exit(0)
del held
assert d.memory_stats()["pooled_bytes"] >= 512 << 20, d.memory_stats()
y = kiln.empty((160 << 20,), np.float32, device=d)   # another size class
assert d.memory_stats()["pooled_bytes"] == 0, d.memory_stats()
x = kiln.tensor(np.arange(5, dtype=np.float32), device=d) * np.float32(2)
assert (x.numpy() == np.arange(5, dtype=np.float32) * 2).all()
print("recovered")
"""


def test_a_real_out_of_memory_empties_the_pool_for_the_next_allocation(device):
    """Under an address-space limit, a device whose implementation takes
    memory at allocation runs out for real: the buffers freed then sit idle
    in the pool, and an allocation of another size class gets their memory
    once the pool is emptied and the implementation has freed them."""
    r = subprocess.run([sys.executable, "-c", _REAL_OUT_OF_MEMORY, device.impl, device.backend],
                       env={k: v for k, v in os.environ.items() if k != "KILN_BUFFER_POOL_MB"},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    if "no out of memory" in r.stdout:
        pytest.skip(f"{device}: 12 buffers of 512 MiB made under a 3 GiB address-space limit "
                    "(its memory is taken later), or none: no out of memory to recover from")
    assert "refused: allocating a buffer of 536870912 bytes" in r.stdout, r.stdout
    assert "recovered" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("pool_mb", [None, "1"])
def test_random_programs_keep_every_tensor_right(device, monkeypatch, pool_mb):
    """Random programs of uploads, operators (reshapes and bool views
    among them), drops, reads, waits and empty_cache, over sizes whose
    buffers share size classes: every tensor read, and every one left at the
    end, equals numpy's, with the automatic pool and with a 1 MiB one that
    keeps little (buffers destroyed and displaced)."""
    monkeypatch.delenv("KILN_BUFFER_POOL_MB", raising=False)
    if pool_mb:
        monkeypatch.setenv("KILN_BUFFER_POOL_MB", pool_mb)
    d = kiln.Device(impl=device.impl, backend=device.backend)
    seed = int(os.environ.get("KILN_TEST_SEED", np.random.SeedSequence().entropy % (1 << 32)))
    print(f"seed {seed} (KILN_TEST_SEED={seed} repeats it)")
    rng = np.random.default_rng(seed)
    shapes = [(1000,), (1024,), (8, 125), (1100,), (64, 64), (3, 33)]
    live = {}   # name -> (tensor, its numpy value)
    reads = 0

    def check(name):
        t, want = live[name]
        np.testing.assert_array_equal(t.numpy(), want, err_msg=f"{name}, seed {seed}")

    for step in range(250):
        action = rng.choice(["upload", "unary", "binary", "binary", "reshape", "compare",
                             "drop", "drop", "read", "wait", "empty_cache"],
                            p=[.14, .14, .16, .14, .08, .06, .1, .08, .06, .02, .02])
        name = f"t{step}"
        names = sorted(live)
        if action == "upload" or not names:
            a = rng.standard_normal(shapes[rng.integers(len(shapes))]).astype(np.float32)
            live[name] = (kiln.tensor(a, device=d), a)
        elif action == "unary":
            t, a = live[rng.choice(names)]
            if a.dtype == np.bool_:
                continue
            # (Nonzero, and an offset of its own: no two tensors alike.)
            c, o = np.float32(rng.choice([-2, -0.5, 0.5, 2])), np.float32(rng.standard_normal())
            live[name] = (t * c - o, a * c - o)
        elif action == "binary":
            first = live[rng.choice(names)]
            same = [n for n in names if live[n][1].shape == first[1].shape and
                    live[n][1].dtype == first[1].dtype == np.float32]
            if not same:
                continue
            t2, a2 = live[rng.choice(same)]
            if rng.integers(2) or np.abs(first[1]).max() * np.abs(a2).max() > 1e6:
                live[name] = (first[0] + t2, first[1] + a2)
            else:   # (products only while they stay far from overflow)
                live[name] = (first[0] * t2, first[1] * a2)
        elif action == "reshape":
            t, a = live[rng.choice(names)]
            live[name] = (kiln.ops.reshape(t, (a.size,)), a.reshape(a.size))
        elif action == "compare":
            t, a = live[rng.choice(names)]
            if a.dtype == np.bool_:
                continue
            live[name] = (t > np.float32(0), a > 0)
        elif action == "drop":
            del live[rng.choice(names)]
        elif action == "read":
            check(rng.choice(names))
            reads += 1
        elif action == "wait":
            d.synchronize()
        else:
            d.empty_cache()
    for name in sorted(live):
        check(name)
    assert reads > 0
    stats = d.memory_stats()
    if pool_mb:
        assert stats["reusable_bytes"] + stats["pooled_bytes"] <= 1 << 20, stats


_EMPTY_CACHE_RSS = r"""
import sys
import numpy as np
import kiln
def rss():
    return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) << 10
d = kiln.Device(impl=sys.argv[1], backend=sys.argv[2])
t = kiln.tensor(np.ones(128 << 20, np.float32), device=d)   # 512 MiB, its staging pooled
d.synchronize()
before = rss()
del t
d.empty_cache()
print(before - rss())
"""


def test_empty_cache_gives_the_memory_back_at_once(device):
    """On a CPU device, whose memory is the process's, the resident memory
    of a dropped tensor and its pooled staging buffer (1 GiB) is gone once
    empty_cache returns (Dawn on Vulkan frees a destroyed buffer only after a
    later submission completes: kiln makes one)."""
    if "llvmpipe" not in str(device).lower():
        pytest.skip(f"{device}: not a CPU device, its memory is not the process's to measure")
    r = subprocess.run([sys.executable, "-c", _EMPTY_CACHE_RSS, device.impl, device.backend],
                       env={k: v for k, v in os.environ.items() if k != "KILN_BUFFER_POOL_MB"},
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    freed = int(r.stdout.split()[-1])
    assert freed > 768 << 20, f"{freed >> 20} MiB given back of 1024"
