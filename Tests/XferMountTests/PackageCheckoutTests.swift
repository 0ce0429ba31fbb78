import Foundation
import Testing
import XferCore

@testable import XferMount

@Suite("PackageCheckout")
struct PackageCheckoutTests {
    @Test("a manifest written out reads back as the same entries, with modes, times and symlinks")
    func roundTrip() async throws {
        let root = NSTemporaryDirectory() + "checkout-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: root) }
        let bytes = Array("hello".utf8)
        let chunk = Manifest.ChunkReference(id: ChunkID.of(bytes), length: bytes.count)
        let manifest = try Manifest(
            kind: .package, chunker: .default,
            entries: [
                Manifest.Entry(path: "dir", kind: .directory, mode: 0o500, mtimeNanoseconds: 1_000_000_000),
                Manifest.Entry(
                    path: "dir/f", kind: .file, mode: 0o640, mtimeNanoseconds: 2_000_000_007, chunks: [chunk]),
                Manifest.Entry(
                    path: "ln", kind: .symlink, mode: 0o777, mtimeNanoseconds: 3_000_000_000, symlinkTarget: "/etc")
            ])
        var asked: [[Manifest.ChunkReference]] = []
        try await PackageCheckout.write(manifest, into: root) { fd, chunks in
            asked.append(chunks)
            _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        }
        #expect(asked == [[chunk]])
        let scanned = try PackageCheckout.scan(root).sorted { $0.path < $1.path }
        #expect(scanned.map(\.path) == ["dir", "dir/f", "ln"])
        #expect(scanned.map(\.kind) == [.directory, .file, .symlink])
        #expect(scanned[0].mode == 0o500 && scanned[0].mtimeNanoseconds == 1_000_000_000)
        #expect(scanned[1].mode == 0o640 && scanned[1].size == 5 && scanned[1].mtimeNanoseconds == 2_000_000_007)
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: root + "/ln") == "/etc")
        chmod(root + "/dir", 0o700)  // so the temporary directory can go
    }
}
