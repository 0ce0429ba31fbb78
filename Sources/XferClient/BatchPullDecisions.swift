import XferCore
import XferProtocol

/// The pure half of a batch pull (``SyncDirectory/pullMany(_:sources:progress:)``): which
/// chunks the batch downloads and whom each is counted for, which documents are pulled alone
/// and which together, and the order they count as used. Tested without a server or a disk.
enum BatchPullDecisions {
    /// The chunks a batch downloads.
    struct Wanted: Equatable {
        /// Each chunk's length as its manifest declares it.
        var lengths: [ChunkID: Int] = [:]
        /// The chunks in the order they are asked for.
        var order: [ChunkID] = []
        /// The document (by its number in the batch) a download is counted for.
        var chargedTo: [ChunkID: Int] = [:]
    }

    /// The chunks of `manifests` (by document number) that no `local` file holds: each once,
    /// in document order, counted for the first document that names it.
    static func wanted<Location>(_ manifests: [Int: Manifest], local: [ChunkID: Location]) -> Wanted {
        var wanted = Wanted()
        for index in manifests.keys.sorted() {
            for chunk in manifests[index]!.allChunks where local[chunk.id] == nil && wanted.lengths[chunk.id] == nil {
                wanted.lengths[chunk.id] = chunk.length
                wanted.chargedTo[chunk.id] = index
                wanted.order.append(chunk.id)
            }
        }
        return wanted
    }

    /// Which of `count` documents are pulled alone, first and one at a time, and which
    /// together. A directory document (or one whose kind is not known yet: its manifest did not
    /// come) goes first and alone: the documents inside it are made in it.
    /// - Parameter kinds: The kind of each document whose manifest came, by document number.
    static func split(_ count: Int, kinds: [Int: Manifest.Kind]) -> (alone: [Int], together: [Int]) {
        var alone: [Int] = []
        var together: [Int] = []
        for index in 0..<count {
            if let kind = kinds[index], kind != .directory {
                together.append(index)
            } else {
                alone.append(index)
            }
        }
        return (alone, together)
    }

    /// The documents pulled together that count as used: those that succeeded, in the batch's
    /// order, whatever order they finished in (so the local limit evicts the same ones).
    static func used(_ together: [Int], succeeded: (Int) -> Bool) -> [Int] {
        together.filter(succeeded)
    }
}
