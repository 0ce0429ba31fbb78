import Foundation
import XferCore

/// What every harness shares: the rule that a decoder returns a value or throws an
/// ``XferError`` (anything else stops the run), checks that stop it with a message (libFuzzer
/// saves the input as `crash-…`), and writing a harness's seed corpus.
public enum Fuzz {
    /// The input libFuzzer hands the harness, as an array.
    public static func bytes(_ data: UnsafePointer<UInt8>?, _ size: Int) -> [UInt8] {
        guard let data, size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: size))
    }

    /// Runs a decoder: its value, or the ``XferError`` it threw.
    /// - Parameters:
    ///   - what: The decoder, for the message if it throws anything else.
    ///   - body: The decoding.
    /// - Returns: `.success` or `.failure` with the error, which must say what is wrong.
    public static func outcome<T>(_ what: String, _ body: () throws -> T) -> Result<T, XferError> {
        do {
            return .success(try body())
        } catch let error as XferError {
            check(!error.message.isEmpty, "\(what) threw an XferError without a message")
            return .failure(error)
        } catch {
            fail("\(what) threw \(type(of: error)), not an XferError: \(error)")
        }
    }

    /// The value of a decoding that must succeed (a property's second half).
    public static func must<T>(_ what: String, _ body: () throws -> T) -> T {
        switch outcome(what, body) {
        case .success(let value): return value
        case .failure(let error): fail("\(what) failed: \(error)")
        }
    }

    /// Stops the run if `condition` is false.
    public static func check(_ condition: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
        if !condition { fail(message(), file: file, line: line) }
    }

    /// Stops the run: libFuzzer reports a deadly signal and saves the input.
    public static func fail(_ message: String, file: StaticString = #fileID, line: UInt = #line) -> Never {
        fatalError("property violated: \(message)", file: file, line: line)
    }

    /// A number from the input's bytes (FNV-1a): where to cut it, the same every run.
    public static func hash(_ bytes: [UInt8]) -> UInt64 {
        bytes.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 }
    }

    /// Called from `LLVMFuzzerInitialize`: with `XFER_FUZZ_WRITE_SEEDS=DIR` in the
    /// environment, writes the seeds (made by the real encoders) into DIR, one file each, and
    /// exits; otherwise does nothing and the fuzzing starts.
    public static func writeSeedsIfAsked(_ seeds: () throws -> [(name: String, bytes: [UInt8])]) {
        guard let directory = ProcessInfo.processInfo.environment["XFER_FUZZ_WRITE_SEEDS"] else { return }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let made = try seeds()
            for seed in made {
                try Data(seed.bytes).write(to: URL(fileURLWithPath: directory).appendingPathComponent(seed.name))
            }
            print("wrote \(made.count) seeds to \(directory)")
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("fuzz: could not write the seeds: \(error)\n".utf8))
            exit(1)
        }
    }
}
