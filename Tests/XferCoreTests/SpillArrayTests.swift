import Foundation
import Testing

@testable import XferCore

/// Arrays that move to a mapped file once large: the same values as an array's through every
/// change, copies independent, and the pages given back without losing a byte.
@Suite(.serialized) struct SpillArrayTests {
    /// Elements past the threshold.
    static let many = Spill.threshold / MemoryLayout<UInt64>.stride * 3 + 17

    @Test func staysInMemoryBelowTheThresholdAndMovesToAFileAbove() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        Spill.use(directory: directory.path)
        var values = SpillArray<UInt64>()
        var expected: [UInt64] = []
        for n in 0..<Self.many {
            let value = UInt64(n) &* 0x9E37_79B9_7F4A_7C15
            values.append(value)
            expected.append(value)
            if n == 1000 { #expect(!values.isSpilled) }
        }
        #expect(values.isSpilled)
        #expect(Array(values) == expected)
        // Set, remove, and append a run.
        for n in stride(from: 0, to: Self.many, by: 997) {
            values[n] = UInt64(n)
            expected[n] = UInt64(n)
        }
        values.removeLast(5)
        expected.removeLast(5)
        values.append(contentsOf: expected[0..<300_000])
        expected.append(contentsOf: expected[0..<300_000])
        #expect(values.count == expected.count)
        #expect(Array(values) == expected)
        #expect(values.withUnsafeBufferPointer { Array($0) } == expected)
        // No file is left in the directory: it is unnamed.
        #expect((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) == [])
    }

    @Test func aCopyIsIndependentOfTheOriginal() {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        Spill.use(directory: directory.path)
        var original = SpillArray<UInt64>((0..<UInt64(Self.many)).lazy.map { $0 })
        let before = Array(original)
        var copy = original
        copy[0] = 99
        copy.append(7)
        #expect(Array(original) == before)
        #expect(copy.count == before.count + 1 && copy[0] == 99 && copy.last == 7)
        original.removeLast(1)
        #expect(copy.count == before.count + 1)
        #expect(copy != original)
        var equal = SpillArray<UInt64>()
        equal.append(contentsOf: original)
        #expect(equal == original && equal.hashValue == original.hashValue)
    }

    @Test func givingBackItsPagesKeepsEveryByte() throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        Spill.use(directory: directory.path)
        var values = SpillArray<UInt64>((0..<UInt64(Self.many)).lazy.map { $0 &* 31 })
        #expect(values.isSpilled)
        let address = UInt(bitPattern: values.storage.base)
        // Touched, its pages are resident (the timed passes held meanwhile).
        try SpillPager.holdingPasses { () throws -> Void in
            #expect(values.reduce(0, &+) != 0)
            #expect(try Self.residentKiB(of: address) > 1024)
        }
        SpillPager.releaseAll()
        #expect(try Self.residentKiB(of: address) < 64)
        // Written before the release, read after it; written after, read again.
        #expect(values[Self.many - 1] == UInt64(Self.many - 1) &* 31)
        values[5] = 12345
        SpillPager.releaseAll()
        #expect(values[5] == 12345)
        #expect(values.elementsEqual((0..<UInt64(Self.many)).lazy.map { $0 == 5 ? 12345 : $0 &* 31 }))
    }

    @Test func withoutADirectoryOrOnOneKeptInMemoryItStaysInMemory() {
        Spill.use(directory: nil)
        let inMemory = SpillArray<UInt64>((0..<UInt64(Self.many)).lazy.map { $0 })
        #expect(!inMemory.isSpilled && inMemory.last == UInt64(Self.many - 1))
        if FileManager.default.fileExists(atPath: "/dev/shm") {
            Spill.use(directory: "/dev/shm")
            let onTmpfs = SpillArray<UInt64>((0..<UInt64(Self.many)).lazy.map { $0 })
            #expect(!onTmpfs.isSpilled && onTmpfs.count == Self.many)
        }
        Spill.use(directory: "/nonexistent/xfer")
        let nowhere = SpillArray<UInt64>((0..<UInt64(Self.many)).lazy.map { $0 })
        #expect(!nowhere.isSpilled && nowhere.count == Self.many)
        Spill.use(directory: FileManager.default.temporaryDirectory.path)
    }

    /// The resident KiB of the mapping that starts at `address` (/proc/self/smaps).
    static func residentKiB(of address: UInt) throws -> Int {
        // (Read to its end: /proc files report no size.)
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/smaps"))
        defer { try? handle.close() }
        let text = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        var inMapping = false
        for line in text.split(separator: "\n") {
            if let dash = line.firstIndex(of: "-"), let start = UInt(line[..<dash], radix: 16), line.contains(" ") {
                inMapping = start == address
            } else if inMapping, line.hasPrefix("Rss:") {
                return Int(line.split(separator: " ")[1]) ?? -1
            }
        }
        throw CocoaError(.fileReadNoSuchFile)
    }
}
