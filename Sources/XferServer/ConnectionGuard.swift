import HummingbirdCore
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Counts open connections, in all and per client address, and refuses those over the caps
/// (``ServerLimits/maximumConnections``, ``ServerLimits/maximumConnectionsPerAddress``).
///
/// One instance is shared by every connection of a server; ``ConnectionGuardHandler`` asks it
/// when a connection opens and tells it when one closes. The decisions are pure and need no I/O.
public final class ConnectionGuard: Sendable {
    private struct State {
        var total = 0
        var perAddress: [String: Int] = [:]
    }

    /// Connections in all.
    public let maximumConnections: Int
    /// Connections from one address.
    public let maximumPerAddress: Int
    private let state = Mutex(State())

    /// A guard with these caps.
    /// - Parameters:
    ///   - maximumConnections: Open connections in all.
    ///   - maximumPerAddress: Open connections from one client address.
    public init(maximumConnections: Int, maximumPerAddress: Int) {
        self.maximumConnections = maximumConnections
        self.maximumPerAddress = maximumPerAddress
    }

    /// Counts a new connection from `address` if both caps allow it.
    /// - Parameter address: The client's IP address (`nil`: unknown, counted only in the total).
    /// - Returns: Whether it was admitted; an admitted connection must be ``release(_:)``d once.
    public func admit(_ address: String?) -> Bool {
        state.withLock { state in
            guard state.total < maximumConnections else { return false }
            if let address {
                guard state.perAddress[address, default: 0] < maximumPerAddress else { return false }
                state.perAddress[address, default: 0] += 1
            }
            state.total += 1
            return true
        }
    }

    /// Uncounts an admitted connection.
    /// - Parameter address: The address it was admitted with.
    public func release(_ address: String?) {
        state.withLock { state in
            state.total -= 1
            if let address {
                let left = state.perAddress[address, default: 1] - 1
                state.perAddress[address] = left > 0 ? left : nil
            }
        }
    }

    /// Open connections: in all, and from `address`.
    public func count(from address: String? = nil) -> (total: Int, fromAddress: Int) {
        state.withLock { state in (state.total, address.map { state.perAddress[$0, default: 0] } ?? 0) }
    }

    /// The connection cap for a descriptor limit: the limit less a reserve for the stores'
    /// files and sockets (an eighth of it, at least 64).
    /// - Parameter descriptorLimit: `RLIMIT_NOFILE`'s soft limit.
    /// - Returns: At least 16.
    public static func connectionCap(descriptorLimit: Int) -> Int {
        max(16, descriptorLimit - max(64, descriptorLimit / 8))
    }
}

/// The first handler of every connection's HTTP pipeline: admits the connection through the
/// server's ``ConnectionGuard`` when it opens, closing it at once when a cap is reached, and
/// releases it when it closes.
final class ConnectionGuardHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart

    private let connections: ConnectionGuard
    /// Set once admitted; released exactly once, when the channel goes inactive or the handler is removed.
    private var admitted: (address: String?, counted: Bool) = (nil, false)
    private var decided = false

    init(_ connections: ConnectionGuard) {
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { decide(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        decide(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        // A refused connection's bytes are not handed on (it is closing).
        guard admitted.counted else { return }
        context.fireChannelRead(data)
    }

    private func decide(_ context: ChannelHandlerContext) {
        guard !decided else { return }
        decided = true
        let address = context.channel.remoteAddress?.ipAddress
        if connections.admit(address) {
            admitted = (address, true)
        } else {
            // On the next tick: the pipeline may still be being set up.
            let channel = context.channel
            context.eventLoop.execute { channel.close(promise: nil) }
        }
    }

    private func release() {
        guard admitted.counted else { return }
        admitted.counted = false
        connections.release(admitted.address)
    }
}
