import Foundation
import Testing

@testable import XferCore

/// Documents of an end-to-end encrypted container (``EndToEndKeys``, docs/FORMAT.md,
/// "End-to-end documents"): sealed paths, and the sealed manifest carried in a carrier.
@Suite struct EndToEndDocumentsTests {
    static let keys = EndToEndKeys(key: ContainerKeyTests.key)

    /// A package of `files` files with one chunk each, in folders of a thousand.
    static func package(files: Int) throws -> Manifest {
        var entries: [Manifest.Entry] = []
        for index in 0..<files {
            if index % 1000 == 0 {
                entries.append(
                    Manifest.Entry(
                        path: String(format: "dir%03d", index / 1000), kind: .directory, mode: 0o755,
                        mtimeNanoseconds: 0))
            }
            entries.append(
                Manifest.Entry(
                    path: String(format: "dir%03d/file%06d.txt", index / 1000, index), kind: .file, mode: 0o644,
                    mtimeNanoseconds: Int64(index) * 1_000_000_007,
                    chunks: [
                        Manifest.ChunkReference(
                            id: ChunkID.of(Array("chunk \(index)".utf8)), length: 100 + index % 1000)
                    ]))
        }
        return try Manifest(kind: .package, chunker: .default, entries: entries)
    }

    /// Seals `manifest`'s pieces and returns them by id, with the carrier.
    static func sealed(_ manifest: Manifest, path: String, version: Int64) throws -> (
        carrier: Manifest, store: [ChunkID: EncodedChunk]
    ) {
        let (carrier, pieces) = try keys.carrier(of: manifest, sealedPath: path, version: version)
        var store: [ChunkID: EncodedChunk] = [:]
        for piece in pieces {
            let chunk = try piece.withUnsafeBytes { try keys.chunks.seal($0) }
            store[chunk.id] = chunk
        }
        return (carrier, store)
    }

    static func fetch(_ store: [ChunkID: EncodedChunk]) -> ([ChunkID]) async throws -> [EncodedChunk] {
        { ids in try ids.map { id in try #require(store[id]) } }
    }

    @Test func aPathIsSealedAComponentAtATimeAndOpensAgain() throws {
        let sealed = try Self.keys.sealedPath("Documents/Reports/2026 Q3.numbers")
        #expect(sealed.split(separator: "/").count == 3)
        #expect(!sealed.contains("Documents") && !sealed.contains("Reports"))
        #expect(NameSealing.isSealed(path: sealed))
        #expect(try Self.keys.names.open(path: sealed) == "Documents/Reports/2026 Q3.numbers")
        // The same name in another folder seals otherwise; the same path, the same.
        #expect(try Self.keys.sealedPath("Reports").split(separator: "/")[0] != sealed.split(separator: "/")[1])
        #expect(try Self.keys.sealedPath("Documents/Reports/2026 Q3.numbers") == sealed)
        for plain in ["notes.txt", "Documents/notes.txt", "", "abc/", sealed.uppercased(), sealed + "a"] {
            #expect(!NameSealing.isSealed(path: plain), "\(plain)")
        }
    }

    @Test func aCarrierHoldsTheManifestAndOpensToIt() async throws {
        let manifest = try Self.package(files: 50)
        let path = try Self.keys.sealedPath("project")
        let (carrier, store) = try Self.sealed(manifest, path: path, version: 3)
        #expect(carrier.kind == .package && carrier.entries.count == 1 && carrier.entries.path(at: 0) == "c")
        // The pieces first, then every chunk once, each declared as one byte.
        let references = try EndToEndKeys.references(of: carrier)
        #expect(references.count == store.count + 50 && references.allSatisfy { $0.length == 1 })
        #expect(Set(references.dropFirst(store.count).map(\.id)) == Set(manifest.allChunks.map(\.id)))
        let opened = try await Self.keys.manifest(in: carrier, sealedPath: path, version: 3, fetch: Self.fetch(store))
        #expect(opened == manifest)
        // Nothing of it shows in what the server keeps.
        let kept = carrier.encoded() + store.values.flatMap(\.payload)
        #expect(!EndToEndChunksTests.contains(kept, Array("file000001".utf8)))
    }

    @Test func theSameManifestAtTheSamePlaceMakesTheSameCarrier() throws {
        let manifest = try Self.package(files: 20)
        let path = try Self.keys.sealedPath("project")
        let first = try Self.keys.carrier(of: manifest, sealedPath: path, version: 4).carrier
        #expect(try Self.keys.carrier(of: manifest, sealedPath: path, version: 4).carrier.digest == first.digest)
        #expect(try Self.keys.carrier(of: manifest, sealedPath: path, version: 5).carrier.digest != first.digest)
        #expect(
            try Self.keys.carrier(of: manifest, sealedPath: try Self.keys.sealedPath("other"), version: 4).carrier
                .digest != first.digest)
    }

    @Test func aLargeManifestTakesSeveralPieces() async throws {
        let manifest = try Self.package(files: 20_000)
        let path = try Self.keys.sealedPath("big")
        let (carrier, store) = try Self.sealed(manifest, path: path, version: 1)
        #expect(store.count > 1)
        #expect(
            try await Self.keys.manifest(in: carrier, sealedPath: path, version: 1, fetch: Self.fetch(store))
                == manifest)
    }

    @Test func aManifestMovedToAnotherPlaceOrVersionOrShortOfAChunkIsRefused() async throws {
        let manifest = try Self.package(files: 30)
        let path = try Self.keys.sealedPath("project")
        let (carrier, store) = try Self.sealed(manifest, path: path, version: 2)
        await #expect(throws: XferError.self) {
            _ = try await Self.keys.manifest(in: carrier, sealedPath: path, version: 1, fetch: Self.fetch(store))
        }
        await #expect(throws: XferError.self) {
            _ = try await Self.keys.manifest(
                in: carrier, sealedPath: try Self.keys.sealedPath("elsewhere"), version: 2, fetch: Self.fetch(store))
        }
        // A carrier that drops one of the document's chunks: the server might not keep it.
        let references = try EndToEndKeys.references(of: carrier)
        let short = try EndToEndKeys.carrier(
            kind: .package, pieces: Array(references.prefix(store.count).map(\.id)),
            chunks: references.dropFirst(store.count + 1).map(\.id))
        let error = await #expect(throws: XferError.self) {
            _ = try await Self.keys.manifest(in: short, sealedPath: path, version: 2, fetch: Self.fetch(store))
        }
        #expect(error?.code == .invalidManifest)
        // Another container's key opens none of it.
        let other = EndToEndKeys(key: ContainerKey.generate())
        await #expect(throws: XferError.self) {
            _ = try await other.manifest(in: carrier, sealedPath: path, version: 2, fetch: Self.fetch(store))
        }
    }

    @Test func aServersMessageNamesDocumentsAsTheUserDoes() throws {
        let sealed = try Self.keys.sealedPath("Projects/Harbour plans.txt")
        let message = "\(sealed) is a document: nothing can live inside it (under \(sealed)/x)"
        #expect(
            Self.keys.openingNames(in: message)
                == "Projects/Harbour plans.txt is a document: nothing can live inside it (under Projects/Harbour plans.txt/x)"
        )
        // A name sealed under another key, or not sealed, stays as it is.
        let other = try EndToEndKeys(key: .generate()).sealedPath("notes.txt")
        #expect(Self.keys.openingNames(in: "at \(other): no") == "at \(other): no")
        #expect(Self.keys.openingNames(in: "Documents/a is a document") == "Documents/a is a document")
    }

    @Test func aDirectoryIsCarriedAsTheSameManifestWhateverItsMode() async throws {
        let (carrier, pieces) = try Self.keys.carrier(of: .directory(mode: 0o750), sealedPath: "x", version: 3)
        #expect(pieces.isEmpty && carrier == EndToEndKeys.directoryCarrier && carrier.kind == .directory)
        #expect(
            try Self.keys.carrier(of: .directory(mode: 0o700), sealedPath: "y", version: 9).carrier.digest
                == carrier.digest)
        let opened = try await Self.keys.manifest(in: carrier, sealedPath: "x", version: 3) { _ in [] }
        #expect(opened.kind == .directory)
        await #expect(throws: XferError.self) {
            _ = try await Self.keys.manifest(in: .directory(mode: 0o755), sealedPath: "x", version: 3) { _ in [] }
        }
    }
}
