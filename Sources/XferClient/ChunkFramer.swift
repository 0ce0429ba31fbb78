import Foundation
import XferCore
import XferProtocol

/// Makes an upload body of chunks read from their files: each read, compressed (against its
/// reference where the cache holds it, else alone) and framed, a piece at a time, so a body
/// can be sent while it is made (``ServerConnection/upload(pieces:)``) or made whole. The one
/// place a push turns ``PushEngine/Location``s into frames.
final class ChunkFramer: @unchecked Sendable {  // its state is only touched under `lock`
    private let lock = NSLock()
    private let locations: [PushEngine.Location]
    private let policy: CompressionPolicy
    private let codec: ChunkCodec
    private let cache: ChunkCache?
    private var next = 0
    private var openFile: (path: String, fd: Int32)? = nil
    private var buffer: [UInt8] = []
    private var sizes: [(payload: Int, plain: Int)] = []

    /// - Parameter codec: How the container's chunks travel: sealed ones are sealed here,
    ///   never against a reference, and never kept in the cache.
    init(_ locations: [PushEngine.Location], policy: CompressionPolicy, codec: ChunkCodec = .plain, cache: ChunkCache?)
    {
        self.locations = locations
        self.policy = policy
        self.codec = codec
        self.cache = cache
        sizes.reserveCapacity(locations.count)
    }

    deinit {
        if let openFile { close(openFile.fd) }
    }

    /// Each framed chunk's payload and plain sizes so far, in order.
    var framedSizes: [(payload: Int, plain: Int)] { lock.withLock { sizes } }

    /// The next piece of the body: the magic first, then the frames of the next chunks up to
    /// about `plainBytes` of them (at least one); `nil` once every chunk is framed. Also the
    /// small files' chunks as the cache keeps them (``PushEngine/Location/keep``). Its capacity
    /// is reserved once: a frame is never larger than its plain chunk plus its header.
    /// - Throws: `io` if a file cannot be read or is shorter than when it was chunked.
    func piece(plainBytes: Int) throws -> (bytes: [UInt8], kept: [EncodedChunk])? {
        try lock.withLock {
            guard next < locations.count else { return nil }
            var end = next
            var plain = 0
            while end < locations.count && (end == next || plain + locations[end].length <= plainBytes) {
                plain += locations[end].length
                end += 1
            }
            let range = next..<end
            next = end
            var body = range.lowerBound == 0 ? ChunkFrames.magic : []
            body.reserveCapacity(body.count + range.count * ChunkFrames.frameHeaderSize + plain)
            var kept: [EncodedChunk] = []
            // The cache only saves bytes on the wire: if it cannot be read, chunks go whole.
            let references = (try? cache?.plain(locations[range].compactMap(\.reference))) ?? [:]
            let longest = locations[range].map(\.length).max() ?? 0
            if buffer.count < longest { buffer = [UInt8](repeating: 0, count: longest) }
            for location in locations[range] {
                let fd = try file(location.file)
                try buffer.withUnsafeMutableBytes { raw in
                    let plain = UnsafeMutableRawBufferPointer(rebasing: raw[0..<location.length])
                    guard
                        try Syscall.pread(fd, into: plain, at: location.offset, path: location.file) == location.length
                    else {
                        throw XferError(
                            .io, "\(location.file) changed while it was being pushed (it is shorter now); push again",
                            cause: ChangedWhileRead())
                    }
                    let bytes = UnsafeRawBufferPointer(plain)
                    let chunk: EncodedChunk
                    // (A sealed push has no cache, so no reference: its chunks are sealed whole.)
                    if let reference = location.reference, reference != location.id,
                        let previous = references[reference]
                    {
                        chunk = try Zstd.encode(bytes, id: location.id, policy: policy, against: (reference, previous))
                    } else {
                        chunk = try codec.encode(bytes, id: location.id, policy: policy)
                    }
                    // Sealing names the bytes again: other bytes now are a file changed since it was read.
                    guard chunk.id == location.id else {
                        throw XferError(
                            .io, "\(location.file) changed while it was being pushed; push again",
                            cause: ChangedWhileRead())
                    }
                    ChunkFrames.append(chunk, to: &body)
                    sizes.append((chunk.payload.count, location.length))
                    if location.keep && !codec.isSealed { kept.append(try chunk.stored(plain: bytes, policy: policy)) }
                }
            }
            if next == locations.count, let openFile {
                close(openFile.fd)
                self.openFile = nil
            }
            return (body, kept)
        }
    }

    /// `path` open for reading (the file of the chunk before is often the same).
    private func file(_ path: String) throws -> Int32 {
        if let openFile, openFile.path == path { return openFile.fd }
        if let openFile { close(openFile.fd) }
        openFile = nil
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw XferError(.io, "cannot open \(path) to upload it", cause: SystemErrno(errno)) }
        openFile = (path, fd)
        return fd
    }
}
