import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A plain TCP connection to a loopback port, for speaking (or half-speaking) HTTP by hand.
/// Every read gives up after `readTimeout` seconds, so no test can hang on one.
final class RawConnection {
    /// How a read ended.
    enum ReadResult: Equatable {
        /// Some bytes.
        case data([UInt8])
        /// The server closed the connection (EOF or reset).
        case closed
        /// Nothing within the read timeout: still open.
        case timedOut
    }

    private var fd: Int32

    init(port: Int, readTimeout: Int = 15) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw POSIXError(.EMFILE) }
        var timeout = timeval(tv_sec: readTimeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            close(fd)
            throw POSIXError(.ECONNREFUSED)
        }
    }

    deinit { shut() }

    func shut() {
        if fd >= 0 { close(fd) }
        fd = -1
    }

    /// Sends all of `text`; false if the connection is gone.
    @discardableResult
    func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    @discardableResult
    func send(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }

    func read() -> ReadResult {
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if n > 0 { return .data(Array(buffer.prefix(n))) }
        if n == 0 { return .closed }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .timedOut : .closed
    }

    /// Reads until the server closes the connection or a read times out; returns what came
    /// and whether it was closed.
    func readToEnd() -> (text: String, closed: Bool) {
        var received: [UInt8] = []
        while true {
            switch read() {
            case .data(let bytes): received += bytes
            case .closed: return (String(decoding: received, as: UTF8.self), true)
            case .timedOut: return (String(decoding: received, as: UTF8.self), false)
            }
        }
    }

    /// Reads until `marker` has arrived (or the connection ends).
    func read(until marker: String) -> String {
        var received: [UInt8] = []
        while !String(decoding: received, as: UTF8.self).contains(marker) {
            guard case .data(let bytes) = read() else { break }
            received += bytes
        }
        return String(decoding: received, as: UTF8.self)
    }
}

/// Runs blocking socket work on a dispatch thread, so it never holds one of the few threads
/// the server's own tasks run on.
func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}
