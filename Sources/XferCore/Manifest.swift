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
    public struct ChunkReference: Sendable, Hashable {
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
        public init(path: String, kind: EntryKind, mode: UInt32, mtimeNanoseconds: Int64,
                    chunks: [ChunkReference] = [], symlinkTarget: String? = nil) {
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
    /// The entries in bytewise path order, parents before children.
    public let entries: [Entry]

    /// Creates a manifest, checking it.
    /// - Parameters:
    ///   - kind: File or package.
    ///   - chunker: The chunk limits used.
    ///   - entries: For a file, one entry with path ""; for a package, any order (they are sorted).
    /// - Throws: `XferError` `invalid_manifest` or `invalid_path` saying what is wrong.
    public init(kind: Kind, chunker: ChunkerConfiguration, entries: [Entry]) throws {
        self.kind = kind
        self.chunker = chunker
        self.entries = PathOrder.sorted(entries, by: \.path)  // no sorted copy if already in order
        try validate()
    }

    /// Total content bytes of all files and symlinks.
    public var totalSize: Int64 { entries.reduce(0) { $0 + $1.size } }

    /// Files and symlinks (entries that are not directories).
    public var fileCount: Int { entries.reduce(0) { $0 + ($1.kind == .directory ? 0 : 1) } }

    /// Every chunk reference, in entry order, repeats included.
    public var allChunks: [ChunkReference] { entries.flatMap(\.chunks) }

    /// The SHA-256 of the canonical encoding: names this version's content.
    public var digest: ChunkID { ChunkID.of(encoded()) }

    func validate() throws {
        try Self.checkTotals(entries: entries.count, references: entries.reduce(0) { $0 + $1.chunks.count }, bytes: 0)
        switch kind {
        case .file:
            guard entries.count == 1, entries[0].path.isEmpty, entries[0].kind != .directory else {
                throw XferError(.invalidManifest, "a file manifest has exactly one file or symlink entry with an empty path")
            }
        case .directory:
            guard entries.count == 1, entries[0].path.isEmpty, entries[0].kind == .directory else {
                throw XferError(.invalidManifest, "a directory manifest has exactly one directory entry with an empty path")
            }
        case .package:
            var directories: Set<String> = []
            var previous: String? = nil
            for entry in entries {
                try DocumentPathRules.validate(entry.path)
                if let previous, !previous.utf8.lexicographicallyPrecedes(entry.path.utf8) {
                    throw XferError(.invalidManifest, "package entries must have distinct paths in bytewise order; \"\(entry.path)\" repeats or is out of order")
                }
                if let slash = entry.path.utf8.lastIndex(of: UInt8(ascii: "/")) {
                    let parent = String(entry.path[..<slash])
                    guard directories.contains(parent) else {
                        throw XferError(.invalidManifest, "\"\(entry.path)\" has no directory entry for its parent \"\(parent)\"")
                    }
                }
                if entry.kind == .directory { directories.insert(entry.path) }
                previous = entry.path
            }
        }
        for entry in entries {
            guard entry.mode <= 0o7777 else {
                throw XferError(.invalidManifest, "\"\(entry.path)\" has mode \(String(entry.mode, radix: 8)), above 7777")
            }
            switch entry.kind {
            case .file:
                guard entry.symlinkTarget == nil else {
                    throw XferError(.invalidManifest, "file \"\(entry.path)\" has a symlink target")
                }
                for chunk in entry.chunks where chunk.length < 1 || chunk.length > chunker.maximumSize {
                    throw XferError(.invalidManifest, "file \"\(entry.path)\" has a chunk of \(chunk.length) bytes, outside 1...\(chunker.maximumSize)")
                }
            case .directory:
                guard entry.chunks.isEmpty, entry.symlinkTarget == nil else {
                    throw XferError(.invalidManifest, "directory \"\(entry.path)\" has content")
                }
            case .symlink:
                guard entry.chunks.isEmpty, let target = entry.symlinkTarget, !target.isEmpty,
                      target.utf8.count <= DocumentPathRules.maximumPathBytes, !target.utf8.contains(0) else {
                    throw XferError(.invalidManifest, "symlink \"\(entry.path)\" needs a target of 1...\(DocumentPathRules.maximumPathBytes) bytes without NUL")
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
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty else { throw XferError(.invalidPath, "a path inside a package cannot be empty") }
        guard bytes.count <= maximumPathBytes else {
            throw XferError(.invalidPath, "path is \(bytes.count) bytes, over the limit of \(maximumPathBytes)")
        }
        guard !bytes.contains(0) else { throw XferError(.invalidPath, "path contains a NUL byte") }
        guard bytes.first != UInt8(ascii: "/") else {
            throw XferError(.invalidPath, "\"\(path)\" is absolute; paths are relative to the document")
        }
        if let bad = path.unicodeScalars.first(where: isRefused) {
            throw XferError(.invalidPath, "path contains the character U+\(String(bad.value, radix: 16, uppercase: true).leftPadded(to: 4)), which names may not hold (a control, separator or bidirectional formatting character)")
        }
        for component in bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false) {
            if component.isEmpty || component.elementsEqual([0x2E]) || component.elementsEqual([0x2E, 0x2E]) {
                throw XferError(.invalidPath, "\"\(path)\" has an empty, \".\" or \"..\" component")
            }
            if component.count > maximumComponentBytes {
                throw XferError(.invalidPath, "\"\(path)\" has a component over \(maximumComponentBytes) bytes")
            }
        }
    }

    /// Whether a name may not hold this character (see the type's rules).
    public static func isRefused(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true             // C0, DEL, C1 controls
        case 0x2028, 0x2029: return true                         // line and paragraph separators
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
