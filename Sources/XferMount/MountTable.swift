import Foundation

/// The kernel's table of mounts (`/proc/self/mountinfo`), for finding the `xfer mount` a path
/// lies in: `xfer mount pin ~/box/Documents/a.pdf` and `xfer status ~/box` name documents by
/// where they show.
public enum MountTable {
    /// An `xfer mount`: where it is, and the container it shows.
    public struct Entry: Sendable, Hashable {
        public var point: String
        public var container: String
    }

    /// The file-system type and source `xfer mount` mounts with (`fsname=xfer:CONTAINER`).
    static let type = "fuse.xfer"
    static let sourcePrefix = "xfer:"

    /// The `xfer mount` that holds `path` (an absolute path, symlinks resolved), and `path`'s
    /// document path inside it ("" for the mount point itself).
    public static func locate(_ path: String, table: String? = nil) -> (mount: Entry, document: String)? {
        let text = table ?? (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        let best = entries(text).filter { path == $0.point || path.hasPrefix($0.point + "/") }
            .max { $0.point.count < $1.point.count }
        guard let best else { return nil }
        return (best, String(path.dropFirst(best.point.count).drop { $0 == "/" }))
    }

    /// Every `xfer mount` in a mountinfo text.
    static func entries(_ text: String) -> [Entry] {
        text.split(separator: "\n").compactMap { line in
            let halves = line.components(separatedBy: " - ")
            guard halves.count == 2 else { return nil }
            let before = halves[0].split(separator: " ")
            let after = halves[1].split(separator: " ")
            guard before.count > 4, after.count > 1, after[0] == type, after[1].hasPrefix(sourcePrefix) else {
                return nil
            }
            return Entry(
                point: unescape(String(before[4])),
                container: unescape(String(after[1].dropFirst(sourcePrefix.count))))
        }
    }

    /// mountinfo writes space, tab, newline and backslash as `\ooo`.
    static func unescape(_ field: String) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3,
                let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
