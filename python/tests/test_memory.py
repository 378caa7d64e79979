"""Device memory: a dropped tensor's buffer serves later work on the same
queue (queue-ordered reuse), never work that would run before the earlier
uses are done, and never while a view of it lives."""

import numpy as np

import kiln


def _reuses(device):
    return device.memory_stats()["queue_ordered_reuses"]


def test_memory_stats_names_its_counts(device):
    stats = device.memory_stats()
    assert set(stats) == {"allocated_bytes", "peak_allocated_bytes", "buffers_created",
                          "pooled_bytes", "reusable_bytes", "reusable_buffers",
                          "queue_ordered_reuses"}
    assert all(isinstance(v, int) and v >= 0 for v in stats.values())
    assert stats["peak_allocated_bytes"] >= stats["allocated_bytes"]


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
    # With nothing recorded, an upload may take a kept buffer.
    del b
    device.synchronize()
    before = _reuses(device)
    z = kiln.tensor(xs, device=device)
    assert _reuses(device) == before + 1
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
