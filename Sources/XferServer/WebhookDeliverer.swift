import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import ServiceLifecycle
import XferCore
import XferProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// Delivers subscription notifications to their webhooks (docs/RECORDS.md, "Webhooks"): a
/// service beside the HTTP server that claims due webhooks from the store (``WebhookRules`` and
/// the store decide what is due), POSTs each its next notifications, signed, and records the
/// outcome. Idle, it asks the store once a second.
struct WebhookDeliverer: Service {
    let metadata: any MetadataStore
    let destinations: WebhookDestinations
    let logger: Logger
    /// Deliveries made at once.
    var parallel = 8
    var idle: Duration = .seconds(1)

    /// One connection pool for the process's deliveries: no redirect is followed (a receiver
    /// cannot send the server elsewhere), and nothing is decompressed.
    private static let client: HTTPClient = {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.timeout = .init(connect: .seconds(5), read: .init(WebhookRules.timeout))
        configuration.decompression = .disabled
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    func run() async throws {
        enum Event { case delivered, tick }
        // A slot frees as each delivery ends, so a slow receiver holds one slot, not a round.
        await withTaskGroup(of: Event.self) { group in
            var running = 0
            var ticking = false
            while !Task.isShuttingDownGracefully, !Task.isCancelled {
                if running < parallel {
                    for webhook in await claim(running: running) {
                        group.addTask {
                            await deliver(webhook)
                            return .delivered
                        }
                        running += 1
                    }
                }
                if !ticking {
                    group.addTask { [idle] in
                        try? await Task.sleep(for: idle)
                        return .tick
                    }
                    ticking = true
                }
                switch await group.next() {
                case .delivered?: running -= 1
                case .tick?: ticking = false
                case nil: break
                }
            }
            // Stopping: what is under way finishes, so its outcome is kept.
            while running > 0, let event = await group.next() {
                if event == .delivered { running -= 1 }
            }
        }
    }

    /// Claims up to the free slots' worth of due webhooks (none if the store does not answer).
    private func claim(running: Int) async -> [DueWebhook] {
        do {
            return try await metadata.claimWebhooks(limit: parallel - running)
        } catch {
            logger.warning("webhooks: the store did not answer", metadata: ["error": "\(error)"])
            return []
        }
    }

    /// One delivery and its outcome in the store.
    func deliver(_ webhook: DueWebhook) async {
        let last = webhook.delivery.notifications.last?.cursor ?? 0
        var failure: String? = nil
        do {
            try await post(webhook)
        } catch {
            failure = (error as? XferError)?.message ?? "\(error)"
            logger.info(
                "webhook delivery failed",
                metadata: ["subscription": "\(webhook.key.subscriptionID)", "error": "\(failure ?? "")"])
        }
        let delay = WebhookRules.retryDelay(failures: webhook.failures + 1)
        do {
            try await metadata.finishWebhook(
                webhook.key, delivered: failure == nil ? last : nil, failure: failure, retryAfter: delay)
        } catch {
            // The claim runs out and the notifications go again: at least once.
            logger.warning("webhooks: the outcome was not saved", metadata: ["error": "\(error)"])
        }
    }

    /// POSTs the body to a destination the policy allows.
    /// - Throws: why the receiver did not take it (refused destination, no answer, not 2xx).
    private func post(_ webhook: DueWebhook) async throws {
        let url = try WebhookRules.check(url: webhook.url)
        try await WebhookAddresses.check(url, destinations)
        let body = RecordJSON.encode(webhook.delivery)
        let notifications = webhook.delivery.notifications
        var request = HTTPClientRequest(url: webhook.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "xfer/\(XferVersion.current)")
        request.headers.add(
            name: WebhookRules.signatureHeader,
            value: WebhookRules.signature(
                secret: webhook.secret, seconds: Int64(Date().timeIntervalSince1970), body: body))
        request.headers.add(
            name: WebhookRules.deliveryHeader,
            value:
                "\(webhook.delivery.subscriptionID)/\(notifications.first?.cursor ?? 0)-\(notifications.last?.cursor ?? 0)"
        )
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await Self.client.execute(request, timeout: .init(WebhookRules.timeout))
        _ = try? await response.body.collect(upTo: 64 << 10)
        guard (200..<300).contains(response.status.code) else {
            throw XferError(.io, "the receiver answered \(response.status.code)")
        }
    }
}

/// The addresses a webhook's host stands for, checked against the server's policy: the one
/// place a webhook destination is judged, when a subscription is saved and before each delivery.
enum WebhookAddresses {
    /// - Throws: `bad_request` when webhooks are off, the host does not resolve, or (with
    ///   `public`) any of its addresses is not public.
    static func check(_ url: URLComponents, _ destinations: WebhookDestinations) async throws {
        guard destinations != .off else {
            throw XferError(.badRequest, "this server delivers no webhooks (started with --webhooks off)")
        }
        guard destinations == .public else { return }
        var host = url.host ?? ""
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let addresses = try await resolve(host)
        guard !addresses.isEmpty, addresses.allSatisfy(WebhookRules.isPublic) else {
            throw XferError(
                .badRequest,
                "webhook host \(host.prefix(80)) is not a public address; this server (--webhooks public) does not reach private, loopback or link-local ones"
            )
        }
    }

    /// Threads of their own for name lookups, which block for as long as a name server takes:
    /// never the blocking pool the stores' transactions run on, and at most four at once.
    private static let lookups: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 4)
        pool.start()
        return pool
    }()

    /// The IPv4 and IPv6 addresses of `host` (a name or a literal), from the system's resolver.
    /// - Throws: `bad_request` for a host that does not resolve within ``WebhookRules/lookupTimeout``.
    static func resolve(_ host: String) async throws -> [[UInt8]] {
        try await withThrowingTaskGroup(of: [[UInt8]]?.self) { group in
            group.addTask { try await lookups.runIfActive { try lookUp(host) } }
            group.addTask {
                try await Task.sleep(for: WebhookRules.lookupTimeout)
                return nil
            }
            defer { group.cancelAll() }
            guard let addresses = try await group.next() ?? nil else {
                throw XferError(.badRequest, "webhook host \(host.prefix(80)) did not resolve within 5 s")
            }
            return addresses
        }
    }

    private static func lookUp(_ host: String) throws -> [[UInt8]] {
        var hints = addrinfo()
        #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
            hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>? = nil
        guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else {
            throw XferError(.badRequest, "webhook host \(host.prefix(80)) does not resolve")
        }
        defer { freeaddrinfo(first) }
        var addresses: [[UInt8]] = []
        for entry in sequence(first: first, next: { $0.pointee.ai_next }) {
            guard let address = entry.pointee.ai_addr else { continue }
            switch Int32(address.pointee.sa_family) {
            case AF_INET:
                address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    addresses.append(withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) })
                }
            case AF_INET6:
                address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    addresses.append(withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) })
                }
            default: continue
            }
        }
        return addresses
    }
}
