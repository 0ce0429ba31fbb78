import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import XferCore

/// Where chunks live in S3-compatible storage: `s3://BUCKET/PREFIX` at an endpoint, with
/// credentials from the usual AWS environment variables.
public struct S3Location: Sendable, Hashable {
    /// `http://127.0.0.1:7480`, `https://s3.eu-west-1.amazonaws.com`.
    public var endpoint: String
    /// The bucket.
    public var bucket: String
    /// A key prefix ending in `/` (or empty).
    public var prefix: String
    /// The signing region.
    public var region: String
    /// The access key id.
    public var accessKey: String
    /// The secret access key.
    public var secretKey: String

    /// Parses `s3://bucket/prefix`, reading credentials and region from `environment`
    /// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION` or `AWS_DEFAULT_REGION`).
    /// - Throws: `invalid_configuration` naming what is missing.
    public init(url: String, endpoint: String, environment: [String: String] = ProcessInfo.processInfo.environment)
        throws
    {
        guard url.hasPrefix("s3://") else {
            throw XferError(.invalidConfiguration, "--chunks must look like s3://BUCKET/PREFIX, not \(url)")
        }
        let rest = url.dropFirst("s3://".count)
        let bucket = String(rest.prefix { $0 != "/" })
        guard !bucket.isEmpty else { throw XferError(.invalidConfiguration, "\(url) names no bucket") }
        var prefix = String(rest.dropFirst(bucket.count)).trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        if !prefix.isEmpty { prefix += "/" }
        guard let accessKey = environment["AWS_ACCESS_KEY_ID"], let secretKey = environment["AWS_SECRET_ACCESS_KEY"],
            !accessKey.isEmpty, !secretKey.isEmpty
        else {
            throw XferError(
                .invalidConfiguration, "S3 credentials come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; set both")
        }
        var base = endpoint
        while base.hasSuffix("/") { base.removeLast() }
        guard base.hasPrefix("http://") || base.hasPrefix("https://") else {
            throw XferError(.invalidConfiguration, "--s3-endpoint must be an http:// or https:// URL, not \(endpoint)")
        }
        self.endpoint = base
        self.bucket = bucket
        self.prefix = prefix
        self.region = environment["AWS_REGION"] ?? environment["AWS_DEFAULT_REGION"] ?? "us-east-1"
        self.accessKey = accessKey
        self.secretKey = secretKey
    }
}

/// An object in a listing.
public struct S3Object: Sendable, Hashable {
    /// The key.
    public var key: String
    /// The size in bytes.
    public var size: Int64
    /// Last modification, Unix seconds.
    public var modified: Int64
}

/// A small S3 client (path-style addressing, SigV4 header signing) for the calls a chunk store
/// needs: put, get, head, delete, list and create bucket. Failed calls with a 5xx answer or
/// no answer are retried with exponential backoff (50 ms doubling, 5 attempts).
public final class S3Client: Sendable {
    /// The location.
    public let location: S3Location
    private let signer: SigV4Signer
    private let http: HTTPClient
    private let host: String

    /// One connection pool for every S3 client of the process, alive as long as the process (so
    /// it needs no shutdown), with room for many requests in flight to one endpoint.
    private static let pool: HTTPClient = {
        var configuration = HTTPClient.Configuration()
        configuration.timeout = .init(connect: .seconds(3), read: .seconds(60))
        configuration.connectionPool = .init(idleTimeout: .seconds(30), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// Creates a client over the process's S3 connection pool; each call has a 120 s deadline.
    public init(location: S3Location) {
        self.location = location
        signer = SigV4Signer(accessKey: location.accessKey, secretKey: location.secretKey, region: location.region)
        http = Self.pool
        host = String(location.endpoint.split(separator: "/", maxSplits: 2, omittingEmptySubsequences: true)[1])
    }

    /// Creates the bucket if it does not exist.
    public func createBucketIfNeeded() async throws {
        let answer = try await send("PUT", key: nil)
        guard (200..<300).contains(answer.status) || answer.status == 409 else {
            throw Self.failure("create bucket \(location.bucket)", answer)
        }
    }

    /// Stores an object (replacing any with the key).
    public func put(_ key: String, _ body: [UInt8]) async throws {
        let answer = try await send("PUT", key: key, body: body)
        guard (200..<300).contains(answer.status) else { throw Self.failure("put \(key)", answer) }
    }

    /// An object's bytes, or `nil` if there is none.
    public func get(_ key: String, limit: Int) async throws -> [UInt8]? {
        let answer = try await send("GET", key: key, limit: limit)
        if answer.status == 404 { return nil }
        guard answer.status == 200 else { throw Self.failure("get \(key)", answer) }
        return answer.body
    }

    /// The bytes `range` of an object (one ranged GET), or `nil` if there is no such object.
    /// - Throws: `io` if the store answers with other bytes than asked for.
    public func get(_ key: String, range: Range<Int64>) async throws -> [UInt8]? {
        guard !range.isEmpty else { return [] }
        let answer = try await send(
            "GET", key: key, headers: [("Range", "bytes=\(range.lowerBound)-\(range.upperBound - 1)")],
            limit: max(Int(range.count), 64 << 10))
        if answer.status == 404 { return nil }
        guard answer.status == 206 || answer.status == 200 else { throw Self.failure("get \(key)", answer) }
        guard answer.body.count == range.count else {
            throw XferError(
                .io, "the object store answered \(answer.body.count) bytes of \(key) for a range of \(range.count)")
        }
        return answer.body
    }

    /// An object's size and modification time, or `nil` if there is none.
    public func head(_ key: String) async throws -> S3Object? {
        let answer = try await send("HEAD", key: key)
        if answer.status == 404 { return nil }
        guard answer.status == 200 else { throw Self.failure("head \(key)", answer) }
        let size = Int64(answer.headers.first(name: "Content-Length") ?? "") ?? 0
        let modified = answer.headers.first(name: "Last-Modified").flatMap(Self.httpDate) ?? 0
        return S3Object(key: key, size: size, modified: modified)
    }

    /// Deletes an object (no error if it is absent).
    public func delete(_ key: String) async throws {
        let answer = try await send("DELETE", key: key)
        guard (200..<300).contains(answer.status) || answer.status == 404 else {
            throw Self.failure("delete \(key)", answer)
        }
    }

    /// Every object whose key starts with `prefix` (ListObjectsV2, page by page).
    public func list(prefix: String) async throws -> [S3Object] {
        var objects: [S3Object] = []
        var token: String? = nil
        repeat {
            var query = [("list-type", "2"), ("prefix", prefix), ("max-keys", "1000")]
            if let token { query.append(("continuation-token", token)) }
            let answer = try await send("GET", key: nil, query: query, limit: 16 << 20)
            guard answer.status == 200 else { throw Self.failure("list \(prefix)", answer) }
            let xml = String(decoding: answer.body, as: UTF8.self)
            for contents in Self.elements("Contents", in: xml) {
                guard let key = Self.elements("Key", in: contents).first.map(Self.unescape) else { continue }
                let size = Int64(Self.elements("Size", in: contents).first ?? "") ?? 0
                let modified = Self.elements("LastModified", in: contents).first.flatMap(Self.isoDate) ?? 0
                objects.append(S3Object(key: key, size: size, modified: modified))
            }
            token =
                Self.elements("IsTruncated", in: xml).first == "true"
                ? Self.elements("NextContinuationToken", in: xml).first.map(Self.unescape) : nil
        } while token != nil
        return objects
    }

    // MARK: Plumbing

    struct Answer {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    private func send(
        _ method: String, key: String?, query: [(String, String)] = [], headers: [(String, String)] = [],
        body: [UInt8] = [], limit: Int = 1 << 20
    ) async throws -> Answer {
        let path = "/" + location.bucket + (key.map { "/" + $0 } ?? "")
        var attempt = 0
        while true {
            attempt += 1
            let payloadHash = SigV4Signer.payloadHash(body)
            let signed = signer.sign(
                method: method, host: host, path: path, query: query, payloadHash: payloadHash, date: Date())
            let queryText = query.map {
                "\(SigV4Signer.encode($0.0, slash: true))=\(SigV4Signer.encode($0.1, slash: true))"
            }.joined(separator: "&")
            var request = HTTPClientRequest(
                url: location.endpoint + SigV4Signer.encode(path, slash: false)
                    + (queryText.isEmpty ? "" : "?" + queryText))
            request.method = HTTPMethod(rawValue: method)
            for (name, value) in signed + headers { request.headers.add(name: name, value: value) }
            if !body.isEmpty || method == "PUT" {
                request.body = .bytes(ByteBuffer(bytes: body))
                request.headers.add(name: "Content-Length", value: "\(body.count)")
            }
            do {
                let response = try await http.execute(request, timeout: .seconds(120))
                let collected = method == "HEAD" ? ByteBuffer() : try await response.body.collect(upTo: limit)
                let answer = Answer(
                    status: Int(response.status.code), headers: response.headers,
                    body: Array(collected.readableBytesView))
                if answer.status >= 500 && attempt < 5 {
                    try await Task.sleep(for: .milliseconds(50 << attempt))
                    continue
                }
                return answer
            } catch let error as XferError {
                throw error
            } catch {
                if attempt < 5 {
                    try await Task.sleep(for: .milliseconds(50 << attempt))
                    continue
                }
                throw XferError(
                    .io, "the object store at \(location.endpoint) did not answer \(method) \(path)",
                    cause: DescribedError(error))
            }
        }
    }

    private static func failure(_ what: String, _ answer: Answer) -> XferError {
        let code =
            elements("Code", in: String(decoding: answer.body.prefix(4096), as: UTF8.self)).first
            ?? "HTTP \(answer.status)"
        return XferError(.io, "the object store refused to \(what): \(code)")
    }

    /// The texts of every `<name>…</name>` element (flat; S3 listings do not nest these).
    static func elements(_ name: String, in xml: String) -> [String] {
        var out: [String] = []
        var rest = xml[...]
        while let open = rest.range(of: "<\(name)>"),
            let close = rest.range(of: "</\(name)>", range: open.upperBound..<rest.endIndex)
        {
            out.append(String(rest[open.upperBound..<close.lowerBound]))
            rest = rest[close.upperBound...]
        }
        return out
    }

    static func unescape(_ text: String) -> String {
        text.replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&apos;", with: "'")
            .replacingOccurrences(of: "&amp;", with: "&")
    }

    static func isoDate(_ text: String) -> Int64? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return Int64(date.timeIntervalSince1970) }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text).map { Int64($0.timeIntervalSince1970) }
    }

    static func httpDate(_ text: String) -> Int64? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter.date(from: text).map { Int64($0.timeIntervalSince1970) }
    }
}
