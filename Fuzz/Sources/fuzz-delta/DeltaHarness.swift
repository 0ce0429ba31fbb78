import FuzzSupport
import XferCore

/// `Manifest(applying:to:)`, a manifest delta (plain `XFD`, or `XFDZ` compressed) applied to
/// the base it names: what a server reads from a commit, a client from a pull.
///
/// The manifest a delta makes is a valid one: it re-decodes from its own encoding, and the
/// deltas this build writes of it against the same base, plain and compressed, apply back to it.
enum DeltaHarness {
    static func run(_ bytes: [UInt8]) {
        // A plain delta names its base (zeros for none); a compressed one hides the name, so both.
        let named = bytes.count >= 36 ? bytes[4..<36] : []
        let bases: [Manifest?] = Manifest.isCompressedDelta(bytes) ? [Samples.base, nil]
            : [named.allSatisfy { $0 == 0 } ? nil : Samples.base]
        for base in bases {
            guard case .success(let manifest) = Fuzz.outcome("Manifest(applying:to:)", { try Manifest(applying: bytes, to: base) }) else { continue }
            let decoded = Fuzz.must("the decoding of a delta's manifest") { try Manifest(decoding: manifest.encoded()) }
            Fuzz.check(decoded == manifest, "a delta's manifest does not decode back from its encoding")
            let again = Fuzz.must("a delta re-made against the same base") { try Manifest(applying: manifest.delta(against: base), to: base) }
            Fuzz.check(again == manifest, "a delta re-made against the same base applies to another manifest")
            let compressed = Fuzz.must("a compressed delta re-made") { try Manifest(applying: manifest.compressedDelta(against: base), to: base) }
            Fuzz.check(compressed == manifest, "a compressed delta re-made applies to another manifest")
        }
    }

    static func seeds() throws -> [(name: String, bytes: [UInt8])] {
        var seeds: [(name: String, bytes: [UInt8])] = []
        for (name, edit) in try Samples.edits() {
            seeds.append(("\(name)-against-base", edit.delta(against: Samples.base)))
            seeds.append(("\(name)-against-none", edit.delta(against: nil)))
            let compressed = Array(edit.compressedDelta(against: Samples.base))
            if Manifest.isCompressedDelta(compressed) { seeds.append(("\(name)-against-base-compressed", compressed)) }
        }
        for (name, manifest) in try Samples.manifests() {
            seeds.append(("\(name)-whole", manifest.delta(against: nil)))
            let compressed = Array(manifest.compressedDelta(against: nil))
            if Manifest.isCompressedDelta(compressed) { seeds.append(("\(name)-compressed", compressed)) }
        }
        return seeds
    }
}

/// Called by libFuzzer once, before any input: writes the seeds and exits if asked to.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    Fuzz.writeSeedsIfAsked(DeltaHarness.seeds)
    return 0
}

/// Called by libFuzzer with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    DeltaHarness.run(Fuzz.bytes(data, size))
    return 0
}
