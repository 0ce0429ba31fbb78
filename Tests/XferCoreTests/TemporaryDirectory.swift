import XferCore

#if canImport(Glibc)
    import Glibc
#endif

/// A fresh directory under /tmp, removed with its contents by `remove()`.
struct TemporaryDirectory {
    let path: String

    init() {
        var template = Array("/tmp/xfer-test-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    func write(_ relative: String, _ bytes: [UInt8]) {
        let full = path + "/" + relative
        if let slash = full.lastIndex(of: "/") { _ = mkdirs(String(full[..<slash])) }
        let fd = open(full, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        precondition(fd >= 0, "cannot create \(full)")
        bytes.withUnsafeBytes { raw in _ = Glibc.write(fd, raw.baseAddress, raw.count) }
        close(fd)
    }

    func read(_ relative: String) -> [UInt8]? {
        let fd = open(path + "/" + relative, O_RDONLY)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = Glibc.read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            out += buffer[..<n]
        }
        return out
    }

    private func mkdirs(_ path: String) -> Bool {
        if mkdir(path, 0o755) == 0 || errno == EEXIST { return true }
        if let slash = path.lastIndex(of: "/"), mkdirs(String(path[..<slash])) {
            return mkdir(path, 0o755) == 0 || errno == EEXIST
        }
        return false
    }

    func remove() {
        _ = system("rm -rf '\(path)'")
    }
}
