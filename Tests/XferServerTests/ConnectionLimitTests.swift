import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Testing

@testable import XferServer

/// A live server on a loopback port over a fresh data directory with one account.
func withLiveServer(
    _ limits: ServerLimits, _ body: @escaping @Sendable (_ port: Int, _ token: String) async throws -> Void
) async throws {
    let fixture = try await RouteFixture.make()
    defer { fixture.remove() }
    var logger = Logger(label: "xfer.test")
    logger.logLevel = .critical
    let app = try XferServer.application(data: fixture.data, host: "127.0.0.1", port: 0, limits: limits, logger: logger)
    let token = fixture.token
    try await app.test(.live) { client in try await body(client.port!, token) }
}

/// The transport rules against a live server with short timeouts: half-sent headers, idle
/// sockets, stalled bodies and too many connections are closed; long polls are not.
/// Every read gives up after 15 s, so a rule that does not fire fails instead of hanging.
@Suite(.serialized, .timeLimit(.minutes(2))) struct ConnectionLimitTests {
    static func shortTimeouts() -> ServerLimits {
        var limits = ServerLimits()
        limits.idleTimeout = .seconds(1)
        return limits
    }

    @Test func aHalfSentHeaderIsClosed() async throws {
        try await withLiveServer(Self.shortTimeouts()) { port, _ in
            let closed = try await blocking {
                let socket = try RawConnection(port: port)
                socket.send("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
                return socket.readToEnd().closed
            }
            #expect(closed, "the server closed the connection before the read timeout")
        }
    }

    @Test func anIdleKeepAliveSocketIsClosed() async throws {
        try await withLiveServer(Self.shortTimeouts()) { port, _ in
            let (answer, closed) = try await blocking {
                let socket = try RawConnection(port: port)
                socket.send("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                let answer = socket.read(until: "\"ok\"")
                return (answer, socket.readToEnd().closed)
            }
            #expect(answer.hasPrefix("HTTP/1.1 200"))
            #expect(closed)
        }
    }

    @Test func aSilentSocketIsClosed() async throws {
        try await withLiveServer(Self.shortTimeouts()) { port, _ in
            let closed = try await blocking { try RawConnection(port: port).readToEnd().closed }
            #expect(closed)
        }
    }

    @Test func aStalledRequestBodyIsClosed() async throws {
        var limits = ServerLimits()
        limits.minimumBodyBytes = 1000
        limits.bodyRateWindow = .seconds(1)
        try await withLiveServer(limits) { port, token in
            let closed = try await blocking {
                let socket = try RawConnection(port: port)
                socket.send(
                    "POST /v1/chunks/missing HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n"
                        + "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"ids\":[")
                // A trickle: a byte now and then, never the rate.
                for _ in 0..<4 {
                    usleep(200_000)
                    socket.send("\"")
                }
                return socket.readToEnd().closed
            }
            #expect(closed, "the default idle timeout is 30 s: the rate rule closed it")
        }
    }

    @Test func aLongPollOutlivesTheIdleTimeout() async throws {
        try await withLiveServer(Self.shortTimeouts()) { port, token in
            let answer = try await blocking {
                let socket = try RawConnection(port: port)
                socket.send(
                    "GET /v1/containers/default/changes?after=0&wait=3 HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(token)\r\n\r\n"
                )
                return socket.read(until: "\"cursor\"")
            }
            #expect(
                answer.hasPrefix("HTTP/1.1 200"),
                "the server was silent for 3 s while the poll waited, and kept it: \(answer)")
        }
    }

    @Test func connectionsOverThePerAddressCapAreClosed() async throws {
        var limits = ServerLimits()
        limits.maximumConnectionsPerAddress = 8
        try await withLiveServer(limits) { port, _ in
            // Twelve connections from one address, each held open after asking: at most eight
            // are answered, the rest closed without an answer. (At most, not exactly: a client
            // of another test retrying a port this server now has would count too.)
            let (answered, refusedClosed, servedAgain) = try await blocking { () -> (Int, Bool, Bool) in
                var held: [RawConnection] = []
                var answered = 0
                var refusedClosed = true
                for _ in 0..<12 {
                    let socket = try RawConnection(port: port)
                    socket.send("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    let reply = socket.read(until: "\"ok\"")
                    if reply.hasPrefix("HTTP/1.1 200") {
                        answered += 1
                        held.append(socket)
                    } else {
                        let rest = socket.readToEnd()
                        refusedClosed = refusedClosed && rest.closed && !rest.text.contains("200")
                    }
                }
                // Once they are gone, a new connection is served again.
                for socket in held { socket.shut() }
                var served = false
                for _ in 0..<100 where !served {
                    let fresh = try RawConnection(port: port)
                    fresh.send("GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    served = fresh.read(until: "\"ok\"").hasPrefix("HTTP/1.1 200")
                    if !served { usleep(20_000) }
                }
                return (answered, refusedClosed, served)
            }
            #expect((1...8).contains(answered), "\(answered) of 12 connections were served")
            #expect(refusedClosed, "those over the cap were closed without an answer")
            #expect(servedAgain)
        }
    }

    @Test func theGuardCountsPerAddressAndInAll() {
        let connections = ConnectionGuard(maximumConnections: 3, maximumPerAddress: 2)
        #expect(connections.admit("10.0.0.1") && connections.admit("10.0.0.1"))
        #expect(!connections.admit("10.0.0.1"), "a third from one address")
        #expect(connections.admit("10.0.0.2"))
        #expect(!connections.admit("10.0.0.3"), "a fourth in all")
        connections.release("10.0.0.1")
        #expect(connections.count(from: "10.0.0.1") == (2, 1))
        #expect(connections.admit("10.0.0.3"))
        #expect(ConnectionGuard.connectionCap(descriptorLimit: 1024) == 896)
        #expect(ConnectionGuard.connectionCap(descriptorLimit: 100) == 36)
    }

    @Test(arguments: [(3, 0), (3, 3), (100, 0)])
    func theBodyRateRuleCountsOnlyTimeSpentWaitingOnTheClient(bytes: Int, busyTicks: Int) {
        // A body that brings 3 bytes per window while the server waits on it is too slow; the
        // same body while the server itself is busy (no read outstanding) is not the client's fault.
        var rate = BodyRate(minimumBytes: 10, window: .seconds(4))
        let start = ContinuousClock.now
        rate.head(at: start)
        rate.body(bytes)
        var time = start
        var action = BodyRate.Action.none
        for tick in 1...4 {
            time = start + .seconds(tick)
            if tick > busyTicks { rate.readRequested(at: time - .seconds(1)) }
            action = rate.tick(at: time)
            rate.readCompleted(at: time)
        }
        #expect(action == (bytes < 10 && busyTicks == 0 ? .close : .none))
        rate.end()
        #expect(rate.tick(at: time + .seconds(60)) == .none, "nothing is timed between requests")
    }
}
