import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import XferCore
import XferProtocol

/// A connection to an xfer server: one method per /v1 route, errors as ``XferError`` with
/// the server's code.
public final class ServerConnection: Sendable {
    /// The server's base URL (`http://127.0.0.1:8750`).
    public let server: String
    private let token: String
    private let client: HTTPClient
    private let knownFeatures = Locked<Set<ServerFeature>?>(nil)
    /// Longest time one request may take.
    public let timeout: TimeAmount
    /// When a failed request is sent again (``RetryPolicy``).
    public let retry: RetryPolicy
    /// The ceiling on chunk data sent (`--bwlimit`), shared by every upload of this connection.
    public let uploadLimit: BandwidthLimit?
    /// The ceiling on chunk data received, shared by every download of this connection.
    public let downloadLimit: BandwidthLimit?
    /// Where it says what it does: each request and its answer at `debug`, each try sent again
    /// at `info` (never a token or a body). Silent by default.
    public let logger: Logger

    /// A logger that says nothing: the default of a library's connection.
    public static let silent = Logger(label: "xfer.client", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Creates a connection (nothing is sent until the first request).
    /// - Parameters:
    ///   - server: `http://HOST:PORT` or `HOST:PORT`.
    ///   - token: The account's (or the admin) token.
    ///   - timeout: Longest time one request may take (default 5 minutes).
    ///   - trustRoots: For `https://` servers: a PEM file of the certificate authorities to
    ///     trust instead of the system's (for a private CA or a self-signed server).
    ///   - readTimeout: The longest silence allowed mid-answer (see below).
    ///   - retry: When a failed request is sent again.
    ///   - bandwidth: Bytes a second of chunk data at most, each way (`nil`: as fast as it goes).
    ///   - logger: Where to say what it does (``silent`` by default).
    public init(
        server: String, token: String, timeout: TimeAmount = .minutes(5), readTimeout: TimeAmount = .seconds(75),
        trustRoots: String? = nil, retry: RetryPolicy = RetryPolicy(), bandwidth: Int64? = nil,
        logger: Logger = ServerConnection.silent
    ) {
        var base = server.contains("://") ? server : "http://" + server
        while base.hasSuffix("/") { base.removeLast() }
        self.server = base
        self.token = token
        self.timeout = timeout
        self.retry = retry
        self.logger = logger
        uploadLimit = bandwidth.map { BandwidthLimit(bytesPerSecond: $0) }
        downloadLimit = bandwidth.map { BandwidthLimit(bytesPerSecond: $0) }
        var configuration = HTTPClient.Configuration()
        // Connect: an unreachable server is reported (and retried by sync) quickly. Read: the
        // longest silence allowed mid-answer, above the longest long poll (60 s), so a stalled
        // connection (say, a damaged Content-Length) ends in an error rather than a hang.
        configuration.timeout = .init(connect: .seconds(3), read: readTimeout)
        configuration.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 16)
        configuration.decompression = .disabled
        if let trustRoots {
            // The server's certificate must chain to these roots and name the host; the system's
            // roots are used when none are given.
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(trustRoots)
            tls.minimumTLSVersion = .tlsv12
            configuration.tlsConfiguration = tls
        }
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Closes the connection pool. Call once, when done.
    public func shutdown() async {
        try? await client.shutdown()
    }

    // MARK: Routes

    /// `GET /v1/health` (no token needed).
    @discardableResult
    public func health() async throws -> HealthStatus {
        try await json(HealthStatus.self, "GET", "/v1/health", authenticated: false)
    }

    /// The optional parts of the protocol the server understands, asked once (`GET /v1/health`)
    /// and remembered for this connection's life. A server that does not name any, or does not
    /// answer, has none: the caller then sends what every v1 server reads.
    public func features() async -> Set<ServerFeature> {
        if let known = knownFeatures.value { return known }
        guard let status = try? await health() else { return [] }
        let features = Set((status.features ?? []).compactMap(ServerFeature.init(rawValue:)))
        knownFeatures.withLock { $0 = features }
        return features
    }

    // MARK: Plumbing

    /// A request's body: JSON made in memory, or bytes held in a ``SpillArray`` (a commit's
    /// manifest delta of many files).
    typealias RequestBody = any RandomAccessCollection<UInt8> & Sendable

    func json<T: Decodable>(
        _ type: T.Type, _ method: String, _ route: String, body: RequestBody? = nil,
        authenticated: Bool = true
    ) async throws -> T {
        let response = try await send(
            method, route, body: body, contentType: "application/json", authenticated: authenticated)
        do {
            return try WireJSON.decode(type, from: response.readableBytesView)
        } catch {
            throw XferError(
                .internal,
                "the server's answer to \(method) \(route.prefix(while: { $0 != "?" })) is not what this client expects; is it an xfer server of a compatible version?"
            )
        }
    }

    func send(
        _ method: String, _ route: String, body: RequestBody? = nil, contentType: String? = nil,
        authenticated: Bool = true
    ) async throws -> ByteBuffer {
        try await sendWithHeaders(method, route, body: body, contentType: contentType, authenticated: authenticated).1
    }

    func sendWithHeaders(
        _ method: String, _ route: String, body: RequestBody? = nil, contentType: String? = nil,
        authenticated: Bool = true, limit: Int = 64 << 20
    ) async throws -> (HTTPClientResponse, ByteBuffer) {
        let response = try await respond(method, route) {
            var request = try makeRequest(method, route, body: body, authenticated: authenticated)
            if let contentType, body != nil { request.headers.add(name: "Content-Type", value: contentType) }
            return request
        }
        return try await answer(response, limit: limit)
    }

    /// Reads a response's whole answer (at most `limit` bytes); an error status is thrown as its xfer error.
    func answer(_ response: HTTPClientResponse, limit: Int = 64 << 20) async throws -> (
        HTTPClientResponse, ByteBuffer
    ) {
        guard (200..<300).contains(response.status.code) else { throw try await Self.error(from: response) }
        return (response, try await reading { try await response.body.collect(upTo: limit) })
    }

    /// Sends the request `make` makes (made anew for each try) and returns its answer's head,
    /// sending it again as ``retry`` says: after a 429 or 503 (waiting what `Retry-After`
    /// asks), a server not reached, or, for a request ``isIdempotent(method:route:)``, a broken
    /// connection or another 5xx. The last answer or error is the caller's.
    func respond(
        _ method: String, _ route: String, timeout: TimeAmount? = nil,
        _ make: () throws -> HTTPClientRequest
    ) async throws -> HTTPClientResponse {
        let idempotent = Self.isIdempotent(method: method, route: route)
        var attempt = 0
        while true {
            var retryAfter: Duration? = nil
            do {
                let response = try await execute(try make(), timeout: timeout)
                let code = Int(response.status.code)
                guard code >= 500 || code == 429, attempt < retry.retries,
                    RetryPolicy.isTransient(status: code, sent: true, idempotent: idempotent)
                else { return response }
                // The error body, read so the connection is used again.
                _ = try? await response.body.collect(upTo: 1 << 20)
                retryAfter = RetryPolicy.retryAfter(response.headers.first(name: "Retry-After"))
            } catch let error as XferError where error.code == .unavailable && !(error.cause is Untrusted) {
                guard attempt < retry.retries,
                    RetryPolicy.isTransient(status: nil, sent: !(error.cause is Unreached), idempotent: idempotent)
                else { throw error }
            }
            attempt += 1
            let wait = retry.delay(attempt: attempt, retryAfter: retryAfter)
            logger.info(
                "sending again",
                metadata: [
                    "request": "\(method) \(route.prefix { $0 != "?" })",
                    "try": "\(attempt + 1) of \(retry.retries + 1)",
                    "after": "\(wait)", "server_asked": "\(retryAfter != nil)"
                ])
            do {
                try await Task.sleep(for: wait)
            } catch {
                throw XferError(.cancelled, "cancelled")
            }
        }
    }

    /// Whether sending the request twice does what sending it once does: every GET, and the
    /// POSTs that read (`chunks/missing`, `chunks/download`, `manifests`) or store chunks by
    /// their content (`chunks`). A commit, a deletion, a resolve or an admin request is not:
    /// the first may have been done.
    static func isIdempotent(method: String, route: String) -> Bool {
        if method == "GET" || method == "HEAD" { return true }
        let path = route.prefix { $0 != "?" }
        guard method == "POST" else { return false }
        return ["/v1/chunks", "/v1/chunks/missing", "/v1/chunks/download"].contains(path)
            || (path.hasPrefix("/v1/containers/") && path.hasSuffix("/manifests"))
    }

    /// The cause of an `unavailable` error for a server whose certificate is not trusted: trying
    /// again changes nothing.
    struct Untrusted: Error, Sendable, CustomStringConvertible {
        var underlying: DescribedError
        var description: String { underlying.description }
    }

    /// The cause of an `unavailable` error when the server was never reached: nothing was sent.
    struct Unreached: Error, Sendable, CustomStringConvertible {
        var underlying: DescribedError
        var description: String { underlying.description }
    }

    /// `body`, reading an answer: a broken connection is `unavailable`; xfer errors pass as they are.
    func reading<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as XferError {
            throw error
        } catch {
            throw XferError(
                .unavailable, "the connection to \(server) broke while reading the answer", cause: DescribedError(error)
            )
        }
    }

    func makeRequest(_ method: String, _ route: String, body: RequestBody? = nil, authenticated: Bool = true)
        throws -> HTTPClientRequest
    {
        var request = HTTPClientRequest(url: server + route)
        request.method = HTTPMethod(rawValue: method)
        if authenticated { request.headers.add(name: "Authorization", value: "Bearer \(token)") }
        request.headers.add(name: "User-Agent", value: "xfer/\(XferVersion.current)")
        // Turned into buffers a few megabytes at a time as it is sent, not copied whole first.
        if let body { request.body = .bytes(body) }
        return request
    }

    /// The HTTP client's own log: its connection events at -vv (trace), capped at debug, since
    /// at trace it prints the bytes of each answer's parts, a new token's among them.
    var httpLogger: Logger {
        guard logger.logLevel == .trace else { return Self.silent }
        var capped = logger
        capped.logLevel = .debug
        return capped
    }

    /// The deadline of a request carrying chunk data: under a bandwidth limit, the body itself
    /// may take long, so only the server's and the client's idle timeouts bound it.
    var chunkTimeout: TimeAmount { uploadLimit == nil ? timeout : .hours(24) }

    func execute(_ request: HTTPClientRequest, timeout: TimeAmount? = nil) async throws -> HTTPClientResponse {
        let timeout = timeout ?? self.timeout
        let started = ContinuousClock.now
        let what = "\(request.method.rawValue) \(request.url.dropFirst(server.count).prefix { $0 != "?" })"
        do {
            let response = try await client.execute(request, timeout: timeout, logger: httpLogger)
            logger.debug(
                "answered",
                metadata: [
                    "request": "\(what)", "status": "\(response.status.code)",
                    "ms": "\(Int((ContinuousClock.now - started).seconds * 1000))"
                ])
            return response
        } catch let error as XferError {
            throw error  // from a body made while it is sent (upload(pieces:))
        } catch let error as HTTPClientError where error == .cancelled {
            throw XferError(.cancelled, "cancelled")
        } catch is CancellationError {
            throw XferError(.cancelled, "cancelled")
        } catch let error where error is NIOSSLError || error is NIOSSLExtraError || "\(error)".contains("certificate")
        {
            throw XferError(
                .unavailable,
                "the TLS certificate of \(server) is not trusted or does not name it; give the CA that signed it with --ca FILE (or XFER_CA)",
                cause: Untrusted(underlying: DescribedError(error)))
        } catch {
            logger.debug(
                "failed",
                metadata: [
                    "request": "\(what)", "error": "\(error)",
                    "ms": "\(Int((ContinuousClock.now - started).seconds * 1000))"
                ])
            throw XferError(
                .unavailable,
                "cannot reach the xfer server at \(server); is `xfer serve` running there, and is --server right?",
                cause: Self.neverSent(error) ? Unreached(underlying: DescribedError(error)) : DescribedError(error))
        }
    }

    /// Whether a transport error came before any byte of the request could leave: the
    /// connection refused, or not made in time.
    static func neverSent(_ error: any Error) -> Bool {
        if let error = error as? HTTPClientError, error == .connectTimeout { return true }
        if error is NIOConnectionError { return true }
        if let error = error as? ChannelError, case .connectTimeout = error { return true }
        if let error = error as? IOError, [ECONNREFUSED, ENETUNREACH, EHOSTUNREACH].contains(error.errnoCode) {
            return true
        }
        return false
    }

    static func error(from response: HTTPClientResponse) async throws -> XferError {
        let body = try? await response.body.collect(upTo: 1 << 20)
        guard let body, let decoded = try? WireJSON.decode(ErrorBody.self, from: body.readableBytesView) else {
            return XferError(
                .internal,
                "the server answered \(response.status.code) \(response.status.reasonPhrase) without an xfer error body"
            )
        }
        return decoded.error.xferError
    }

    static func escape(_ text: String) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
