/// The full description of one document version: a single file, or a package (a directory
/// tree committed as one document).
///
/// Its canonical encoding (``encoded()``, format in docs/FORMAT.md) is deterministic: the
/// same tree always gives the same bytes and so the same ``digest``. Every way to build one
/// validates it, so a `Manifest` value is always well-formed.
public struct Manifest: Sendable, Hashable {
    /// The current encoding version.
    public static let formatVersion: UInt8 = 1

    /// A single file, a package, or a directory of a synced folder.
    public enum Kind: UInt8, Sendable, Hashable {
        /// One regular file (or symlink): exactly one entry, with the empty path.
        case file = 1
        /// A directory tree: entries with relative paths, the root implied.
        case package = 2
        /// A directory alone, not what is in it (a synced folder's directories, empty ones
        /// included): exactly one directory entry, with the empty path. Other documents may
        /// lie below it.
        case directory = 3
    }

    /// A chunk of a file: its id and plain length. Offsets follow from the order.
    public struct ChunkReference: Sendable, Hashable, BitwiseCopyable {
        /// SHA-256 of the chunk's plain bytes.
        public var id: ChunkID
        /// Plain length, 1 ... the manifest's maximum chunk size.
        public var length: Int

        /// Creates a reference.
        /// - Parameters:
        ///   - id: The chunk id.
        ///   - length: Its plain length.
        public init(id: ChunkID, length: Int) {
            self.id = id
            self.length = length
        }
    }

    /// One file, directory or symlink of the document.
    public struct Entry: Sendable, Hashable {
        /// Path relative to the document root ("" for a single-file document).
        public var path: String
        /// File, directory or symlink.
        public var kind: EntryKind
        /// Permission bits, at most 0o7777.
        public var mode: UInt32
        /// Modification time, nanoseconds since 1970.
        public var mtimeNanoseconds: Int64
        /// The file's chunks in order (files only).
        public var chunks: [ChunkReference]
        /// The link's target (symlinks only).
        public var symlinkTarget: String?

        /// Creates an entry.
        /// - Parameters:
        ///   - path: Relative path.
        ///   - kind: File, directory or symlink.
        ///   - mode: Permission bits.
        ///   - mtimeNanoseconds: Modification time.
        ///   - chunks: Chunks of a file.
        ///   - symlinkTarget: Target of a symlink.
        public init(
            path: String, kind: EntryKind, mode: UInt32, mtimeNanoseconds: Int64,
            chunks: [ChunkReference] = [], symlinkTarget: String? = nil
        ) {
            self.path = path
            self.kind = kind
            self.mode = mode
            self.mtimeNanoseconds = mtimeNanoseconds
            self.chunks = chunks
            self.symlinkTarget = symlinkTarget
        }

        /// Bytes of content: the sum of chunk lengths for a file, the target's length for a symlink.
        public var size: Int64 {
            switch kind {
            case .file: return chunks.reduce(0) { $0 + Int64($1.length) }
            case .symlink: return Int64(symlinkTarget?.utf8.count ?? 0)
            case .directory: return 0
            }
        }
    }

    /// File or package.
    public let kind: Kind
    /// The chunk limits the files were cut with (a client re-cutting a file must use them).
    public let chunker: ChunkerConfiguration
    /// The entries in bytewise path order, parents before children (packed: see ``Entries``).
    public let entries: Entries

    /// Creates a manifest, checking it.
    /// - Parameters:
    ///   - kind: File or package.
    ///   - chunker: The chunk limits used.
    ///   - entries: For a file, one entry with path ""; for a package, any order (they are sorted).
    /// - Throws: `XferError` `invalid_manifest` or `invalid_path` saying what is wrong.
    public init(kind: Kind, chunker: ChunkerConfiguration, entries: [Entry]) throws {
        var packed = Entries()
        let sorted = PathOrder.sorted(entries, by: \.path)  // no sorted copy if already in order
        try Self.checkTotals(entries: sorted.count, references: 0, bytes: 0)
        packed.reserve(
            entries: sorted.count, nameBytes: sorted.reduce(0) { $0 + $1.path.utf8.count },
            chunks: sorted.reduce(0) { $0 + $1.chunks.count })
        for entry in sorted { packed.append(entry) }
        guard !packed.overflowed else {
            throw XferError(.tooLarge, "manifest names take over 4 GiB, more than a document may hold")
        }
        try self.init(kind: kind, chunker: chunker, packed: packed)
    }

    /// Creates a manifest from entries packed in path order, checking it.
    init(kind: Kind, chunker: ChunkerConfiguration, packed: Entries) throws {
        self.kind = kind
        self.chunker = chunker
        self.entries = packed
        try validate()
    }

    /// Total content bytes of all files and symlinks.
    public var totalSize: Int64 {
        entries.indices.reduce(entries.chunkBytes) {
            $0 + (entries.kind(at: $1) == .symlink ? entries.size(at: $1) : 0)
        }
    }

    /// Files and symlinks (entries that are not directories).
    public var fileCount: Int { entries.indices.reduce(0) { $0 + (entries.kind(at: $1) == .directory ? 0 : 1) } }

    /// Every chunk reference, in entry order, repeats included.
    public var allChunks: Chunks { entries.allChunks }

    /// The SHA-256 of the canonical encoding: names this version's content.
    public var digest: ChunkID { encodingDigest }

    func validate() throws {
        try Self.checkTotals(entries: entries.count, references: entries.allChunks.count, bytes: 0)
        let slash = UInt8(ascii: "/")
        switch kind {
        case .file:
            guard entries.count == 1, entries.pathBytes(at: 0).isEmpty, entries.kind(at: 0) != .directory else {
                throw XferError(
                    .invalidManifest, "a file manifest has exactly one file or symlink entry with an empty path")
            }
        case .directory:
            guard entries.count == 1, entries.pathBytes(at: 0).isEmpty, entries.kind(at: 0) == .directory else {
                throw XferError(
                    .invalidManifest, "a directory manifest has exactly one directory entry with an empty path")
            }
        case .package:
            for index in entries.indices {
                let path = entries.pathBytes(at: index)
                try DocumentPathRules.validate(utf8: path)
                if index > 0, !entries.pathBytes(at: index - 1).lexicographicallyPrecedes(path) {
                    throw XferError(
                        .invalidManifest,
                        "package entries must have distinct paths in bytewise order; \"\(entries.path(at: index))\" repeats or is out of order"
                    )
                }
                // Its parent is an earlier entry (path order puts it first), found by its bytes.
                if let cut = path.lastIndex(of: slash) {
                    let parent = path[..<cut]
                    guard let found = entries.index(ofPath: parent), entries.kind(at: found) == .directory else {
                        throw XferError(
                            .invalidManifest,
                            "\"\(entries.path(at: index))\" has no directory entry for its parent \"\(String(decoding: parent, as: UTF8.self))\""
                        )
                    }
                }
            }
        }
        for index in entries.indices {
            let mode = entries.mode(at: index)
            guard mode <= 0o7777 else {
                throw XferError(
                    .invalidManifest, "\"\(entries.path(at: index))\" has mode \(String(mode, radix: 8)), above 7777")
            }
            let chunks = entries.chunks(at: index)
            let target = entries.symlinkTarget(at: index)
            switch entries.kind(at: index) {
            case .file:
                guard target == nil else {
                    throw XferError(.invalidManifest, "file \"\(entries.path(at: index))\" has a symlink target")
                }
                for chunk in chunks where chunk.length < 1 || chunk.length > chunker.maximumSize {
                    throw XferError(
                        .invalidManifest,
                        "file \"\(entries.path(at: index))\" has a chunk of \(chunk.length) bytes, outside 1...\(chunker.maximumSize)"
                    )
                }
            case .directory:
                guard chunks.isEmpty, target == nil else {
                    throw XferError(.invalidManifest, "directory \"\(entries.path(at: index))\" has content")
                }
            case .symlink:
                guard chunks.isEmpty, let target, !target.isEmpty,
                    target.utf8.count <= DocumentPathRules.maximumPathBytes, !target.utf8.contains(0)
                else {
                    throw XferError(
                        .invalidManifest,
                        "symlink \"\(entries.path(at: index))\" needs a target of 1...\(DocumentPathRules.maximumPathBytes) bytes without NUL"
                    )
                }
            }
        }
        // Lengths are within the chunker's bounds now, so the sum cannot overflow.
        try Self.checkTotals(entries: entries.count, references: 0, bytes: totalSize)
    }
}

/// The rules for a path inside a document: relative, "/"-separated, no empty, "." or ".."
/// component, bounded length, and no character that could make a name lie when printed:
/// no control character (C0, DEL, C1 such as U+0085), no line or paragraph separator
/// (U+2028, U+2029) and no bidirectional formatting character (U+061C, U+200E, U+200F,
/// U+202A–U+202E, U+2066–U+2069). Server and client apply the same rule, to document paths
/// and to every entry of a package.
public enum DocumentPathRules {
    /// Longest path in bytes.
    public static let maximumPathBytes = 4096
    /// Longest path component in bytes.
    public static let maximumComponentBytes = 255

    /// Checks a relative path.
    /// - Parameter path: The path.
    /// - Throws: `XferError` `invalid_path` saying which rule it breaks.
    public static func validate(_ path: String) throws {
        var path = path
        try path.withUTF8 { try validate(utf8: $0) }
    }

    /// Checks a relative path given as UTF-8 bytes, without making a string unless it is refused.
    /// - Parameter bytes: The path's bytes.
    /// - Throws: `XferError` `invalid_path` saying which rule it breaks.
    public static func validate(utf8 bytes: some Collection<UInt8>) throws {
        func text() -> String { String(decoding: bytes, as: UTF8.self) }
        guard !bytes.isEmpty else { throw XferError(.invalidPath, "a path inside a package cannot be empty") }
        guard bytes.count <= maximumPathBytes else {
            throw XferError(.invalidPath, "path is \(bytes.count) bytes, over the limit of \(maximumPathBytes)")
        }
        guard !bytes.contains(0) else { throw XferError(.invalidPath, "path contains a NUL byte") }
        guard UTF8Scalars.isValid(bytes) else { throw XferError(.invalidPath, "path is not valid UTF-8") }
        guard bytes.first != UInt8(ascii: "/") else {
            throw XferError(.invalidPath, "\"\(text())\" is absolute; paths are relative to the document")
        }
        // Every refused character is a control byte or starts with a byte of 0xC2 or more.
        if bytes.contains(where: { $0 < 0x20 || $0 == 0x7F || $0 >= 0xC2 }),
            let bad = UTF8Scalars.first(in: bytes, where: isRefused)
        {
            throw XferError(
                .invalidPath,
                "path contains the character U+\(String(bad.value, radix: 16, uppercase: true).leftPadded(to: 4)), which names may not hold (a control, separator or bidirectional formatting character)"
            )
        }
        for component in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if component.isEmpty || component.elementsEqual([0x2E]) || component.elementsEqual([0x2E, 0x2E]) {
                throw XferError(.invalidPath, "\"\(text())\" has an empty, \".\" or \"..\" component")
            }
            if component.count > maximumComponentBytes {
                throw XferError(.invalidPath, "\"\(text())\" has a component over \(maximumComponentBytes) bytes")
            }
        }
    }

    /// Whether a name may not hold this character (see the type's rules).
    public static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true  // C0, DEL, C1 controls
        case 0x2028, 0x2029: return true  // line and paragraph separators
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: return true  // bidi formatting
        default: return false
        }
    }
}

extension String {
    /// The string with leading zeros up to `width` characters.
    func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

/// Unicode scalars of UTF-8 bytes, decoded in place.
package enum UTF8Scalars {
    /// The first scalar of `bytes` that `refused` picks, if any (bytes past an invalid
    /// sequence are not looked at: valid UTF-8 is the caller's to ensure, see ``isValid(_:)``).
    package static func first(in bytes: some Collection<UInt8>, where refused: (Unicode.Scalar) -> Bool) -> Unicode
        .Scalar?
    {
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while case .scalarValue(let scalar) = decoder.decode(&iterator) {
            if refused(scalar) { return scalar }
        }
        return nil
    }

    /// Whether `bytes` are valid UTF-8 (no overlong form, surrogate or value past U+10FFFF).
    package static func isValid(_ bytes: some Collection<UInt8>) -> Bool {
        if !bytes.contains(where: { $0 >= 0x80 }) { return true }
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue: continue
            case .emptyInput: return true
            case .error: return false
            }
        }
    }
}
