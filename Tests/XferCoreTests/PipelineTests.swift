import Dispatch
import Synchronization
import Testing

@testable import XferCore

@Suite struct PipelineTests {
    static let files: [(String, [UInt8])] =
        [
            ("random", TestData.random(count: 300_000, seed: 31)),
            ("empty", []),
            ("tiny", [1, 2, 3]),
            ("text", TestData.text(count: 200_000, seed: 32)),
            ("records", TestData.records(count: 150_000, seed: 33))
        ] + (0..<40).map { ("small\($0)", TestData.text(count: 500 + $0 * 37, seed: UInt64(100 + $0))) }

    static var inputs: [ChunkInput] { files.map { .bytes(name: $0.0, $0.1) } }

    func options(
        parallel: Bool = true, bufferSize: Int = 64 << 10, readSize: Int = 8 << 10,
        inFlight: Int = 128 << 10, batch: Int = 16 << 10, compress: Bool = false
    ) -> ChunkPipeline.Options {
        var options = ChunkPipeline.Options()
        options.chunker = smallChunks
        options.parallel = parallel
        options.bufferSize = bufferSize
        options.readSize = readSize
        options.maximumBytesInFlight = inFlight
        options.batchSize = batch
        options.compression = compress ? .default : nil
        return options
    }

    /// Records computed without the pipeline: whole-buffer chunking, then hashing in order.
    func expectedRecords(_ data: [UInt8]) -> [ChunkRecord] {
        let lengths = data.withUnsafeBytes { Chunker.chunkLengths(of: $0, configuration: smallChunks) }
        var offset = 0
        return lengths.map { length in
            defer { offset += length }
            return ChunkRecord(offset: Int64(offset), length: length, id: ChunkID.of(data[offset..<(offset + length)]))
        }
    }

    @Test func serialAndParallelGiveTheSameRecordsAsDirectChunking() throws {
        let expected = Self.files.map { expectedRecords($0.1) }
        let serial = try ChunkPipeline(options: options(parallel: false)).records(for: Self.inputs)
        let parallel = try ChunkPipeline(options: options(parallel: true)).records(for: Self.inputs)
        #expect(serial == expected)
        #expect(parallel == expected)
    }

    /// However many workers hash, whether the reader helps (hash only) or not (compressing),
    /// and from a Dispatch thread (as a push runs it): the same records, in order.
    @Test(arguments: [1, 2, 5], [false, true])
    func anyNumberOfWorkersGivesTheSameRecords(workers: Int, compress: Bool) throws {
        let expected = Self.files.map { expectedRecords($0.1) }
        var options = options(compress: compress)
        options.workers = workers
        let records = Mutex<Result<[[ChunkRecord]], any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async { [options] in
            records.withLock { $0 = Result { try ChunkPipeline(options: options).records(for: Self.inputs) } }
            done.signal()
        }
        done.wait()
        let got = try #require(records.withLock { $0 }).get()
        #expect(got.map { $0.map { ChunkRecord(offset: $0.offset, length: $0.length, id: $0.id) } } == expected)
        if compress { #expect(got.allSatisfy { $0.allSatisfy { $0.encoded != nil } }) }
    }

    /// Under a container key (end-to-end encryption) the pipeline cuts with the key's Gear
    /// table and names chunks by their keyed ids, however it is run.
    @Test func aKeyedPipelineCutsAndNamesAsTheKeyedChunkerDoes() throws {
        let chunks = EndToEndChunks(key: ContainerKey.generate())
        let expected = Self.files.map { (_, data) -> [ChunkRecord] in
            let lengths = data.withUnsafeBytes {
                Chunker.chunkLengths(of: $0, configuration: smallChunks, gear: chunks.keying.gear)
            }
            var offset = 0
            return lengths.map { length in
                defer { offset += length }
                let id = EndToEndChunks.id(keyed: chunks.keying.id(of: Array(data[offset..<(offset + length)])).bytes)
                return ChunkRecord(offset: Int64(offset), length: length, id: id)
            }
        }
        #expect(expected != Self.files.map { expectedRecords($0.1) })
        for parallel in [false, true] {
            var keyed = options(parallel: parallel, readSize: 7_000)
            keyed.codec = ChunkCodec(chunks)
            #expect(try ChunkPipeline(options: keyed).records(for: Self.inputs) == expected)
        }
        // Compressed in the pipeline, a chunk is sealed, and opens to its bytes.
        var sealing = options(parallel: true)
        sealing.codec = ChunkCodec(chunks)
        sealing.compression = .default
        let (name, data) = Self.files[3]
        let records = try ChunkPipeline(options: sealing).records(for: [.bytes(name: name, data)])[0]
        #expect(records.count > 1)
        for record in records {
            let encoded = try #require(record.encoded)
            #expect(encoded.encoding == .sealed && encoded.id == record.id)
            #expect(try chunks.open(encoded) == Array(data[Int(record.offset)..<(Int(record.offset) + record.length)]))
        }
    }

    @Test(arguments: [(1, 4096), (7, 9000), (4096, 20000), (65536, 1 << 20)])
    func readAndBufferSizesDoNotChangeRecords(readSize: Int, bufferSize: Int) throws {
        let expected = Self.files.map { expectedRecords($0.1) }
        let records = try ChunkPipeline(options: options(bufferSize: bufferSize, readSize: readSize)).records(
            for: Self.inputs)
        #expect(records == expected)
    }

    @Test func eventsComeInInputOrder() throws {
        let events = try ChunkPipeline(options: options()).events(for: Self.inputs)
        var expectedFile = 0
        var open = false
        var offset: Int64 = 0
        for event in events {
            switch event {
            case .fileStarted(let file, let name, let size):
                #expect(!open && file == expectedFile && name == Self.files[file].0)
                #expect(size == Int64(Self.files[file].1.count))
                open = true
                offset = 0
            case .chunk(let file, let record):
                #expect(open && file == expectedFile && record.offset == offset)
                offset += Int64(record.length)
            case .fileFinished(let file, let bytes, _, _):
                #expect(open && file == expectedFile && bytes == offset && bytes == Int64(Self.files[file].1.count))
                open = false
                expectedFile += 1
            }
        }
        #expect(expectedFile == Self.files.count)
    }

    /// A file read to its end is stamped then, from the descriptor read: a file nobody wrote
    /// to has its stamp from before the read; one written to while it was read does not.
    @Test func aFileIsStampedOnceItsEndIsRead() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        dir.write("quiet", TestData.random(count: 100_000, seed: 41))
        dir.write("growing", TestData.random(count: 24 << 20, seed: 42))
        let before = try [#require(FileStamp.of(dir.path + "/quiet")), #require(FileStamp.of(dir.path + "/growing"))]
        let appended = Locked(false)
        var finished: [Int: FileStamp?] = [:]
        let events = Locked<[ChunkEvent]>([])
        // Delivery of the second file's first chunk holds back the reader (two 4 MiB buffers in
        // flight), so it is still reading the 24 MiB when another program appends to it.
        try ChunkPipeline(options: ChunkPipeline.Options()).run([
            .file(dir.path + "/quiet"), .file(dir.path + "/growing")
        ]) { event in
            events.withLock { $0.append(event) }
            if case .chunk(1, _) = event,
                appended.withLock({
                    let first = !$0
                    $0 = true
                    return first
                })
            {
                let fd = open(dir.path + "/growing", O_WRONLY | O_APPEND)
                _ = write(fd, "appended", 8)
                close(fd)
            }
        }
        for case .fileFinished(let file, _, _, let stamp) in events.value { finished[file] = stamp }
        #expect(finished[0] == before[0])
        let grown = try #require(finished[1] ?? nil)
        #expect(grown != before[1] && grown.size == before[1].size + 8)
        // Bytes in memory have no stamp.
        let memory = try ChunkPipeline(options: options()).events(for: [.bytes(name: "m", [1, 2, 3])])
        #expect(
            memory.contains {
                if case .fileFinished(0, 3, 1, nil) = $0 { return true }
                return false
            })
    }

    @Test func compressedPayloadsDecodeToTheChunkBytes() throws {
        let records = try ChunkPipeline(options: options(compress: true)).records(for: Self.inputs)
        for (file, fileRecords) in records.enumerated() {
            let data = Self.files[file].1
            for record in fileRecords {
                let encoded = try #require(record.encoded)
                let plain = try encoded.decoded()
                #expect(plain[...] == data[Int(record.offset)..<(Int(record.offset) + record.length)])
            }
        }
    }

    @Test func aSlowConsumerHoldsMemoryAtTheBound() throws {
        // Two 64 KiB buffers in flight at most; a consumer that sleeps must not deadlock the reader.
        let big = TestData.random(count: 2 << 20, seed: 40)
        let records = try ChunkPipeline(options: options(bufferSize: 64 << 10, inFlight: 1)).records(for: [
            .bytes(name: "big", big)
        ])
        #expect(records[0] == expectedRecords(big))
        let delivered = Counter()
        let collected = Locked<[ChunkRecord]>([])
        try ChunkPipeline(options: options(bufferSize: 64 << 10, inFlight: 1)).run([.bytes(name: "big", big)]) {
            event in
            guard case .chunk(_, let record) = event else { return }
            if delivered.value < 50 { usleep(2000) }
            delivered.increment()
            collected.withLock { $0.append(record) }
        }
        #expect(collected.value == expectedRecords(big))
    }

    @Test func aMissingFileFailsWithItsName() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        dir.write("a", [1, 2, 3])
        #expect {
            try ChunkPipeline().run([.file(dir.path + "/a"), .file(dir.path + "/missing")]) { _ in }
        } throws: { error in
            guard let error = error as? XferError else { return false }
            return error.code == .notFound && error.message.contains("missing")
        }
    }

    @Test func aThrowingConsumerStopsThePipeline() throws {
        struct Stop: Error {}
        let big = TestData.random(count: 4 << 20, seed: 41)
        let seen = Counter()
        #expect(throws: Stop.self) {
            try ChunkPipeline(options: options()).run([.bytes(name: "big", big)]) { event in
                if case .chunk = event {
                    seen.increment()
                    throw Stop()
                }
            }
        }
        #expect(seen.value == 1)  // nothing is delivered after the consumer threw
    }

    /// A consumer that throws partway, with several workers finishing batches out of order and
    /// two small arenas: the run ends with its error (batches skipped after it still fill their
    /// numbers, so no arena is held for ever), whether chunks are hashed or compressed.
    @Test(arguments: [1, 2, 5], [false, true])
    func aConsumerThrowingLateStopsAnyNumberOfWorkers(workers: Int, compress: Bool) throws {
        struct Stop: Error {}
        let big = TestData.random(count: 8 << 20, seed: 42)
        for stopAt in [3, 40, 150] {
            var options = options(compress: compress)
            options.workers = workers
            let seen = Counter()
            #expect(throws: Stop.self) {
                try ChunkPipeline(options: options).run([.bytes(name: "big", big)]) { event in
                    guard case .chunk = event else { return }
                    seen.increment()
                    if seen.value == stopAt { throw Stop() }
                }
            }
            #expect(seen.value == stopAt)
        }
    }

    @Test func filesOnDiskMatchInMemory() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        for (name, data) in Self.files.prefix(5) { dir.write(name, data) }
        let onDisk = try ChunkPipeline(options: options()).records(
            for: Self.files.prefix(5).map { .file(dir.path + "/" + $0.0) })
        #expect(onDisk == Self.files.prefix(5).map { expectedRecords($0.1) })
    }
}

final class Counter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

#if canImport(Glibc)
    import Glibc
#endif
