#!/usr/bin/env python3
"""An independent implementation of docs/FORMAT.md (Gear table, chunk boundaries, chunk ids,
sealed values, end-to-end keys), written from the document, not from the Swift code. It recomputes the committed vectors for
the seeded random inputs and compares them with Tests/XferCoreTests/VectorTests+Expected.swift,
so the document, the Swift chunker and the pinned vectors must all agree.

Run: python3 tools/suites/check-format.py   (tools/test.sh runs it)
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
    root = pathlib.Path(__file__).resolve().parents[2]
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
    failures += check_end_to_end()
    print(f"{11 - failures} passed, {failures} failed")
    return 1 if failures else 0


def check_sealed():
    """docs/FORMAT.md "Sealed values" against the vector pinned in SealingTests.swift."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    text = (pathlib.Path(__file__).resolve().parents[2] / "Tests/XferCoreTests/SealingTests.swift").read_text()
    pinned_sealed = re.search(r'vectorSealed\s*=\s*"([0-9a-f]+)"', text).group(1)
    pinned_name = re.search(r'vectorChunkName\s*=\s*"([0-9a-f]{64})"', text).group(1)
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


def hkdf(ikm, info, count):
    """RFC 5869 HKDF-SHA-256 with no salt (32 zero bytes)."""
    prk = hmac.new(bytes(32), ikm, hashlib.sha256).digest()
    out, block, counter = b"", b"", 1
    while len(out) < count:
        block = hmac.new(prk, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:count]


def padme(length):
    if length <= 2:
        return length
    e = length.bit_length() - 1
    s = e.bit_length()
    mask = (1 << (e - s)) - 1
    return (length + mask) & ~mask


def end_to_end_vectors():
    """docs/FORMAT.md "End-to-end keys", for the container key 00…1f."""
    import base64
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV
    key = bytes(range(32))
    derive = lambda label, count=32: hkdf(key, b"xfer e2e " + label + b" v1", count)
    gear = derive(b"gear", 2048)
    chunk_id = hmac.new(derive(b"chunk id"), b"chunk", hashlib.sha256).hexdigest()
    name_plain = b"Notes.txt" + b"\x80" + bytes(15 - len(b"Notes.txt") % 16)
    siv = AESSIV(derive(b"name", 64)).encrypt(name_plain, [b"xfer name v1 Documents"])
    name = base64.b32encode(siv).decode().lower().rstrip("=")
    alphabet = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
    bits = int.from_bytes(key + hashlib.sha256(key).digest()[:2], "big") << 3  # 272 bits, padded to 275
    digits = "".join(alphabet[(bits >> (5 * (54 - i))) & 31] for i in range(55))
    recovery = "-".join(digits[i:i + 5] for i in range(0, 55, 5))
    salt, value_salt = bytes(range(16)), bytes(range(16, 32))
    wrapping = hashlib.scrypt(b"correct horse", salt=salt, n=1 << 10, r=8, p=1, dklen=32)
    value_key = hmac.new(wrapping, b"xfer sealed value v1" + value_salt, hashlib.sha256).digest()
    sealed = (b"XFS1" + hmac.new(wrapping, b"xfer key id v1", hashlib.sha256).digest()[:8] + value_salt
              + AESGCM(value_key).encrypt(bytes(12), key, b"xfer container key v1 com.example.notes"))
    wrapped = b"XFW1" + bytes([10, 8, 1]) + salt + sealed
    # "End-to-end chunks": the chunk "chunk" sealed with the salt 20…2f.
    keyed = hmac.new(derive(b"chunk id"), b"chunk", hashlib.sha256).digest()
    chunk_key = derive(b"chunk")
    chunk_salt = bytes(range(32, 48))
    inner = b"\x00" + (5).to_bytes(4, "little") + b"chunk"
    inner += b"\x80" + bytes(padme(len(inner) + 1) - len(inner) - 1)
    chunk_value_key = hmac.new(chunk_key, b"xfer sealed value v1" + chunk_salt, hashlib.sha256).digest()
    sealed_chunk = (keyed + b"XFS1" + hmac.new(chunk_key, b"xfer key id v1", hashlib.sha256).digest()[:8] + chunk_salt
                    + AESGCM(chunk_value_key).encrypt(bytes(12), inner, b"xfer e2e chunk v1" + keyed))
    return {
        "wireID": hashlib.sha256(b"xfer e2e chunk id v1" + keyed).hexdigest(),
        "sealedChunk": sealed_chunk.hex(),
        "gear0": "%016x" % struct.unpack("<Q", gear[:8])[0],
        "chunkID": chunk_id,
        "name": name,
        "recovery": recovery,
        "wrapped": wrapped.hex(),
        "padme": ",".join(str(padme(n)) for n in (1, 2, 3, 9, 100, 1000, 65536, 65537, 1000000)),
    }


def check_end_to_end():
    """docs/FORMAT.md "End-to-end keys" against the vectors pinned in ContainerKeyTests.swift."""
    text = (pathlib.Path(__file__).resolve().parents[2] / "Tests/XferCoreTests/ContainerKeyTests.swift").read_text()
    failures = 0
    for label, mine in end_to_end_vectors().items():
        pinned = re.search(r'static let %s\s*=\s*"([^"]+)"' % label, text)
        if pinned is None or pinned.group(1) != mine:
            print(f"FAIL end-to-end {label}: document gives {mine}, pinned {pinned and pinned.group(1)}")
            failures += 1
        else:
            print(f"ok   end-to-end {label} {mine[:16]}…")
    return failures


if __name__ == "__main__":
    sys.exit(main())
