#!/usr/bin/env python3
"""Writes and reads .npy files for tests/cli_test.sh with the standard library only.

  npy_files.py vectors DIR N      inputs of vector_add and malformed files in DIR
  npy_files.py check_sum FILE N   FILE holds f32 (N,) with element i equal to 1.5 * i
  npy_files.py header FILE        prints FILE's header dictionary
"""
import ast
import struct
import sys


def write(path, descr, shape, fmt, values, version=1, fortran=False, header=None, extra=b""):
    if header is None:
        dims = "".join(f"{d}, " for d in shape)
        shape_text = f"({shape[0]},)" if len(shape) == 1 else f"({dims.rstrip(', ')})"
        header = f"{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape_text}, }}"
    header = header.encode("latin1")
    pre = 10 if version == 1 else 12
    header += b" " * ((64 - (pre + len(header) + 1) % 64) % 64) + b"\n"
    length = struct.pack("<H" if version == 1 else "<I", len(header))
    data = struct.pack("<" + fmt * len(values), *values) if values else b""
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY" + bytes([version, 0]) + length + header + data + extra)


def read(path):
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY", "no magic"
    major = b[6]
    pre = 10 if major == 1 else 12
    n = struct.unpack("<H" if major == 1 else "<I", b[8:pre])[0]
    start = pre + n
    assert start % 64 == 0, "the data does not start at a multiple of 64"
    header = ast.literal_eval(b[pre:start].decode("latin1"))
    return header, b[start:]


def main():
    cmd = sys.argv[1]
    if cmd == "vectors":  # A[i] = i, B[i] = 0.5 * i
        d, n = sys.argv[2], int(sys.argv[3])
        write(f"{d}/a.npy", "<f4", (n,), "f", [float(i) for i in range(n)])
        write(f"{d}/b.npy", "<f4", (n,), "f", [0.5 * i for i in range(n)], version=2)
        write(f"{d}/b2d.npy", "<f4", (n // 2, 2), "f", [0.5 * i for i in range(n)], version=3)
        write(f"{d}/short.npy", "<f4", (n - 1,), "f", [0.0] * (n - 1))
        write(f"{d}/int.npy", "<i4", (n,), "i", [0] * n)
        write(f"{d}/fortran.npy", "<f4", (n,), "f", [0.0] * n, fortran=True)
        write(f"{d}/f8.npy", "<f8", (n,), "d", [0.0] * n)
        write(f"{d}/bigendian.npy", ">f4", (n,), "f", [0.0] * n)
        write(f"{d}/truncated.npy", "<f4", (n,), "f", [0.0] * (n - 3))
        write(f"{d}/trailing.npy", "<f4", (n,), "f", [0.0] * n, extra=b"xx")
        write(f"{d}/header.npy", "", (), "f", [], header="{'descr': '<f4', 'shape': (4,}")
        write(f"{d}/noshape.npy", "", (), "f", [],
              header="{'descr': '<f4', 'fortran_order': False}")
        write(f"{d}/version.npy", "<f4", (n,), "f", [0.0] * n, version=9)
        with open(f"{d}/magic.npy", "wb") as f:
            f.write(b"PK\x03\x04 not an array at all")
    elif cmd == "check_sum":
        header, data = read(sys.argv[2])
        n = int(sys.argv[3])
        assert header["descr"] == "<f4" and header["shape"] == (n,), header
        assert header["fortran_order"] is False, header
        c = struct.unpack(f"<{n}f", data)
        assert all(c[i] == 1.5 * i for i in range(n)), c[:8]
    elif cmd == "header":
        print(read(sys.argv[2])[0])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
