import Foundation

/// Waits for SIGINT or SIGTERM.
final class SignalStop: Sendable {
    private let stream: AsyncStream<Void>

    init() {
        let (stream, continuation) = AsyncStream<Void>.makeStream()
        self.stream = stream
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber)
            source.setEventHandler { continuation.yield(()) }
            source.resume()
            SignalStop.sources.append(source)  // kept alive for the process's life; set up once, from the main task
        }
    }

    func wait() async {
        for await _ in stream { return }
    }

    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
}
