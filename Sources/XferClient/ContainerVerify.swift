import Foundation
import XferCore
import XferProtocol

/// What ``ContainerVerify`` found (`xfer verify --documents --json` prints it).
public struct ContainerVerifyReport: Codable, Sendable, Equatable {
    /// One damaged document, or name.
    public struct Problem: Codable, Sendable, Equatable {
        /// The document, by its plain name (by its sealed one when that does not open).
        public var document: String
        /// What is wrong.
        public var problem: String
    }

    /// The container.
    public var container: String
    /// Current documents whose name and manifest were read and checked.
    public var documentsChecked = 0
    /// Distinct chunks downloaded and checked.
    public var chunksChecked = 0
    /// Their plain bytes.
    public var bytesChecked: Int64 = 0
    /// What failed, by document.
    public private(set) var problems: [Problem] = []
    /// Whether nothing failed.
    public private(set) var ok = true

    public init(container: String) { self.container = container }

    /// Records what is wrong with `document`.
    mutating func record(_ document: String, problem: String) {
        ok = false
        problems.append(Problem(document: document, problem: problem))
    }
}

/// Checks a container's current documents as this device reads them, with its keys: every
/// document's name (opened, end to end), its manifest (its carrier and sealed pieces, end to
/// end: each opened and checked), and every chunk they reference, downloaded once and checked
/// as a pull checks it (the tag and keyed id of a sealed chunk; the SHA-256 of a plain one) and
/// against its declared length. Nothing is written. What the server's own verify cannot do for
/// an end-to-end encrypted container, whose keys it does not hold (`xfer verify --documents`).
public struct ContainerVerify: Sendable {
    /// The remote, with its container's key when it is end-to-end encrypted (``Remote/unlocked()``).
    public let remote: Remote

    /// Chunks asked for in one download.
    static let batch = 1024
    /// Documents named in a chunk's problem, at most.
    static let namedDocuments = 3

    /// Creates a verifier.
    public init(remote: Remote) {
        self.remote = remote
    }

    /// The chunks a check downloads: each once, with its length and the first few documents
    /// that name it (to say which are damaged if it is). Decides only; tested alone.
    struct Wanted {
        /// Each chunk's declared length and the documents named with it.
        private(set) var chunks: [ChunkID: (length: Int, documents: [String])] = [:]

        /// Adds the chunks of `document`'s manifest.
        /// - Returns: What is wrong with it: a chunk it declares with another length than a
        ///   manifest read before did (that reference is not added).
        mutating func add(_ references: some Sequence<Manifest.ChunkReference>, of document: String) -> [String] {
            var problems: [String] = []
            for chunk in references {
                var entry = chunks[chunk.id] ?? (chunk.length, [])
                guard entry.length == chunk.length else {
                    problems.append(
                        "its manifest declares chunk \(chunk.id) of \(chunk.length) bytes, another of \(entry.length)")
                    continue
                }
                if entry.documents.count < ContainerVerify.namedDocuments && entry.documents.last != document {
                    entry.documents.append(document)
                }
                chunks[chunk.id] = entry
            }
            return problems
        }
    }

    /// Runs the check.
    /// - Parameter progress: Called with the chunks checked so far, now and then.
    /// - Throws: Only what stops everything (`unavailable`, `unauthorized`, `cancelled`); what is
    ///   wrong with one document is a problem in the report.
    public func run(progress: @escaping @Sendable (Int) -> Void = { _ in }) async throws -> ContainerVerifyReport {
        var report = ContainerVerifyReport(container: remote.container.value)
        let wanted = try await readManifests(&report)
        // Each chunk once, a batch at a time; a batch that fails is asked again a chunk at a
        // time, so each damaged one is named with its documents.
        for batch in wanted.chunks.keys.sorted().batched(atMost: Self.batch) {
            let asked: [[ChunkID]]
            switch try await outcome({ try await check(batch, wanted) }) {
            case .success(let checked):
                report.chunksChecked += checked.chunks
                report.bytesChecked += checked.bytes
                asked = []
            case .failure:
                asked = batch.map { [$0] }
            }
            for ids in asked {
                switch try await outcome({ try await check(ids, wanted) }) {
                case .success(let checked):
                    report.chunksChecked += checked.chunks
                    report.bytesChecked += checked.bytes
                case .failure(let error):
                    for document in wanted.chunks[ids[0]]!.documents {
                        report.record(
                            document,
                            problem:
                                "chunk \(ids[0]): \(remote.endToEnd?.openingNames(in: error.message) ?? error.message)")
                    }
                }
            }
            progress(report.chunksChecked)
        }
        return report
    }

    /// Reads and checks every current document's name and manifest, recording what fails in
    /// `report`.
    /// - Returns: The chunks their manifests reference.
    private func readManifests(_ report: inout ContainerVerifyReport) async throws -> Wanted {
        var wanted = Wanted()
        let list = try await remote.connection.list(container: remote.container, prefix: "")
        for info in list.documents where info.state == .current {
            let name: String
            do {
                name = try remote.named(info).path.value
            } catch {
                report.record(
                    info.path.value,
                    problem: "its name does not open under the container's key (damaged, or written without the key)")
                continue
            }
            switch try await outcome({
                try await remote.naming {
                    try await PullEngine(remote: remote).manifest(info.path, info: info, synced: nil)
                }
            }) {
            case .failure(let error):
                report.record(name, problem: error.message)
            case .success(let fetched):
                report.documentsChecked += 1
                for problem in wanted.add(fetched.manifest.allChunks, of: name) {
                    report.record(name, problem: problem)
                }
            }
        }
        return wanted
    }

    /// Runs `body`, a request for a manifest or chunks. A server that cannot read a chunk it
    /// stores (one sealed at rest fails its tag) ends the download mid-stream, which looks like
    /// a broken connection. What breaks it twice (a document's manifest, a chunk asked alone)
    /// while the server still answers is damaged there; anything else that stops everything
    /// is thrown.
    private func outcome<T>(_ body: () async throws -> T) async throws -> Result<T, XferError> {
        do {
            return .success(try await body())
        } catch let error as XferError where error.code == .unavailable {
            do {
                return .success(try await body())
            } catch let again as XferError where again.code == .unavailable {
                // Throws if the server is gone: nothing is called damaged then.
                _ = try await remote.connection.account()
                return .failure(again)
            } catch let again as XferError where !again.stopsEveryDocument {
                return .failure(again)
            }
        } catch let error as XferError where !error.stopsEveryDocument {
            return .failure(error)
        }
    }

    /// Downloads `ids` and checks each chunk as a pull does, and against its declared length.
    /// - Returns: How many chunks and plain bytes were checked.
    private func check(_ ids: [ChunkID], _ wanted: Wanted) async throws -> (chunks: Int, bytes: Int64) {
        let codec = remote.codec
        var checked = (chunks: 0, bytes: Int64(0))
        try await remote.connection.download(ids, in: remote.container) { chunk in
            guard let expected = wanted.chunks[chunk.id] else {
                throw XferError(.corruptChunk, "the server sent chunk \(chunk.id), which was not asked for")
            }
            let bytes = try codec.decode(chunk, maximumLength: expected.length)
            guard bytes.count == expected.length else {
                throw XferError(
                    .corruptChunk,
                    "chunk \(chunk.id) holds \(bytes.count) bytes, but its manifest declares \(expected.length)")
            }
            checked.chunks += 1
            checked.bytes += Int64(bytes.count)
        }
        return checked
    }
}
