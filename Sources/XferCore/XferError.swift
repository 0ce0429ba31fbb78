/// An error from xfer: a stable code callers can switch on, a message for people, and the cause.
///
/// New codes can be added without breaking callers, as with NIOFileSystem's `FileSystemError`.
public struct XferError: Error, Sendable, CustomStringConvertible {
    /// A stable, machine-readable error code.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        /// The code's name, stable across releases (`corrupt_chunk`, `io`, …).
        public let name: String

        private init(_ name: String) { self.name = name }

        /// The code with this name, as it arrives over the wire; unknown names are kept as they are.
        /// - Parameter name: A code name such as `conflict`.
        /// - Returns: The code.
        public static func named(_ name: String) -> Code { Code(name) }

        /// A configuration value is out of range or inconsistent.
        public static let invalidConfiguration = Code("invalid_configuration")
        /// A file system call failed.
        public static let io = Code("io")
        /// The disk (or database) that would hold the data is full, or the file system's quota
        /// is reached: nothing was stored, and freeing space is the answer.
        public static let storageFull = Code("storage_full")
        /// A file or chunk was not found.
        public static let notFound = Code("not_found")
        /// Chunk bytes do not match their id, size or encoding.
        public static let corruptChunk = Code("corrupt_chunk")
        /// A value is larger than its limit allows.
        public static let tooLarge = Code("too_large")
        /// libzstd reported an error.
        public static let compression = Code("compression")
        /// libcrypto reported an error.
        public static let crypto = Code("crypto")
        /// A manifest could not be decoded or is not canonical.
        public static let invalidManifest = Code("invalid_manifest")
        /// A path is not a valid relative document path.
        public static let invalidPath = Code("invalid_path")
        /// The operation was cancelled.
        public static let cancelled = Code("cancelled")
        /// A request is malformed (bad JSON, a missing or out-of-range parameter).
        public static let badRequest = Code("bad_request")
        /// The token is missing, unknown or revoked.
        public static let unauthorized = Code("unauthorized")
        /// The token is valid but may not do this (an admin route, say).
        public static let forbidden = Code("forbidden")
        /// The document changed on the server since the version this request is based on.
        public static let conflict = Code("conflict")
        /// A manifest references chunks the server does not have; upload them and retry.
        public static let missingChunks = Code("missing_chunks")
        /// The account's storage quota would be exceeded.
        public static let quotaExceeded = Code("quota_exceeded")
        /// A name (account, container) is already taken.
        public static let alreadyExists = Code("already_exists")
        /// The container is end-to-end encrypted and the request is not one an encrypted
        /// container takes (a plain document or value), or it cannot be made encrypted.
        public static let encryptedContainer = Code("encrypted_container")
        /// The server could not be reached or did not answer.
        public static let unavailable = Code("unavailable")
        /// Too many attempts in too little time (a share link's wrong passwords): wait, then retry.
        public static let rateLimited = Code("rate_limited")
        /// A synced folder's root is gone, unmounted, or not the folder that was synced.
        public static let folderMissing = Code("folder_missing")
        /// The server showed an older version of a document than it had shown this device
        /// (an end-to-end encrypted container rolled back): nothing was replaced.
        public static let rolledBack = Code("rolled_back")
        /// The other side broke the protocol or failed unexpectedly.
        public static let `internal` = Code("internal")

        public var description: String { name }
    }

    /// What went wrong, as a stable code.
    public var code: Code
    /// A sentence for people, saying what failed and, where it helps, what to do.
    public var message: String
    /// The lower-level error, if any (an `Errno`-like value or another `XferError`).
    public var cause: (any Error & Sendable)?

    /// Creates an error.
    /// - Parameters:
    ///   - code: The stable code.
    ///   - message: A sentence for people.
    ///   - cause: The lower-level error, if any.
    public init(_ code: Code, _ message: String, cause: (any Error & Sendable)? = nil) {
        self.code = code
        self.message = message
        self.cause = cause
    }

    public var description: String {
        if let cause { return "\(message) (\(cause))" }
        return message
    }
}

/// The cause of an error that says a local file was written while it was read: what was read
/// may mix two contents, so nothing made from it is committed.
public struct ChangedWhileRead: Error, Sendable, CustomStringConvertible {
    public init() {}
    public var description: String { "changed while it was read" }
}

extension XferError {
    /// Whether this error stops every document of a pass or batch, not just the one it came
    /// from: the server is unreachable, the token is refused, or the work was cancelled.
    public var stopsEveryDocument: Bool {
        code == .unavailable || code == .unauthorized || code == .cancelled
    }

    /// Whether the local tree moved under the operation (``isVanished``, or a file written while
    /// it was read): nothing was committed from it, and trying again later is the answer.
    public var isLocalChange: Bool {
        if isVanished || cause is ChangedWhileRead { return true }
        return (cause as? XferError)?.isLocalChange ?? false
    }

    /// Whether this error says a local file or directory went away while it was being read
    /// (`ENOENT`, `ENOTDIR`, `ESTALE` underneath): the ordinary event of a tree that editors,
    /// compilers and git change while it is scanned, never a reason to fail a whole pass.
    public var isVanished: Bool {
        if let errno = cause as? SystemErrno { return SystemErrno.vanished(errno.rawValue) }
        if let inner = cause as? XferError { return inner.isVanished }
        return false
    }
}

extension SystemErrno {
    /// Whether `errno` means the entry is gone (or its parent is no longer a directory).
    public static func vanished(_ errno: Int32) -> Bool {
        errno == ENOENT || errno == ENOTDIR || errno == ESTALE
    }

    /// Whether `errno` means there is no room left to write (`ENOSPC`, `EDQUOT`).
    public static func full(_ errno: Int32) -> Bool {
        errno == ENOSPC || errno == EDQUOT
    }
}

extension XferError {
    /// The error for a failed write-side system call (`action` such as "write", on `path`):
    /// `storage_full` when there is no room left, else `io`. The one place a full disk gets its code.
    public static func writing(
        _ errno: Int32, _ action: String, _ path: String, whenFull advice: String = "free some disk space and retry"
    ) -> XferError {
        if SystemErrno.full(errno) {
            return XferError(.storageFull, "no space left to \(action) \(path); \(advice)", cause: SystemErrno(errno))
        }
        return XferError(.io, "cannot \(action) \(path)", cause: SystemErrno(errno))
    }
}

/// Any error, kept as its description: a `Sendable` cause for errors from libraries whose
/// error types are not (database drivers, HTTP clients).
public struct DescribedError: Error, Sendable, CustomStringConvertible {
    public let description: String

    /// Captures an error's description.
    /// - Parameter error: The error.
    public init(_ error: any Error) { description = "\(error)" }
}

/// A POSIX error number with its name, as a cause of an ``XferError``.
public struct SystemErrno: Error, Sendable, Equatable, CustomStringConvertible {
    /// The raw `errno` value.
    public let rawValue: Int32

    /// Wraps an errno value.
    /// - Parameter rawValue: The value of `errno`.
    public init(_ rawValue: Int32) { self.rawValue = rawValue }

    public var description: String {
        #if canImport(Glibc)
            return String(cString: strerror(rawValue))
        #else
            return "errno \(rawValue)"
        #endif
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
