import FuzzSupport
import XferCore
import XferProtocol

/// The JSON bodies: every request a server decodes (then validates, as its routes do) and
/// every answer a client decodes, through `WireJSON`.
///
/// The input's first byte picks the message type, the rest is the body. A message that decodes
/// encodes (the encoder must not fail on anything the decoder took), decodes again from that to
/// an equal value, and encodes again to the same bytes.
enum JSONHarness {
    struct Message: Sendable {
        var name: String
        var run: @Sendable ([UInt8]) -> Void
        var seeds: @Sendable () throws -> [[UInt8]]
    }

    static func roundTrip<T: Codable & Hashable>(_ type: T.Type, _ bytes: [UInt8]) -> T? {
        guard case .success(let value) = Fuzz.outcome("decoding \(T.self)", { try WireJSON.decode(T.self, from: bytes) }) else { return nil }
        let encoded = WireJSON.encode(value)
        let again = Fuzz.must("decoding \(T.self) as encoded: \(String(decoding: encoded.prefix(300), as: UTF8.self))") { try WireJSON.decode(T.self, from: encoded) }
        Fuzz.check(again == value, "\(T.self) decoded, encoded and decoded again is another value: \(value) / \(again)")
        Fuzz.check(WireJSON.encode(again) == encoded, "\(T.self) encodes otherwise the second time")
        return value
    }

    /// A request body a server reads: decoded, then validated; `also` is what its route does next.
    static func request<T: WireRequest & Codable & Hashable & SendableMetatype>(_ type: T.Type, also: @escaping @Sendable (T) throws -> Void = { _ in },
                                                                                _ seeds: @escaping @Sendable () throws -> [T]) -> Message {
        Message(name: "\(T.self)", run: { bytes in
            guard let value = roundTrip(T.self, bytes) else { return }
            if case .success = Fuzz.outcome("\(T.self).validate", { try value.validate() }) {
                _ = Fuzz.outcome("reading \(T.self)") { try also(value) }
            }
        }, seeds: { try seeds().map(WireJSON.encode) })
    }

    /// An answer a client reads.
    static func response<T: Codable & Hashable & SendableMetatype>(_ type: T.Type, also: @escaping @Sendable (T) -> Void = { _ in },
                                                                   _ seeds: @escaping @Sendable () throws -> [T]) -> Message {
        Message(name: "\(T.self)", run: { bytes in
            if let value = roundTrip(T.self, bytes) { also(value) }
        }, seeds: { try seeds().map(WireJSON.encode) })
    }

    static func path(_ raw: String) throws -> DocumentPath { try DocumentPath(raw) }
    static let id = ChunkID.of(Array("x".utf8)), other = ChunkID.of(Array("y".utf8))

    static func info() throws -> DocumentInfo {
        DocumentInfo(path: try path("Documents/a.txt"), version: 3, state: .current, kind: .file, size: 12, mtimeNs: 1_700_000_000_000_000_000,
                     mode: 0o644, baseVersion: 2, manifestDigest: id.hex, files: 1, chunks: 1, device: "laptop", sequence: 9, conflicts: [4])
    }

    static func entry() -> KeyValueEntry {
        KeyValueEntry(key: "theme", value: .object(["dark": .bool(true), "size": .int(-3), "ratio": .double(2.5), "list": .array([.null, .string("\u{e9}\u{1F600}")])]),
                      timestampNs: 5, device: "d", sequence: 7)
    }

    static let messages: [Message] = [
        request(AnnounceRequest.self) { [AnnounceRequest(path: try path("Documents/a.txt"), kind: .file, size: 12, mtimeNs: -1, mode: 0o644, baseVersion: 3, device: "d"),
                                         AnnounceRequest(path: try path("p.pkg"), kind: .package, size: 0, mtimeNs: 0, mode: 0o755, baseVersion: nil)] },
        request(CommitRequest.self) { [CommitRequest(path: try path("p.pkg"), version: 4, baseVersion: nil, deltaBase: 2, manifestDelta: [0, 1, 2, 255], manifestDigest: id)] },
        request(BatchCommitRequest.self) { [BatchCommitRequest(documents: [
            DirectCommit(announce: AnnounceRequest(path: try path("a"), kind: .file, size: 1, mtimeNs: 1, mode: 0o600, baseVersion: nil), manifest: [9, 8], manifestDigest: id, version: 2),
        ])] },
        request(ManifestBatchRequest.self) { [ManifestBatchRequest(documents: [.init(path: try path("a"), version: 1), .init(path: try path("b/c"))])] },
        request(ResolveRequest.self) { [ResolveRequest(path: try path("x"), keep: 2, keepAll: true)] },
        request(ChunkIDList.self, also: { list in
            let ids = try list.parsed()
            _ = try list.parsedAgainst(ids: ids)
        }) { [ChunkIDList(ids: [id, other], against: [id: other]), ChunkIDList(ids: [])] },
        request(KeyValueWrite.self) { [KeyValueWrite(key: "theme", value: entry().value, timestampNs: 5, device: "d"),
                                       KeyValueWrite(key: "gone", value: nil, timestampNs: 6, device: "d")] },
        request(CreateAccountRequest.self) { [CreateAccountRequest(name: "alice", quota: 1 << 30)] },
        request(SetQuotaRequest.self) { [SetQuotaRequest(quota: 5)] },
        request(NewTokenRequest.self) { [NewTokenRequest(account: "alice", terms: TokenTerms(device: "phone", readOnly: true, container: "photos", expiresInSeconds: 3600))] },
        request(TokenTerms.self) { [TokenTerms(device: "phone", readOnly: false, container: nil, expiresInSeconds: 60)] },
        request(RevokeTokenRequest.self) { [RevokeTokenRequest(token: "xfer_abc", account: nil), RevokeTokenRequest(token: nil, account: "alice", id: "0011223344556677")] },
        request(GarbageRequest.self) { [GarbageRequest(graceSeconds: 3600, dryRun: true)] },
        request(ContainerKeyWrite.self) { [ContainerKeyWrite(wrapped: Array(0..<60), previous: [1, 2, 3], keyID: "00112233aabbccdd")] },
        response(DocumentInfo.self) { [try info()] },
        response(DocumentList.self) { [DocumentList(documents: [try info()], cursor: 12, more: true, next: "opaque")] },
        response(ChangeList.self) { [ChangeList(changes: [try info()], keys: [entry()], cursor: 3, more: false, head: 9)] },
        response(VersionList.self) { [VersionList(versions: [try info(), try info()])] },
        response(KeyValueEntry.self) { [entry()] },
        response(KeyValueList.self) { [KeyValueList(entries: [entry()], bytes: 100, maximumBytes: 1 << 20, maximumKeys: 1000)] },
        response(KeyValueWriteResult.self) { [KeyValueWriteResult(applied: true, entry: entry())] },
        response(ManifestBatchResult.self) { [ManifestBatchResult(manifests: [.init(document: try info(), manifest: "AAEC"),
                                                                             .init(error: ErrorBody(code: "not_found", message: "no such document").error)])] },
        response(BatchCommitResult.self) { [BatchCommitResult(results: [.init(document: try info()),
                                                                       .init(error: ErrorBody(code: "conflict", message: "m", currentVersion: 4).error)])] },
        response(UploadResult.self) { [UploadResult(received: 3, stored: 2, storedBytes: 1000, unresolved: [id])] },
        response(ErrorBody.self, also: { _ = $0.error.xferError }) {
            [ErrorBody(code: "missing_chunks", message: "the server lacks 1 chunk", missing: [id.hex]), ErrorBody(code: "made_up", message: "?")]
        },
        response(HealthStatus.self) { [HealthStatus(status: "ok", version: "1.0", features: ["large_uploads"])] },
        response(ContainerKeyInfo.self) { [ContainerKeyInfo(encrypted: true, wrapped: "AAEC", keyID: "00112233aabbccdd")] },
        response(TokenInfo.self) { [TokenInfo(account: "alice", token: "xfer_abc", id: "0011223344556677", device: "d", readOnly: true, container: "c", expiresAt: 9)] },
        response(TokenList.self) { [TokenList(tokens: [TokenSummary(id: "0011223344556677", account: "alice", admin: false, device: nil,
                                                                    scope: TokenScope(readOnly: true, container: "c"), createdAt: 1, expiresAt: nil, expired: false, current: true)])] },
        response(AccountInfo.self) { [AccountInfo(name: "alice", quota: 10, used: 3, token: "xfer_abc")] },
        response(RevokeTokenResult.self) { [RevokeTokenResult(revoked: 2)] },
        response(GarbageReport.self) { [GarbageReport(graceSeconds: 3600, dryRun: false)] },
    ]

    static func run(_ bytes: [UInt8]) {
        guard let first = bytes.first else { return }
        messages[Int(first) % messages.count].run(Array(bytes.dropFirst()))
    }

    static func seeds() throws -> [(name: String, bytes: [UInt8])] {
        var seeds: [(name: String, bytes: [UInt8])] = []
        for (index, message) in messages.enumerated() {
            for (n, body) in try message.seeds().enumerated() { seeds.append(("\(message.name)-\(n)", [UInt8(index)] + body)) }
        }
        return seeds
    }
}

/// Called by libFuzzer once, before any input: writes the seeds and exits if asked to.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    Fuzz.writeSeedsIfAsked(JSONHarness.seeds)
    return 0
}

/// Called by libFuzzer with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    JSONHarness.run(Fuzz.bytes(data, size))
    return 0
}
