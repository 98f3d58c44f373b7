"""The bytes of a search index file (`<db>.search`, format CNPJSRC8) by part: its columns, each
posting table's bitmaps (and keys), the directory. Not a test: a figure for BENCHMARKS.md, e.g.
which of the index's bytes the analysts' filters (contract §15) or the partners (§14) take.

Run: python3 crates/cnpj-etl/benches/index-tables.py <db>.search
"""

import os
import struct
import sys


def varint(buf, pos):
    value, shift = 0, 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, pos


def main(path):
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(size - 24)
        _checksum, at, magic = struct.unpack("<QQ8s", f.read(24))
        assert magic == b"CNPJSRC8", f"not a search index of this version: {magic!r}"
        f.seek(at)
        directory = f.read(size - 24 - at)
    pos = 0
    lower, pos = varint(directory, pos)
    upper, pos = varint(directory, pos)
    for _ in range(3):
        _, pos = varint(directory, pos)
    partners, pos = varint(directory, pos)
    _, pos = varint(directory, pos)
    tables, pos = varint(directory, pos)
    rows = lower + upper
    parts = [("columns (cnpjs, days, ceps)", rows * 11, 0), ("partners' ids", partners * 10, 0)]
    for _ in range(tables):
        n, pos = varint(directory, pos)
        name = directory[pos : pos + n].decode()
        pos += n
        count, pos = varint(directory, pos)
        _, pos = varint(directory, pos)
        total = 0
        for _ in range(count):
            n, pos = varint(directory, pos)
            pos += n
            span, pos = varint(directory, pos)
            pos += 4
            total += span >> 1
        parts.append((name, total, count))
    parts.append(("directory", size - at, 0))
    print(f"{path}: {size / 1e6:,.1f} MB, {rows:,} establishments, {partners:,} partners")
    print(f"{'part':<30} {'keys':>12} {'MB':>10} {'share':>7}")
    for name, total, count in sorted(parts, key=lambda p: -p[1]):
        print(f"{name:<30} {count:>12,} {total / 1e6:>10,.1f} {total / size:>7.1%}")


if __name__ == "__main__":
    main(sys.argv[1])
