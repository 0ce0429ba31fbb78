// An example sync daemon built on the XferClient library (docs/LIBRARY.md).
//
//   XFER_SERVER=http://127.0.0.1:8750 XFER_TOKEN=… xfer-example-daemon DIR [--once]
//
// It keeps DIR in sync with the "default" container and settles conflicts itself instead of
// asking the user: for text files it keeps the current version and appends every conflict
// version's text to it (a naive merge, but one no edit is lost by); other files keep the
// server's choice (the later edit). Everything else is the engine's work.
import Foundation
import XferClient
import XferProtocol

let arguments = CommandLine.arguments.dropFirst()
guard let directory = arguments.first(where: { !$0.hasPrefix("-") }),
    let token = ProcessInfo.processInfo.environment["XFER_TOKEN"]
else {
    FileHandle.standardError.write(Data("usage: XFER_TOKEN=… xfer-example-daemon DIR [--once]\n".utf8))
    exit(2)
}
let server = ProcessInfo.processInfo.environment["XFER_SERVER"] ?? "http://127.0.0.1:8750"
let once = arguments.contains("--once")

let client = try DocumentClient(server: server, token: token)  // state in XFER_STATE_DIR or ~/.local/state/xfer
let engine = try client.syncEngine(directory: directory)

/// Merges a text document's conflict versions into its current one and resolves.
func merge(_ path: DocumentPath, current: Int64, conflicts: [Int64]) async throws {
    guard path.value.hasSuffix(".txt") else {
        _ = try await client.resolve(path.value, keep: current, keepAll: true)
        print("kept v\(current) of \(path)")
        return
    }
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent(UUID().uuidString).path
    defer { try? FileManager.default.removeItem(atPath: scratch) }
    var text = ""
    for version in [current] + conflicts {
        _ = try await client.pull(path.value, into: scratch, version: version)
        text += (try String(contentsOfFile: scratch, encoding: .utf8))
    }
    _ = try await client.resolve(path.value, keep: current)
    let local = directory + "/" + path.value
    try text.write(toFile: local, atomically: true, encoding: .utf8)
    print("merged \(conflicts.count + 1) versions of \(path)")
}

let handler = Task {
    for await event in engine.events {
        switch event {
        case .uploaded(let path, let version, _): print("up   \(path) v\(version)")
        case .downloaded(let path, let version, _): print("down \(path) v\(version)")
        case .conflict(let path, let current, let conflicts):
            do { try await merge(path, current: current, conflicts: conflicts) } catch {
                print("merge of \(path) failed: \(error)")
            }
        case .failed(let path, let error): print("failed \(path?.value ?? "-"): \(error.message)")
        case .offline(_, let retry): print("offline; retrying in \(retry)")
        case .passFinished(let summary) where once: print("pass: \(summary.uploaded) up, \(summary.downloaded) down")
        default: break
        }
    }
}

if once {
    try await engine.syncOnce()
    await engine.close()
    await handler.value
    // A second pass sends what the merges wrote.
    if try await engine.syncOnce().uploaded > 0 { print("pushed merges") }
} else {
    try await engine.watch()
}
await client.shutdown()
