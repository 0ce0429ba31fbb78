import Foundation
import HTTPTypes
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// The pure half of a WebDAV COPY or MOVE: which headers hold, and what it commits and deletes,
/// decided without a store.
@Suite struct DavCopyDecisionsTests {
    static func target(_ relative: String, container: String = "box") throws -> DavRoutes.Target {
        DavRoutes.Target(
            account: 1, container: try ContainerName(container), named: try ContainerName(container),
            relative: relative,
            slash: false)
    }

    static func info(_ path: String, version: Int64 = 1) throws -> DocumentInfo {
        DocumentInfo(
            path: try DocumentPath("Documents/" + path), version: version, state: .current, kind: .file, size: 0,
            mtimeNs: 0, mode: 0o644, baseVersion: nil, manifestDigest: nil, files: nil, chunks: nil, device: nil,
            sequence: 1)
    }

    /// The status a copy request is refused with, or `nil` when it holds.
    static func refusal(
        _ source: String, _ destination: String?, overwrite: String? = nil, depth: String? = nil, move: Bool = false
    ) throws -> HTTPResponse.Status? {
        do {
            _ = try DavRoutes.copyRequest(
                try target(source), destination: destination, overwrite: overwrite, depth: depth, move: move)
            return nil
        } catch let status as DavRoutes.DavStatus {
            return status.status
        }
    }

    @Test func theHeadersAreReadWithTheirDefaults() throws {
        let asked = try DavRoutes.copyRequest(
            try Self.target("a.txt"), destination: "http://host/dav/box/b%20c.txt", overwrite: nil, depth: nil,
            move: false)
        #expect(asked.destination.relative == "b c.txt")
        #expect(asked.overwrite && asked.deep)
        let shallow = try DavRoutes.copyRequest(
            try Self.target("a"), destination: "/dav/box/b/", overwrite: "f", depth: "0", move: true)
        #expect(shallow.destination.relative == "b" && shallow.destination.slash)
        #expect(!shallow.overwrite && !shallow.deep)
    }

    @Test func aCopyIsRefusedBeforeAnythingIsRead() throws {
        #expect(try Self.refusal("a", nil) == .badRequest, "no Destination")
        #expect(try Self.refusal("a", "/dav/other/a") == .badGateway, "another container")
        #expect(try Self.refusal("a", "/dav/box/b", depth: "1") == .badRequest)
        #expect(try Self.refusal("", "/dav/box/b") == .forbidden, "the root")
        #expect(try Self.refusal("a", "/dav/box/") == .forbidden, "onto the root")
        #expect(try Self.refusal("a", "/dav/box/a") == .forbidden, "onto itself")
        #expect(try Self.refusal("a", "/dav/box/a/b") == .forbidden, "into itself")
        #expect(try Self.refusal("a/b", "/dav/box/a", overwrite: "T") == .forbidden, "over a folder holding it")
        #expect(try Self.refusal("a/b", "/dav/box/ab") == nil, "a sibling whose name starts alike")
        #expect(try Self.refusal("a", "/dav/box/a.old", depth: "Infinity") == nil)
    }

    @Test func onlyAPackageWholeIsCopied() throws {
        let package = try Self.info("p.pkg")
        let manifest = try DocumentWriter.folderManifest()
        #expect(throws: Never.self) { try DavRoutes.requireCopyable(.packageFolder(package, manifest, entry: "")) }
        #expect(throws: DavRoutes.DavStatus.self) {
            try DavRoutes.requireCopyable(.packageFolder(package, manifest, entry: "inner"))
        }
        #expect(throws: DavRoutes.DavStatus.self) {
            try DavRoutes.requireCopyable(.packageFile(package, manifest, index: 0))
        }
        #expect(throws: DavRoutes.DavStatus.self) {
            try DavRoutes.copySteps(.root, documents: [], to: "x", move: false)
        }
    }

    @Test func aFileIsPlacedThenAMoveDeletesIt() throws {
        let file = try Self.info("a.txt", version: 4)
        #expect(
            try DavRoutes.copySteps(.file(file), documents: [], to: "b.txt", move: false) == [.place(file, at: "b.txt")]
        )
        #expect(
            try DavRoutes.copySteps(.file(file), documents: [], to: "b.txt", move: true) == [
                .place(file, at: "b.txt"), .delete(file)
            ])
    }

    @Test func aFolderIsPlacedDocumentByDocumentUnderItsNewName() throws {
        let folder = try Self.info("f")
        let one = try Self.info("f/one")
        let two = try Self.info("f/sub/two")
        #expect(
            try DavRoutes.copySteps(
                .folder(prefix: "Documents/f/", document: folder), documents: [one, two], to: "g/h", move: true) == [
                    .place(folder, at: "g/h"), .place(one, at: "g/h/one"), .place(two, at: "g/h/sub/two"),
                    .delete(one), .delete(two), .delete(folder)
                ])
        #expect(
            try DavRoutes.copySteps(
                .folder(prefix: "Documents/f/", document: nil), documents: [one], to: "g", move: false)
                == [.place(one, at: "g/one")],
            "a folder with documents needs no directory document")
        #expect(
            try DavRoutes.copySteps(.folder(prefix: "Documents/f/", document: nil), documents: [], to: "g", move: true)
                == [.newFolder(at: "g")],
            "an empty folder stays one")
    }
}
