import NIOCore
import NIOHTTPTypes
import Synchronization

/// Whether the client of a connection is still there: gone once it has closed its side of the
/// connection (its input ended) or the connection has closed. A response that waits long (an
/// event stream, a long poll) stops waiting then, so the slot it holds among the account's
/// polls (``PollCounter``) is given back at once, not at a later write that fails.
///
/// A client that only half-closes (shuts down its sending side and still reads) gets what a
/// wait that ended early gives: the long poll's answer as it stands, or the end of the stream;
/// it asks again, as after any wait.
final class ClientPresence: Sendable {
    private struct State {
        var gone = false
        var nextID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    }

    private let state = Mutex(State())

    /// Whether the client has gone.
    var isGone: Bool { state.withLock { $0.gone } }

    /// The client has gone: every wait on it ends, and none starts again.
    func leave() {
        let woken = state.withLock { state in
            state.gone = true
            let all = Array(state.waiters.values)
            state.waiters = [:]
            return all
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns once the client has gone (at once if it has), or when the task is cancelled.
    func untilGone() async {
        let id = state.withLock { state in
            state.nextID &+= 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Cancellation sets the flag before its handler runs, and the handler takes this
                // lock: either it finds the continuation, or this sees the flag.
                let resumeNow = self.state.withLock { state in
                    guard !state.gone, !Task.isCancelled else { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            self.state.withLock { $0.waiters.removeValue(forKey: id) }?.resume()
        }
    }

    /// Runs `body` until it returns or the client of `presence` goes, whichever comes first
    /// (then the other is cancelled). With no `presence` (a connection without
    /// ``ClientPresenceHandler``), `body` runs to its end.
    /// - Returns: Whether the client is still there.
    static func run(until presence: ClientPresence?, _ body: @escaping @Sendable () async -> Void) async -> Bool {
        guard let presence else {
            await body()
            return true
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await body() }
            group.addTask { await presence.untilGone() }
            await group.next()
            group.cancelAll()
        }
        return !presence.isGone
    }
}

/// Tells a connection's ``ClientPresence`` when its client goes: the input ended (the server
/// allows half-closed connections, so a client's close first arrives as that) or the
/// connection closed. Passes everything on unchanged; a route finds it through
/// ``XferRequestContext/presence()``.
final class ClientPresenceHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    let presence = ClientPresence()

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed { presence.leave() }
        context.fireUserInboundEventTriggered(event)
    }

    func channelInactive(context: ChannelHandlerContext) {
        presence.leave()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        presence.leave()
    }
}
