import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import XferCore
import XferProtocol

/// Turns every error a route throws into a JSON ``ErrorBody`` with a stable code and the
/// matching HTTP status, and logs each request at one line.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = XferRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            // Time to the response head (a streamed body may still be flowing).
            context.logger.debug(
                "request",
                metadata: [
                    "method": "\(request.method)", "path": "\(Self.loggedPath(request.uri.path))",
                    "status": "\(response.status.code)",
                    "ms": "\(Self.milliseconds(since: start))"
                ])
            return response
        } catch {
            let body = Self.body(for: error)
            let status = (error as? XferError)?.status ?? XferError.Code.named(body.error.code).status
            // A 503 is a client over its share (parked polls), not a server fault.
            let level: Logger.Level = status.code >= 500 && status != .serviceUnavailable ? .error : .info
            context.logger.log(
                level: level, "request failed",
                metadata: [
                    "method": "\(request.method)", "path": "\(Self.loggedPath(request.uri.path))",
                    "status": "\(status.code)",
                    "ms": "\(Self.milliseconds(since: start))",
                    "code": "\(body.error.code)", "message": "\(body.error.message)"
                ])
            var headers: HTTPFields = [.contentType: "application/json"]
            if let retry = (error as? XferError)?.cause as? RetryAfter { headers[.retryAfter] = String(retry.seconds) }
            return Response(
                status: status, headers: headers,
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: WireJSON.encode(body))))
        }
    }

    /// A path as the request log shows it: a share link's secret (`/s/SECRET/…`) left out,
    /// so the log never holds what opens a link.
    static func loggedPath(_ path: String) -> String {
        guard path.hasPrefix("/s/") else { return path }
        let rest = path.dropFirst(3).drop { $0 != "/" }
        return "/s/…" + rest
    }

    /// Time since `start` in milliseconds, to two decimals (the request log's `ms`).
    static func milliseconds(since start: ContinuousClock.Instant) -> Double {
        ((ContinuousClock.now - start).seconds * 100_000).rounded() / 100
    }

    /// The status an error is answered with.
    static func status(for error: any Error) -> HTTPResponse.Status {
        (error as? XferError)?.status ?? XferError.Code.named(body(for: error).error.code).status
    }

    static func body(for error: any Error) -> ErrorBody {
        switch error {
        case let error as XferError:
            var body = ErrorBody(code: error.code.name, message: error.message)
            if let detail = error.cause as? ConflictDetail { body.error.currentVersion = detail.currentVersion }
            if let detail = error.cause as? MissingChunksDetail { body.error.missing = detail.ids.map(\.hex) }
            // Paths and errno stay in the server's log; the client learns what it can act on.
            if error.code == .storageFull {
                body.error.message =
                    "the server's storage is full; nothing was stored; retry once its operator has freed space"
            } else if error.code == .io {
                body.error.message = "the server could not read or write its storage; see its log"
            }
            return body
        case is NIOTooManyBytesError:
            // A body collected up to a limit that it passed (a WebDAV or web form body).
            return ErrorBody(code: XferError.Code.tooLarge.name, message: "request body is too large")
        case let error as HTTPError:
            switch error.status {
            case .contentTooLarge:
                return ErrorBody(code: XferError.Code.tooLarge.name, message: "request body is too large")
            case .notFound: return ErrorBody(code: XferError.Code.notFound.name, message: "no such route")
            case .methodNotAllowed:
                return ErrorBody(code: XferError.Code.badRequest.name, message: "method not allowed on this route")
            default: return ErrorBody(code: XferError.Code.badRequest.name, message: error.body ?? "bad request")
            }
        default:
            return ErrorBody(code: XferError.Code.internal.name, message: "internal error; see the server's log")
        }
    }
}

extension XferError.Code {
    /// The HTTP status this code is answered with (docs/PROTOCOL.md lists them): the one table.
    var status: HTTPResponse.Status {
        switch self {
        case .badRequest, .invalidPath, .invalidManifest, .invalidConfiguration: return .badRequest
        case .corruptChunk, .compression: return .unprocessableContent
        case .unauthorized: return .unauthorized
        case .forbidden: return .forbidden
        case .notFound: return .notFound
        case .conflict, .missingChunks, .alreadyExists, .encryptedContainer: return .conflict
        case .tooLarge: return .contentTooLarge
        case .quotaExceeded, .storageFull: return HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage")
        case .unavailable: return .serviceUnavailable
        case .rateLimited: return .tooManyRequests
        default: return .internalServerError
        }
    }
}

/// An ``XferError`` thrown by a route answers with its own status and an ``ErrorBody``
/// (hummingbird's `HTTPResponseError`; ``ErrorMiddleware`` does the same and logs it).
extension XferError: HTTPResponseError {
    public var status: HTTPResponse.Status { code.status }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(
            status: status, headers: [.contentType: "application/json"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: WireJSON.encode(ErrorMiddleware.body(for: self)))))
    }
}
