import Foundation

/// Every key an end-to-end encrypted container has had, newest first (docs/FORMAT.md,
/// "End-to-end keys"). A container starts with one key; removing a member of a shared
/// container *rotates* it: a new random key seals what is written from then on, so a removed
/// member, who may have kept the old keys, cannot open it.
///
/// - The newest key (``current``) seals new chunks, manifests, values and deletions.
/// - Every key opens what it sealed: a sealed value names the key that sealed it.
/// - The first key (``identity``) keeps naming: document names, chunk ids and cut points and
///   key-value keys stay derived from it, so a rotation renames nothing and deduplication and
///   deltas carry on across it.
///
/// The server keeps, for each rotation, a *link*: the previous key sealed under the new one
/// (``link(sealing:under:container:generation:)``). A device that holds the newest key (by a
/// passphrase or as a member) walks the links back to the first.
public struct ContainerKeyRing: Sendable, CustomStringConvertible {
    /// The keys, newest first; never empty.
    public let keys: [ContainerKey]

    /// A ring of these keys, newest first.
    /// - Throws: `invalid_configuration` if `keys` is empty.
    public init(_ keys: [ContainerKey]) throws {
        guard !keys.isEmpty else { throw XferError(.invalidConfiguration, "a key ring holds at least one key") }
        self.keys = keys
    }

    /// A ring of one key: a container never rotated.
    public init(single key: ContainerKey) { keys = [key] }

    /// The key new data is sealed with; its id is the one the server records.
    public var current: ContainerKey { keys[0] }
    /// The container's first key, which names what it holds.
    public var identity: ContainerKey { keys[keys.count - 1] }
    /// How many keys the container has had: 1 until a first rotation.
    public var generation: Int { keys.count }

    /// The keys of one purpose (``ContainerKey/derive(_:count:)``'s `label`) of every key, the
    /// newest's current: what seals new values of that purpose and opens every old one.
    public func sealing(_ label: String) -> SealingKeys {
        try! SealingKeys(keys.map { try! SealingKey(bytes: $0.derive(label)) })  // never empty, 32 bytes each
    }

    /// Whether this ring carries on `held`: it ends with every key of `held`, in order (the same
    /// first key), perhaps with newer ones in front.
    public func extends(_ held: ContainerKeyRing) -> Bool {
        keys.count >= held.keys.count && keys.suffix(held.keys.count).map(\.id) == held.keys.map(\.id)
    }

    public var description: String { "ContainerKeyRing(\(keys.map(\.id).joined(separator: " < ")))" }

    /// The ring with a new random key in front, and the link the server keeps for it.
    public func rotated(container: String) -> (ring: ContainerKeyRing, link: [UInt8]) {
        let next = ContainerKey.generate()
        let link = Self.link(sealing: current, under: next, container: container, generation: generation + 1)
        return (ContainerKeyRing(unchecked: [next] + keys), link)
    }

    /// The ring whose newest key is `current`, walked back through `links` (the server's,
    /// newest first: the link of generation `links.count + 1` first).
    /// - Throws: `unauthorized` if a link does not open under the key after it (damaged, of
    ///   another container, or out of order).
    public static func walking(from current: ContainerKey, links: [[UInt8]], container: String) throws
        -> ContainerKeyRing
    {
        var keys = [current]
        for (index, link) in links.enumerated() {
            let generation = links.count + 1 - index
            let sealing = try! SealingKeys([try! SealingKey(bytes: keys[index].derive("link"))])
            guard
                let bytes = try? sealing.open(
                    link, context: context(container, generation), what: "the key link of generation \(generation)"),
                let previous = try? ContainerKey(bytes: bytes)
            else {
                throw XferError(
                    .unauthorized,
                    "the server's key link of generation \(generation) of container \(container) does not open under the key after it"
                )
            }
            keys.append(previous)
        }
        return ContainerKeyRing(unchecked: keys)
    }

    /// The link of generation `generation`: `previous` sealed under `next`'s `link` key, bound to
    /// the container (`container`: its name in its owner's account) and the generation.
    static func link(sealing previous: ContainerKey, under next: ContainerKey, container: String, generation: Int)
        -> [UInt8]
    {
        let sealing = try! SealingKeys([try! SealingKey(bytes: next.derive("link"))])  // 32 bytes: cannot throw
        return sealing.seal(previous.bytes, context: context(container, generation))
    }

    static func context(_ container: String, _ generation: Int) -> [UInt8] {
        Array("xfer container key link v1 \(container) \(generation)".utf8)
    }

    private init(unchecked keys: [ContainerKey]) { self.keys = keys }
}
