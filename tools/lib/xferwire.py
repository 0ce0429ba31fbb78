"""Encoders for xfer's binary formats, written from docs/FORMAT.md and docs/PROTOCOL.md (not
from the Swift code): manifests, manifest deltas and XFU1 chunk bodies. They check nothing on
purpose, so the attack suite (tools/suites/attack-suite.py) and its hostile server
(tools/lib/hostile_server.py) can build both honest and hostile bytes. Standard library only.

An entry is a dict: {"path": bytes|str, "kind": FILE|DIRECTORY|SYMLINK, "mode": int,
"mtime": int (ns, signed), "chunks": [(length, id bytes)], "target": bytes|str}.
"""
import hashlib
import hmac
import struct

M = (1 << 64) - 1
FILE_DOC, PACKAGE_DOC = 1, 2          # manifest kinds
FILE, DIRECTORY, SYMLINK = 1, 2, 3    # entry kinds
DEFAULT_CHUNKER = (16384, 65536, 262144, 2)   # min, avg, max, normalization level


def varint(value):
    """Unsigned LEB128, minimal."""
    value &= M
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def zigzag(value):
    return ((value << 1) ^ (value >> 63)) & M


def _bytes(text):
    return text.encode() if isinstance(text, str) else bytes(text)


def string(text):
    raw = _bytes(text)
    return varint(len(raw)) + raw


def chunker(config=DEFAULT_CHUNKER):
    minimum, average, maximum, level = config
    return varint(minimum) + varint(average) + varint(maximum) + bytes([level])


def entry_header(entry):
    out = string(entry.get("path", b"")) + bytes([entry["kind"]]) + varint(entry.get("mode", 0o644)) + varint(zigzag(entry.get("mtime", 0)))
    if entry["kind"] == SYMLINK:
        out += string(entry["target"])
    return out


def _sorted(entries, sort):
    return sorted(entries, key=lambda e: _bytes(e.get("path", b""))) if sort else list(entries)


def manifest(kind, entries, config=DEFAULT_CHUNKER, sort=True):
    """Manifest v1: "XFM" 1, kind, chunker, count, entries (sorted by path bytes unless told not to)."""
    out = bytearray(b"XFM\x01" + bytes([kind]) + chunker(config) + varint(len(entries)))
    for entry in _sorted(entries, sort):
        out += entry_header(entry)
        if entry["kind"] == FILE:
            chunks = entry.get("chunks", [])
            out += varint(len(chunks))
            for length, chunk_id in chunks:
                out += varint(length) + chunk_id
    return bytes(out)


def digest(data):
    return hashlib.sha256(data).hexdigest()


def add_ops(chunks):
    """The ops of a file entry with no base: one `add` op listing every chunk (or none)."""
    if not chunks:
        return varint(0)
    out = bytearray(varint(1) + b"\x01" + varint(len(chunks)))
    for length, chunk_id in chunks:
        out += varint(length) + chunk_id
    return bytes(out)


def copy_ops(runs):
    """The ops of a file entry made of `copy` runs [(start, count), …] from its base entry."""
    out = bytearray(varint(len(runs)))
    for start, count in runs:
        out += b"\x00" + varint(start) + varint(count)
    return bytes(out)


def delta(kind, entries, config=DEFAULT_CHUNKER, base_digest=None, sort=True):
    """Manifest delta v1. Without `base_digest`, a delta against nothing (every chunk added).
    A file entry may carry "base_entry" (1 + index in the base) and "ops" (bytes from copy_ops)
    instead of chunks, to copy runs from a base."""
    out = bytearray(b"XFD\x01" + (bytes.fromhex(base_digest) if base_digest else bytes(32)) + bytes([kind])
                    + chunker(config) + varint(len(entries)))
    for entry in _sorted(entries, sort):
        out += entry_header(entry)
        if entry["kind"] == FILE:
            out += varint(entry.get("base_entry", 0))
            out += entry["ops"] if "ops" in entry else add_ops(entry.get("chunks", []))
    return bytes(out)


def frame(plain, encoding=0, payload=None, chunk_id=None, plain_length=None):
    """One XFU1 frame: id, plain length (u32 LE), encoding (u8), payload length (u32 LE), payload.
    Raw encoding by default; any field may be overridden to lie."""
    payload = plain if payload is None else payload
    chunk_id = hashlib.sha256(plain).digest() if chunk_id is None else chunk_id
    length = len(plain) if plain_length is None else plain_length
    return chunk_id + struct.pack("<IBI", length, encoding, len(payload)) + payload


def frames(chunks):
    """An upload or download body: "XFU1" then a raw frame per plain chunk."""
    return b"XFU1" + b"".join(frame(c) for c in chunks)


def chunk_ref(plain, length=None):
    """A manifest chunk reference (length, id) for plain bytes; `length` may lie."""
    return (len(plain) if length is None else length, hashlib.sha256(plain).digest())


def padme(length):
    """docs/FORMAT.md "End-to-end chunks": Padmé's padded length of `length` bytes."""
    if length <= 2:
        return length
    e = length.bit_length() - 1
    mask = (1 << (e - e.bit_length())) - 1
    return (length + mask) & ~mask


def e2e_key(container_key, label):
    """docs/FORMAT.md "End-to-end keys": the 32-byte key for `label` (HKDF-SHA-256 of the
    container key, no salt, info "xfer e2e LABEL v1"; one block)."""
    prk = hmac.new(bytes(32), container_key, hashlib.sha256).digest()
    return hmac.new(prk, b"xfer e2e " + label + b" v1\x01", hashlib.sha256).digest()
