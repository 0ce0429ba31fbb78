import Foundation
import Synchronization
import XferClient
import XferCore

/// A one-line progress display on standard error (bytes, rate, ETA), shown only when
/// standard error is a terminal and redrawn at most ten times a second.
final class ProgressLine: Sendable {
    private struct State {
        var done: Int64 = 0
        var lastDraw: ContinuousClock.Instant
        var drawn = false
    }

    private let total: Int64
    private let enabled: Bool
    private let start = ContinuousClock.now
    private let state: Mutex<State>

    init(totalBytes: Int64) {
        total = totalBytes
        enabled = isatty(STDERR_FILENO) == 1
        state = Mutex(State(lastDraw: start))
    }

    func advance(by bytes: Int64) { update { $0 += bytes } }

    /// Sets the bytes done so far (for callers that count themselves).
    func set(done: Int64) { update { $0 = done } }

    private func update(_ change: (inout Int64) -> Void) {
        guard enabled else { return }
        state.withLock { state in
            change(&state.done)
            let now = ContinuousClock.now
            guard now - state.lastDraw >= .milliseconds(100) else { return }
            state.lastDraw = now
            state.drawn = true
            draw(done: state.done, elapsed: (now - start).seconds)
        }
    }

    func finish() {
        guard enabled else { return }
        state.withLock { state in
            if state.drawn { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
        }
    }

    private func draw(done: Int64, elapsed: Double) {
        let rate = elapsed > 0 ? Double(done) / elapsed : 0
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 0
        let width = 24
        let filled = Int(fraction * Double(width))
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        var line = "\r[\(bar)] \(ByteCount(done)) / \(ByteCount(total))  \(ByteCount(Int64(rate)))/s"
        if rate > 0, total > done {
            line += "  ETA \(Int((Double(total - done) / rate).rounded(.up))) s"
        }
        FileHandle.standardError.write(Data((line + "\u{1B}[K").utf8))
    }
}

/// A progress line created on the first report of a transfer (when its total is known),
/// fed from any thread.
final class ProgressBar: Sendable {
    private let quiet: Bool
    private let line = Mutex<ProgressLine?>(nil)

    init(quiet: Bool) { self.quiet = quiet }

    /// Records progress; draws at most ten times a second, on a terminal only.
    @Sendable func update(_ progress: TransferProgress) {
        guard !quiet else { return }
        let current = line.withLock { line in
            if line == nil { line = ProgressLine(totalBytes: progress.bytesTotal) }
            return line!
        }
        current.set(done: progress.bytesDone)
    }

    /// Clears the line (idempotent).
    func finish() {
        line.withLock { line in
            line?.finish()
            line = nil
        }
    }
}
