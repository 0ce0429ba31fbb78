#!/usr/bin/env python3
"""An independent implementation of docs/FORMAT.md (Gear table, chunk boundaries, chunk ids,
sealed values), written from the document, not from the Swift code. It recomputes the committed vectors for
the seeded random inputs and compares them with Tests/XferCoreTests/VectorTests+Expected.swift,
so the document, the Swift chunker and the pinned vectors must all agree.

Run: python3 tools/check-format.py   (tools/test.sh runs it)
"""
import hashlib
import hmac
import pathlib
import re
import struct
import sys

M = (1 << 64) - 1


def splitmix64(seed):
    s = seed
    while True:
        s = (s + 0x9E3779B97F4A7C15) & M
        z = s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
        yield z ^ (z >> 31)


def gear_table():
    g = splitmix64(0x7866657267656172)
    return [next(g) for _ in range(256)]


def random_bytes(count, seed):
    """TestData.random: SplitMix64(seed) outputs as little-endian 8-byte words."""
    g = splitmix64(seed)
    words = (count + 7) // 8
    return b"".join(struct.pack("<Q", next(g)) for _ in range(words))[:count]


def top_bits(n):
    return (M << (64 - n)) & M


def chunk_lengths(data, minimum, average, maximum, level=2):
    gear = gear_table()
    bits = average.bit_length() - 1
    mask_s, mask_l = top_bits(bits + level), top_bits(bits - level)
    lengths, start, n = [], 0, len(data)
    while start < n:
        end = min(n, start + maximum)
        length = end - start
        if n - start > minimum:
            # H(p) over the 64 bytes ending at p, rolled from p - 63 = start + min - 63.
            h = 0
            for q in range(start + minimum - 64, start + minimum):
                h = ((h << 1) + gear[data[q]]) & M
            # h is now H(start + min - 1); test from p = start + min.
            for p in range(start + minimum, end):
                h = ((h << 1) + gear[data[p]]) & M
                mask = mask_s if p - start < average else mask_l
                if h & mask == 0:
                    length = p - start + 1
                    break
        lengths.append(length)
        start += length
    return lengths


def ids_digest(data, lengths):
    ids, offset = b"", 0
    for length in lengths:
        ids += hashlib.sha256(data[offset:offset + length]).digest()
        offset += length
    return hashlib.sha256(ids).hexdigest(), ids[:32].hex()


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    expected_file = root / "Tests/XferCoreTests/VectorTests+Expected.swift"
    text = expected_file.read_text()
    failures = 0

    table = gear_table()
    table_digest = hashlib.sha256(b"".join(struct.pack("<Q", v) for v in table)).hexdigest()
    pinned = re.search(r'gearDigest = "([0-9a-f]{64})"', text).group(1)
    if table_digest != pinned:
        print(f"FAIL gear table digest {table_digest} != pinned {pinned}")
        failures += 1
    else:
        print(f"ok   gear table digest {table_digest}")

    vectors = {m.group(1): (eval(m.group(2)), m.group(3), m.group(4))
               for m in re.finditer(r'\("([^"]+)", (\[[0-9, ]*\]), "([0-9a-f]{64})", "([0-9a-f]{64})"\)', text)}
    cases = [
        ("random-1MiB-default", random_bytes(1 << 20, 1), (16384, 65536, 262144)),
        ("random-256KiB-small", random_bytes(256 << 10, 2), (256, 1024, 4096)),
    ]
    for name, data, (minimum, average, maximum) in cases:
        lengths = chunk_lengths(data, minimum, average, maximum)
        digest, first = ids_digest(data, lengths)
        want = vectors.get(name)
        if want is None:
            print(f"FAIL {name}: no pinned vector")
            failures += 1
        elif (lengths, digest, first) != want:
            print(f"FAIL {name}: document and pinned vector disagree")
            failures += 1
        else:
            print(f"ok   {name}: {len(lengths)} chunks, ids digest {digest[:16]}…")
    failures += check_sealed()
    print(f"{5 - failures} passed, {failures} failed")
    return 1 if failures else 0


def check_sealed():
    """docs/FORMAT.md "Sealed values" against the vector pinned in SealingTests.swift."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    text = (pathlib.Path(__file__).resolve().parent.parent / "Tests/XferCoreTests/SealingTests.swift").read_text()
    pinned_sealed = re.search(r'vectorSealed = "([0-9a-f]+)"', text).group(1)
    pinned_name = re.search(r'vectorChunkName = "([0-9a-f]{64})"', text).group(1)
    key, salt = bytes(range(32)), bytes(range(100, 116))
    key_id = hmac.new(key, b"xfer key id v1", hashlib.sha256).digest()[:8]
    value_key = hmac.new(key, b"xfer sealed value v1" + salt, hashlib.sha256).digest()
    sealed = b"XFS1" + key_id + salt + AESGCM(value_key).encrypt(bytes(12), b"xfer sealed value test vector", b"xfer manifest v1 7 3")
    name = hmac.new(key, b"xfer chunk name v1" + hashlib.sha256(b"chunk").digest(), hashlib.sha256).hexdigest()
    failures = 0
    for label, mine, pinned in (("sealed value", sealed.hex(), pinned_sealed), ("sealed chunk name", name, pinned_name)):
        if mine != pinned:
            print(f"FAIL {label}: document gives {mine}, pinned {pinned}")
            failures += 1
        else:
            print(f"ok   {label} {mine[:16]}…")
    return failures


if __name__ == "__main__":
    sys.exit(main())
