import Hummingbird
import Logging
import XferCore
import XferProtocol

/// Turns every error a route throws into a JSON ``ErrorBody`` with a stable code and the
/// matching HTTP status, and logs each request at one line.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = XferRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        do {
            let response = try await next(request, context)
            // Time to the response head (a streamed body may still be flowing).
            context.logger.debug("request", metadata: ["method": "\(request.method)", "path": "\(request.uri.path)",
                                                       "status": "\(response.status.code)",
                                                       "ms": "\(Self.milliseconds(since: start))"])
            return response
        } catch {
            let body = Self.body(for: error)
            let status = Self.status(for: body.error.code)
            // A 503 is a client over its share (parked polls), not a server fault.
            let level: Logger.Level = status.code >= 500 && status != .serviceUnavailable ? .error : .info
            context.logger.log(level: level, "request failed", metadata: [
                "method": "\(request.method)", "path": "\(request.uri.path)", "status": "\(status.code)",
                "ms": "\(Self.milliseconds(since: start))",
                "code": "\(body.error.code)", "message": "\(body.error.message)",
            ])
            return Response(status: status, headers: [.contentType: "application/json"],
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: WireJSON.encode(body))))
        }
    }

    /// Time since `start` in milliseconds, to two decimals (the request log's `ms`).
    static func milliseconds(since start: ContinuousClock.Instant) -> Double {
        ((ContinuousClock.now - start).seconds * 100_000).rounded() / 100
    }

    static func body(for error: any Error) -> ErrorBody {
        switch error {
        case let error as XferError:
            var body = ErrorBody(code: error.code.name, message: error.message)
            if let detail = error.cause as? ConflictDetail { body.error.currentVersion = detail.currentVersion }
            if let detail = error.cause as? MissingChunksDetail { body.error.missing = detail.ids.map(\.hex) }
            if error.code == .io {
                // Paths and errno stay in the server's log; the client learns what it can act on.
                let full = error.message.contains("no space left") || error.message.contains("disk is full")
                body.error.message = full ? "the server's storage is full; nothing was stored; retry once its operator has freed space"
                                          : "the server could not read or write its storage; see its log"
            }
            return body
        case let error as HTTPError:
            switch error.status {
            case .contentTooLarge: return ErrorBody(code: XferError.Code.tooLarge.name, message: "request body is too large")
            case .notFound: return ErrorBody(code: XferError.Code.notFound.name, message: "no such route")
            case .methodNotAllowed: return ErrorBody(code: XferError.Code.badRequest.name, message: "method not allowed on this route")
            default: return ErrorBody(code: XferError.Code.badRequest.name, message: error.body ?? "bad request")
            }
        default:
            return ErrorBody(code: XferError.Code.internal.name, message: "internal error; see the server's log")
        }
    }

    /// The HTTP status of each error code (docs/PROTOCOL.md lists them).
    static func status(for code: String) -> HTTPResponse.Status {
        switch code {
        case "bad_request", "invalid_path", "invalid_manifest", "invalid_configuration": return .badRequest
        case "corrupt_chunk", "compression": return .unprocessableContent
        case "unauthorized": return .unauthorized
        case "forbidden": return .forbidden
        case "not_found": return .notFound
        case "conflict", "missing_chunks", "already_exists": return .conflict
        case "too_large": return .contentTooLarge
        case "quota_exceeded": return HTTPResponse.Status(code: 507, reasonPhrase: "Insufficient Storage")
        case "unavailable": return .serviceUnavailable
        default: return .internalServerError
        }
    }
}
