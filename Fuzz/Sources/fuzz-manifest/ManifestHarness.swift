import FuzzSupport
import XferCore

/// `Manifest(decoding:)`, what a server reads from a commit and a client from a pull.
///
/// A manifest that decodes re-encodes to the very bytes it came from (the encoding is
/// canonical: one manifest, one encoding, so its digest names it), its digest is the SHA-256 of
/// those bytes, and its deltas against nothing and against itself, plain and compressed, apply
/// back to it.
enum ManifestHarness {
    static func run(_ bytes: [UInt8]) {
        guard case .success(let manifest) = Fuzz.outcome("Manifest(decoding:)", { try Manifest(decoding: bytes) }) else { return }
        Fuzz.check(manifest.encoded() == bytes, "a decoded manifest re-encodes to other bytes")
        Fuzz.check(manifest.digest == ChunkID.of(bytes), "a manifest's digest is not the SHA-256 of its encoding")
        for base in [nil, manifest] {
            let plain = Fuzz.must("a delta against \(base == nil ? "nothing" : "itself")") { try Manifest(applying: manifest.delta(against: base), to: base) }
            Fuzz.check(plain == manifest, "a delta does not apply back to its manifest")
            let compressed = Fuzz.must("a compressed delta") { try Manifest(applying: manifest.compressedDelta(against: base), to: base) }
            Fuzz.check(compressed == manifest, "a compressed delta does not apply back to its manifest")
        }
    }

    static func seeds() throws -> [(name: String, bytes: [UInt8])] {
        try Samples.manifests().map { ($0.name, $0.manifest.encoded()) }
    }
}

/// Called by libFuzzer once, before any input: writes the seeds and exits if asked to.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    Fuzz.writeSeedsIfAsked(ManifestHarness.seeds)
    return 0
}

/// Called by libFuzzer with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    ManifestHarness.run(Fuzz.bytes(data, size))
    return 0
}
