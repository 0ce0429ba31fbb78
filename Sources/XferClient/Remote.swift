import Foundation
import XferCore
import XferProtocol

/// Where a client talks to and which container it works in.
public struct Remote: Sendable {
    /// The connection.
    public let connection: ServerConnection
    /// The container.
    public let container: ContainerName
    /// Where client state databases live.
    public let stateDirectory: String
    /// The container's keys if it is end-to-end encrypted (``unlocked()``): pushes and pulls
    /// then seal names, chunks and manifests, and the server keeps only what they sealed.
    public private(set) var endToEnd: EndToEndKeys? = nil
    /// A key file of the user's choosing for the container's key, instead of one in the state
    /// directory (``ContainerKeyFile``).
    public var keyFile: String? = nil
    /// The name this device writes as (versions, key-value writes): the host's, unless the
    /// client was told another (`xfer login --device`, XFER_DEVICE).
    public var device: String = ProcessInfo.processInfo.hostName

    /// Where this device keeps the container's key: named from what it knows alone, so a key can
    /// be shown or forgotten offline.
    public var containerKeyFile: ContainerKeyFile {
        ContainerKeyFile(
            stateDirectory: stateDirectory, server: connection.server, container: container, keyFile: keyFile)
    }

    /// How the container's chunks are cut, named and carried.
    public var codec: ChunkCodec { endToEnd?.codec ?? .plain }

    /// The client state of `root` (a pushed path or a pull destination) for this container: in
    /// an end-to-end encrypted one, a state of its own, whose chunk lists are named under its key.
    public func clientState(root: String) throws -> ClientState {
        try ClientState(root: root, stateDirectory: stateDirectory, namespace: endToEnd.map { "e2e " + $0.keyID })
    }

    /// The path the server keeps document `name` at: sealed in an end-to-end encrypted container.
    /// - Throws: `invalid_path` for a name too long to seal.
    public func serverPath(_ name: DocumentPath) throws -> DocumentPath {
        guard let endToEnd else { return name }
        return try DocumentPath(try endToEnd.sealedPath(name.value))
    }

    /// This remote with its container's key when the container is end-to-end encrypted: the key
    /// this device holds (``EncryptedContainers``), checked against the server's key id.
    /// - Throws: `unauthorized` if the container is encrypted and this device holds no key for
    ///   it (or a key that is not the server's), saying to unlock it; the server's errors.
    /// - Throws: `encrypted_container` if this device holds a key for the container and the
    ///   server says it is not encrypted (a container never becomes plain again: another server
    ///   at this address, or one that would have this device send plain data), sending nothing.
    public func unlocked() async throws -> Remote {
        try await unlocked(held: try containerKeyFile.read())
    }

    /// ``unlocked()`` with the keys this device holds read already (`nil`: it holds none).
    private func unlocked(held: ContainerKeyRing?) async throws -> Remote {
        let info: ContainerKeyInfo
        do {
            info = try await connection.containerKey(container: container)
        } catch let error as XferError where error.code == .notFound {
            // a server without the route has no encrypted containers
            info = ContainerKeyInfo(encrypted: false, wrapped: nil, keyID: nil)
        }
        guard info.encrypted else {
            guard let held else { return self }
            throw XferError(
                .encryptedContainer,
                """
                this device holds the key \(held.current.id) of container \(container), but the server says the container is not \
                end-to-end encrypted; nothing was sent in the clear. If it is another server at this address, point \
                XFER_SERVER at the right one; if the container was really made again without a key, run \
                `xfer key forget --container \(container)`
                """)
        }
        if let held, held.current.id == info.keyID { return holding(held) }
        // A member's keys after the owner rotated them: the new key wrapped to its account.
        if let ring = try await EncryptedContainers(remote: self).refreshedAsMember(held: held, info: info) {
            return holding(ring)
        }
        let holds = held.map { "holds its older key \($0.current.id) (it was rotated, as when a member is removed)" }
        throw XferError(
            .unauthorized,
            """
            container \(container) is end-to-end encrypted under key \(info.keyID ?? "") and this device \
            \(holds ?? "does not hold it"); run `xfer key unlock --container \(container)` (or `xfer key recover`) first
            """)
    }

    /// This remote with `ring` (plain with none).
    private func holding(_ ring: ContainerKeyRing?) -> Remote {
        guard let ring else { return self }
        var unlocked = self
        unlocked.endToEnd = EndToEndKeys(ring: ring)
        return unlocked
    }

    /// Runs `body` while the server is asked what ``unlocked()`` asks it, for work that looks at
    /// its own disk first (a push's state and files, a pull's state) and sends nothing before the answer.
    ///
    /// The key this device holds is read once: `body` gets the remote ``unlocked()`` returns
    /// whenever it returns at all (with that key, or plain when there is none), and
    /// `confirmed`, which `body` must await before it sends anything. `confirmed` throws what
    /// ``unlocked()`` would have thrown, and also throws if the answer were ever a remote other
    /// than the one `body` got. Cancelling the task that awaits it cancels the question.
    ///
    /// When the answer is the same container under newer keys (a member's device taking the
    /// owner's rotated key), `body` runs once more with them: it sent nothing the first time.
    public func whileUnlocking<T>(
        _ body: (Remote, _ confirmed: @escaping @Sendable () async throws -> Void) async throws -> T
    ) async throws -> T {
        do {
            return try await whileUnlockingOnce(body)
        } catch is KeysRenewed {
            return try await whileUnlockingOnce(body)
        }
    }

    /// Thrown by `confirmed` when the keys held were renewed meanwhile.
    private struct KeysRenewed: Error {}

    private func whileUnlockingOnce<T>(
        _ body: (Remote, _ confirmed: @escaping @Sendable () async throws -> Void) async throws -> T
    ) async throws -> T {
        let held = try containerKeyFile.read()
        let assumed = holding(held)
        let asking = Task { try await unlocked(held: held) }
        defer { asking.cancel() }
        return try await body(assumed) { [container] in
            let answer = try await withTaskCancellationHandler {
                try await asking.value
            } onCancel: {
                asking.cancel()
            }
            let (now, then) = (answer.endToEnd, assumed.endToEnd)
            if let now, let then, now.keyID == then.keyID, now.currentKeyID != then.currentKeyID { throw KeysRenewed() }
            guard now?.currentKeyID == then?.currentKeyID else {
                throw XferError(
                    .internal,
                    "the key of container \(container) changed while this command looked at its files and state; nothing was sent, run it again"
                )
            }
        }
    }

    /// This remote with the keys this device holds for its container, the one whose first key
    /// has id `keyID` (``EndToEndKeys/keyID``), found without asking the server: for a synced
    /// folder, which records the key it syncs under (its passes ask the server, through ``unlocked()``).
    /// - Throws: `unauthorized` if this device no longer holds that key.
    public func holding(keyID: String) throws -> Remote {
        guard let ring = try containerKeyFile.read(),
            ring.identity.id == keyID
        else {
            throw XferError(
                .unauthorized,
                """
                container \(container) is end-to-end encrypted and this device no longer holds its key \(keyID); \
                run `xfer key unlock --container \(container)` (or `xfer key recover`) first
                """)
        }
        return holding(ring)
    }

    /// The manifest digest the server records for `synced` at `path` (its server path): the
    /// manifest's, or in an end-to-end encrypted container its carrier's.
    func serverDigest(of synced: SyncedDocument, at path: DocumentPath) -> String {
        if let known = synced.serverDigest { return known }
        guard let endToEnd else { return synced.manifest.digest.hex }
        return
            (try? endToEnd.carrier(of: synced.manifest, sealedPath: path.value, version: synced.version).carrier.digest
            .hex) ?? ""
    }

    /// The carrier the server keeps for `synced` at `path` (its server path) in an end-to-end
    /// encrypted container, rebuilt (sealing is deterministic): what a push's carrier and a
    /// pull's go as deltas against. `nil` if it cannot be, or is not the one the server recorded
    /// (as this root noted its digest; one it did not note is what ``serverDigest(of:at:)`` rebuilds).
    func serverCarrier(of synced: SyncedDocument, at path: DocumentPath) -> Manifest? {
        guard let endToEnd,
            let carrier = try? endToEnd.carrier(of: synced.manifest, sealedPath: path.value, version: synced.version)
                .carrier,
            synced.serverDigest.map({ carrier.digest.hex == $0 }) ?? true
        else { return nil }
        return carrier
    }

    /// Whether the server holds `synced`, the version of `path` a root synced, as that root
    /// knows it (``SyncedDocument/isHeld(by:digest:)``): one request for that version.
    func holds(_ synced: SyncedDocument, at path: DocumentPath) async throws -> Bool {
        synced.isHeld(
            by: try await connection.statIfKept(container: container, path: path, version: synced.version),
            digest: serverDigest(of: synced, at: path))
    }

    /// The same for many documents, asked a thousand at a time (the manifest batch route:
    /// each item describes the version asked for, or says `not_found`); one the batch does not
    /// answer for plainly (too large an answer, an older server) is asked alone.
    /// - Returns: One answer per document, in order: a document asked alone whose answer was
    ///   an error (one that does not stop every document) has that error.
    /// - Throws: What stops every document (`unavailable`, `unauthorized`, `cancelled`).
    func holds(_ documents: [(synced: SyncedDocument, path: DocumentPath)]) async throws -> [Result<Bool, any Error>] {
        var answers = [Bool?](repeating: nil, count: documents.count)
        for batch in Array(documents.indices).batched(atMost: ProtocolLimits.maximumBatchDocuments) {
            let items: [ManifestBatchResult.Item]
            do {
                items = try await connection.manifests(
                    container: container,
                    batch.map {
                        ManifestBatchRequest.Wanted(path: documents[$0].path, version: documents[$0].synced.version)
                    })
            } catch let error as XferError where !error.stopsEveryDocument {
                continue  // each asked alone below
            }
            for (index, item) in zip(batch, items) {
                if let info = item.document, info.path == documents[index].path {
                    answers[index] = documents[index].synced.isHeld(
                        by: info, digest: serverDigest(of: documents[index].synced, at: documents[index].path))
                } else if item.error?.code == XferError.Code.notFound.name {
                    answers[index] = false
                }
            }
        }
        var result: [Result<Bool, any Error>] = []
        for (index, answer) in answers.enumerated() {
            if let answer {
                result.append(.success(answer))
                continue
            }
            do {
                result.append(.success(try await holds(documents[index].synced, at: documents[index].path)))
            } catch let error as XferError where error.stopsEveryDocument {
                throw error
            } catch {
                result.append(.failure(error))
            }
        }
        return result
    }

    /// Creates a remote.
    /// - Parameter endToEnd: The container's keys, when the caller holds them already (else
    ///   ``unlocked()`` finds them).
    /// - Parameter keyFile: Where the container's key is kept, if not in the state directory.
    public init(
        connection: ServerConnection, container: ContainerName, stateDirectory: String, endToEnd: EndToEndKeys? = nil,
        keyFile: String? = nil
    ) {
        self.connection = connection
        self.container = container
        self.stateDirectory = stateDirectory
        self.endToEnd = endToEnd
        self.keyFile = keyFile
    }
}
