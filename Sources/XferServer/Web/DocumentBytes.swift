import Foundation
import Hummingbird
import NIOCore
import NIOPosix
import XferCore
import XferProtocol

/// A document's bytes as the web view sends them: one file entry of a manifest, or a whole
/// package as a tar stream, read chunk by chunk from the store. Every chunk is decoded and
/// checked against its id before any of its bytes go out (a damaged store ends the response
/// early, never with wrong bytes), and at most ``batch`` chunks are held at once, whatever
/// the document's size.
struct DocumentBytes: Sendable {
    let chunks: any ChunkStore
    /// The largest plain chunk accepted (the server's frame limit).
    let maximumLength: Int
    var threadPool: NIOThreadPool = .singleton

    /// Chunks read from the store at once.
    var batch: Int { max(1, min(chunks.readBatch, 8)) }

    /// Writes bytes `range` of the file whose chunks are `references`.
    func write(_ references: Manifest.Chunks, range: Range<Int64>, to writer: inout any ResponseBodyWriter) async throws
    {
        guard !range.isEmpty else { return }
        // The chunks the range touches, with where each starts.
        var wanted: [(reference: Manifest.ChunkReference, start: Int64)] = []
        var offset: Int64 = 0
        for reference in references {
            let end = offset + Int64(reference.length)
            if end > range.lowerBound && offset < range.upperBound { wanted.append((reference, offset)) }
            if end >= range.upperBound { break }
            offset = end
        }
        let (maximumLength, threadPool, chunks) = (maximumLength, threadPool, chunks)
        let groups = stride(from: 0, to: wanted.count, by: batch).map {
            Array(wanted[$0..<min($0 + batch, wanted.count)])
        }
        /// Loads, decodes and checks one group, off the event loop.
        @Sendable func read(_ part: [(reference: Manifest.ChunkReference, start: Int64)]) async throws -> [[UInt8]] {
            let loaded = try await chunks.load(part.map(\.reference.id))
            return try await threadPool.runIfActive {
                try zip(part, loaded).map { want, chunk in
                    guard chunk.id == want.reference.id, chunk.length == want.reference.length,
                        chunk.encoding != .sealed
                    else {
                        throw XferError(.corruptChunk, "chunk \(want.reference.id) is not what the manifest names")
                    }
                    return try chunk.decoded(maximumLength: maximumLength)
                }
            }
        }
        // The next group is read while this one is written: two groups in memory at most.
        var next: Task<[[UInt8]], any Error>? = groups.first.map { first in Task { try await read(first) } }
        defer { next?.cancel() }
        for (index, part) in groups.enumerated() {
            let plain = try await next!.value
            next = index + 1 < groups.count ? Task { [part = groups[index + 1]] in try await read(part) } : nil
            var buffer = ByteBuffer()
            for (want, bytes) in zip(part, plain) {
                let low = Int(max(0, range.lowerBound - want.start))
                let high = Int(min(Int64(bytes.count), range.upperBound - want.start))
                if low < high { buffer.writeBytes(bytes[low..<high]) }
            }
            ServerMetrics.process.bytesOut.increment(by: Int64(buffer.readableBytes))
            try await writer.write(buffer)
        }
    }

    /// Writes a package as a POSIX tar stream (pax headers where ustar's fields are too
    /// small), every entry under `root/`.
    /// A version's entity tag: the first 128 bits of its manifest's digest (its number where it
    /// has none), and for one file inside a package, that file's entry index too. 128 bits keep
    /// two versions from ever sharing a tag and leave room in a WebDAV `If` header, where
    /// clients put a lock token and two entity tags in a line of 200 bytes (litmus does).
    static func etag(_ info: DocumentInfo, entry: Int? = nil) -> String {
        "\"\(info.manifestDigest.map { String($0.prefix(32)) } ?? String(info.version))\(entry.map { "-\($0)" } ?? "")\""
    }

    /// A file's bytes as a response: one `Range` honoured (206, or 416 past the end), `If-Range`
    /// against `etag`; a HEAD gets the same headers and no body.
    func fileResponse(_ references: Manifest.Chunks, size: Int64, etag: String, request: Request, headers: HTTPFields)
        -> Response
    {
        var headers = headers
        headers[.acceptRanges] = "bytes"
        headers[.eTag] = etag
        var range = ByteRange(header: request.headers[.range], size: size)
        if let condition = request.headers[.ifRange], condition != etag { range = .whole }
        let status: HTTPResponse.Status
        let span: Range<Int64>
        switch range {
        case .whole:
            (status, span) = (.ok, 0..<size)
        case .part(let part):
            (status, span) = (.partialContent, part)
            headers[.contentRange] = "bytes \(part.lowerBound)-\(part.upperBound - 1)/\(size)"
        case .unsatisfiable:
            headers[.contentRange] = "bytes */\(size)"
            return Response(status: .rangeNotSatisfiable, headers: headers)
        }
        headers[.contentLength] = String(span.count)
        if request.method == .head { return Response(status: status, headers: headers) }
        let bytes = self
        return Response(
            status: status, headers: headers,
            body: ResponseBody(contentLength: Int(span.count)) { writer in
                try await bytes.write(references, range: span, to: &writer)
                try await writer.finish(nil)
            })
    }

    func writeTar(_ manifest: Manifest, root: String, to writer: inout any ResponseBodyWriter) async throws {
        let entries = manifest.entries
        try await writer.write(
            ByteBuffer(
                bytes: TarHeader.entry(
                    path: root + "/", kind: .directory, mode: 0o755, size: 0,
                    mtime: Self.seconds(entries.isEmpty ? 0 : entries.mtimeNanoseconds(at: 0)))))
        for index in entries.indices {
            let kind = entries.kind(at: index)
            let size = kind == .file ? entries.size(at: index) : 0
            let path = root + "/" + entries.path(at: index) + (kind == .directory ? "/" : "")
            try await writer.write(
                ByteBuffer(
                    bytes: TarHeader.entry(
                        path: path, kind: kind, mode: entries.mode(at: index) & 0o777, size: size,
                        mtime: Self.seconds(entries.mtimeNanoseconds(at: index)),
                        linkTarget: entries.symlinkTarget(at: index))))
            guard size > 0 else { continue }
            try await write(entries.chunks(at: index), range: 0..<size, to: &writer)
            let padding = Int((512 - size % 512) % 512)
            if padding > 0 { try await writer.write(ByteBuffer(repeating: 0, count: padding)) }
        }
        try await writer.write(ByteBuffer(repeating: 0, count: 1024))
    }

    static func seconds(_ nanoseconds: Int64) -> Int64 { max(0, nanoseconds / 1_000_000_000) }
}

/// Tar headers (POSIX.1-2001 pax over ustar): a name, link or size that ustar cannot hold
/// goes in a pax extended header before the entry, as GNU tar and bsdtar read it.
enum TarHeader {
    /// The header block(s) of one entry.
    static func entry(path: String, kind: EntryKind, mode: UInt32, size: Int64, mtime: Int64, linkTarget: String? = nil)
        -> [UInt8]
    {
        var records: [(String, String)] = []
        let pathBytes = Array(path.utf8)
        let link = Array((linkTarget ?? "").utf8)
        if pathBytes.count > 100 || !pathBytes.allSatisfy({ $0 < 0x80 }) { records.append(("path", path)) }
        if link.count > 100 || !link.allSatisfy({ $0 < 0x80 }) { records.append(("linkpath", linkTarget ?? "")) }
        if size > 0o77777777777 { records.append(("size", String(size))) }
        var out: [UInt8] = []
        if !records.isEmpty {
            let body = records.flatMap { record(key: $0.0, value: $0.1) }
            out += block(
                name: Array("PaxHeader/entry".utf8), mode: 0o644, size: Int64(body.count), mtime: mtime,
                type: UInt8(ascii: "x"), link: [])
            out += body
            out += [UInt8](repeating: 0, count: (512 - body.count % 512) % 512)
        }
        let type: UInt8 =
            switch kind {
            case .file: UInt8(ascii: "0")
            case .directory: UInt8(ascii: "5")
            case .symlink: UInt8(ascii: "2")
            }
        // The ustar fields keep an ASCII stand-in when the pax record holds the real value.
        func fallback(_ bytes: [UInt8]) -> [UInt8] {
            Array(bytes.map { $0 < 0x80 ? $0 : UInt8(ascii: "_") }.prefix(100))
        }
        out += block(
            name: fallback(pathBytes), mode: mode, size: size > 0o77777777777 ? 0 : size, mtime: mtime, type: type,
            link: fallback(link))
        return out
    }

    /// One pax record: `LENGTH key=value\n`, LENGTH counting itself.
    static func record(key: String, value: String) -> [UInt8] {
        let body = " \(key)=\(value)\n".utf8.count
        var length = body + 1
        while String(length).utf8.count + body != length { length += 1 }
        return Array("\(length) \(key)=\(value)\n".utf8)
    }

    static func block(name: [UInt8], mode: UInt32, size: Int64, mtime: Int64, type: UInt8, link: [UInt8]) -> [UInt8] {
        var header = [UInt8](repeating: 0, count: 512)
        func put(_ bytes: [UInt8], at offset: Int, width: Int) {
            for (i, byte) in bytes.prefix(width).enumerated() { header[offset + i] = byte }
        }
        func octal(_ value: Int64, at offset: Int, width: Int) {
            let digits = String(value, radix: 8)
            put(
                Array((String(repeating: "0", count: max(0, width - 1 - digits.count)) + digits).utf8), at: offset,
                width: width - 1)
        }
        put(name, at: 0, width: 100)
        octal(Int64(mode), at: 100, width: 8)
        octal(0, at: 108, width: 8)
        octal(0, at: 116, width: 8)
        octal(size, at: 124, width: 12)
        octal(min(mtime, 0o77777777777), at: 136, width: 12)
        put(Array("        ".utf8), at: 148, width: 8)
        header[156] = type
        put(link, at: 157, width: 100)
        put(Array("ustar\u{0}00".utf8), at: 257, width: 8)
        let sum = header.reduce(0) { $0 + Int64($1) }
        let digits = String(sum, radix: 8)
        put(
            Array((String(repeating: "0", count: max(0, 6 - digits.count)) + digits).utf8) + [0, 0x20], at: 148,
            width: 8)
        return header
    }
}

/// One `Range` header of a GET, against a body of `size` bytes (RFC 9110 §14): a single
/// range is served; several, or a header that is not `bytes=`, get the whole body.
enum ByteRange {
    case whole
    case part(Range<Int64>)
    /// No byte of the range lies in the body: 416.
    case unsatisfiable

    init(header: String?, size: Int64) {
        guard let header, header.hasPrefix("bytes="), !header.contains(",") else {
            self = .whole
            return
        }
        let spec = header.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else {
            self = .whole
            return
        }
        let first = parts[0].isEmpty ? nil : Int64(parts[0])
        let last = parts[1].isEmpty ? nil : Int64(parts[1])
        if !parts[0].isEmpty && first == nil || !parts[1].isEmpty && last == nil {
            self = .whole
            return
        }
        switch (first, last) {
        case (nil, nil):
            self = .whole
        case (nil, let suffix?):
            guard suffix > 0, size > 0 else {
                self = .unsatisfiable
                return
            }
            self = .part(max(0, size - suffix)..<size)
        case (let start?, let end):
            guard start < size else {
                self = .unsatisfiable
                return
            }
            if let end, end < start {
                self = .whole
                return
            }
            // Clamped before adding one: `bytes=0-9223372036854775807` must not overflow.
            let last = min(end ?? size - 1, size - 1)
            self = .part(start..<(last + 1))
        }
    }
}
