import Foundation

/// What a mount has open: files (the version each opened, or a staging file), who writes each
/// document, and directory listings in progress.
extension MountFileSystem {
    /// An open file: the version it opened, and where a sequential reader is; or a staging
    /// file (`staged`), read and written in place.
    struct OpenFile: Sendable {
        var chunks: FileChunks
        var staged: Int32? = nil
        /// The document a staging file is of.
        var path: String? = nil
        /// Opened for writing (counted in ``Handles/writers``).
        var writer = false
        /// Where the next read starts if it continues the last one.
        var next: Int64 = 0
        /// Bytes read in one sequential run so far.
        var run: Int64 = 0
        /// The chunks before this one are fetched or asked for already.
        var askedTo = 0

        /// Notes a read of chunks `range`, and says which chunks after it to fetch ahead, in
        /// requests of ``MountFileSystem/readAheadRequest`` bytes: none until a run passes 2 MiB
        /// (a read at a random offset moves about what it covers), then enough to keep as much
        /// asked ahead as the run so far, at most ``MountFileSystem/maximumReadAhead``.
        mutating func read(offset: Int64, size: Int, range: Range<Int>) -> [Range<Int>] {
            run = offset == next ? run + Int64(size) : Int64(size)
            next = offset + Int64(size)
            guard run >= 2 << 20 else { return [] }
            let window = min(run, Int64(MountFileSystem.maximumReadAhead))
            askedTo = max(askedTo, range.upperBound)
            var requests: [Range<Int>] = []
            while chunks.bytes(in: range.upperBound..<askedTo) < window, askedTo < chunks.references.count {
                let request = chunks.following(askedTo..<askedTo, bytes: MountFileSystem.readAheadRequest)
                requests.append(request)
                askedTo = request.upperBound
            }
            return requests
        }
    }

    struct Handles: Sendable {
        var files: [UInt64: OpenFile] = [:]
        /// Handles open for writing, by document.
        var writers: [String: Int] = [:]
        /// Documents written since they were last made due.
        var dirty: Set<String> = []
        var directories: [UInt64: [(name: String, inode: UInt64, mode: UInt32)]] = [:]
        var last: UInt64 = 0

        /// Handles open on document `from` (or, in a package, below it) now write at `to` (its
        /// staging file moved).
        mutating func follow(_ from: String, to: String) {
            func moved(_ path: String) -> String? {
                path == from ? to : path.hasPrefix(from + "/") ? to + path.dropFirst(from.count) : nil
            }
            for (handle, file) in files { if let path = file.path.flatMap(moved) { files[handle]!.path = path } }
            for (path, count) in writers {
                if let new = moved(path) {
                    writers[path] = nil
                    writers[new, default: 0] += count
                }
            }
            for path in dirty {
                if let new = moved(path) {
                    dirty.remove(path)
                    dirty.insert(new)
                }
            }
        }

        /// Whether `path`, or anything below it, is open for writing.
        func isWriting(under path: String) -> Bool {
            writers.keys.contains { $0 == path || $0.hasPrefix(path + "/") }
        }

        mutating func next() -> UInt64 {
            last += 1
            return last
        }
    }
}
