import HummingbirdCore
import NIOCore
import NIOHTTPTypes

/// The minimum-rate rule for request bodies: a request whose body brings fewer than
/// `minimumBytes` in `window` of waiting on the client is closed (a stalled or trickled upload).
///
/// Only time the server spends waiting on the client counts: while a body is being read and a
/// read is outstanding. Time the server itself holds off reading (storing the last batch) is not
/// the client's fault; responses (long polls, downloads) are never timed.
struct BodyRate {
    /// What to do after a tick.
    enum Action: Equatable {
        /// Keep going.
        case none
        /// Close the connection: the client is too slow.
        case close
    }

    let minimumBytes: Int
    let window: Duration

    private(set) var readingBody = false
    private var bytes = 0
    private var waited = Duration.zero
    private var waitingSince: ContinuousClock.Instant?

    init(minimumBytes: Int, window: Duration) {
        self.minimumBytes = minimumBytes
        self.window = window
    }

    /// The server asked the client for more bytes.
    mutating func readRequested(at now: ContinuousClock.Instant) {
        if waitingSince == nil { waitingSince = now }
    }

    /// Bytes arrived (a read is no longer outstanding).
    mutating func readCompleted(at now: ContinuousClock.Instant) {
        if let since = waitingSince { waited += now - since }
        waitingSince = nil
    }

    /// A request's head: its body (if any) starts.
    mutating func head(at now: ContinuousClock.Instant) {
        readingBody = true
        bytes = 0
        waited = .zero
        if waitingSince != nil { waitingSince = now }
    }

    /// Some of the body.
    mutating func body(_ count: Int) {
        bytes += count
    }

    /// The request's end: nothing to time until the next head.
    mutating func end() {
        readingBody = false
    }

    /// Checks the rate: once the client has been waited on for a whole window, it must have
    /// sent `minimumBytes` in it.
    mutating func tick(at now: ContinuousClock.Instant) -> Action {
        guard readingBody else { return .none }
        var total = waited
        if let since = waitingSince {
            total += now - since
            waitingSince = now
        }
        waited = total
        guard total >= window else { return .none }
        if bytes < minimumBytes { return .close }
        bytes = 0
        waited = .zero
        return .none
    }
}

/// Applies ``BodyRate`` to a connection: times reads while a request body is being received
/// and closes the connection when the client falls below the rate.
final class BodyRateHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private var rate: BodyRate
    private var timer: Scheduled<Void>?

    init(minimumBytes: Int, window: Duration) {
        rate = BodyRate(minimumBytes: minimumBytes, window: window)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            rate.head(at: .now)
            schedule(context)
        case .body(let buffer):
            rate.body(buffer.readableBytes)
        case .end:
            rate.end()
            cancel()
        }
        context.fireChannelRead(data)
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        rate.readCompleted(at: .now)
        context.fireChannelReadComplete()
    }

    func read(context: ChannelHandlerContext) {
        rate.readRequested(at: .now)
        context.read()
    }

    func channelInactive(context: ChannelHandlerContext) {
        cancel()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        cancel()
    }

    /// Ticks four times a window while a body is being read.
    private func schedule(_ context: ChannelHandlerContext) {
        guard timer == nil else { return }
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(rate.window / 4)) { [self] in
            timer = nil
            switch rate.tick(at: .now) {
            case .close:
                context.close(promise: nil)
            case .none:
                if rate.readingBody { schedule(context) }
            }
        }
    }

    private func cancel() {
        timer?.cancel()
        timer = nil
    }
}
