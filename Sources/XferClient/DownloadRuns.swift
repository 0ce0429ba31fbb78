import XferCore

/// One download request's writes, gathered into runs: downloaded chunks that each go to one
/// place, one right after another in the same file, are written together by one `pwritev` of
/// up to ``runBytes``. A 1 GiB restore then makes about a thousand writes instead of fourteen
/// thousand, and the requests in flight, which write the same file, meet on its lock a
/// sixteenth as often. A chunk that goes to several places is written at once, to each.
///
/// Nothing is counted done before it is written: `written` runs for each chunk after its run is.
struct DownloadRuns {
    /// The most bytes a run holds before it is written.
    static let runBytes = 1 << 20
    /// The most chunks in one run (well under `IOV_MAX`).
    static let runChunks = 64

    /// A chunk held in the run: its plain bytes and what `written` is told of it.
    private struct Held {
        var plain: [UInt8]
        var payloadBytes: Int
    }

    let files: StagingFiles
    /// Told, per chunk and in order, its plain length, its payload's length on the wire and
    /// how many places it was written to.
    let written: (_ plainBytes: Int, _ payloadBytes: Int, _ targets: Int) -> Void
    private var file = 0
    private var start: Int64 = 0
    private var end: Int64 = 0
    private var held: [Held] = []
    private var bytes = 0

    init(files: StagingFiles, written: @escaping (Int, Int, Int) -> Void) {
        self.files = files
        self.written = written
    }

    /// Adds a verified chunk: to the run when it continues it, else after writing the run.
    mutating func add(_ plain: [UInt8], payloadBytes: Int, to download: ChunkSourcing.Download) throws {
        guard download.more.isEmpty else {
            try flush()
            try Self.write(plain, to: download.targets, files: files)
            written(plain.count, payloadBytes, download.targets.count)
            return
        }
        let target = download.first
        if held.isEmpty || target.file != file || target.offset != end {
            try flush()
            (file, start, end) = (target.file, target.offset, target.offset)
        }
        held.append(Held(plain: plain, payloadBytes: payloadBytes))
        end += Int64(plain.count)
        bytes += plain.count
        if bytes >= Self.runBytes || held.count >= Self.runChunks { try flush() }
    }

    /// Writes the run held, if any, and tells `written` of each of its chunks.
    mutating func flush() throws {
        guard !held.isEmpty else { return }
        let run = held
        held.removeAll(keepingCapacity: true)
        bytes = 0
        try files.with(file) { fd in
            try RawBuffers.with(run.map(\.plain)) { pieces in
                try Syscall.pwrite(
                    fd, pieces, at: start, path: files.path(file),
                    whenFull: "free some disk space and retry (what arrived is kept)")
            }
        }
        for chunk in run {
            try files.wrote(file, bytes: chunk.plain.count)
            written(chunk.plain.count, chunk.payloadBytes, 1)
        }
    }

    /// Writes `plain` to every one of `targets`.
    private static func write(_ plain: [UInt8], to targets: [PullEngine.Target], files: StagingFiles) throws {
        for target in targets {
            try files.with(target.file) { fd in
                try PullEngine.write(
                    plain, count: plain.count, to: fd, at: target.offset, path: files.path(target.file))
            }
            try files.wrote(target.file, bytes: plain.count)
        }
    }
}
