import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import NIOCore
import Testing
import XferCore
import XferProtocol

@testable import XferDav
@testable import XferServer

/// WebDAV's XML, and its routes in-process: who may ask, what a PUT and a DELETE leave in the
/// document history, and what it refuses. tools/suites/webdav-test.py drives it with litmus and rclone.
@Suite struct DavRouteTests {
    static func name(_ local: String, _ namespace: String = "DAV:") -> DavXML.Name {
        DavXML.Name(namespace: namespace, local: local)
    }

    @Test func aPropfindBodyIsReadWithItsNamespaces() throws {
        #expect(try DavXML.propfind("") == .allProperties)
        #expect(
            try DavXML.propfind(#"<?xml version="1.0"?><propfind xmlns="DAV:"><allprop/></propfind>"#) == .allProperties
        )
        #expect(try DavXML.propfind(#"<D:propfind xmlns:D="DAV:"><D:propname/></D:propfind>"#) == .propertyNames)
        let asked = try DavXML.propfind(
            """
            <?xml version="1.0" encoding="utf-8"?>
            <D:propfind xmlns:D="DAV:" xmlns:Z="http://example.com/z">
              <!-- a comment -->
              <D:prop><D:getcontentlength/><Z:color/><getetag xmlns="DAV:"/></D:prop>
            </D:propfind>
            """)
        #expect(
            asked
                == .properties([
                    Self.name("getcontentlength"), Self.name("color", "http://example.com/z"), Self.name("getetag")
                ]))
    }

    @Test func aProppatchIsReadInOrderWithEachValueStandingAlone() throws {
        let changes = try DavXML.proppatch(
            """
            <?xml version="1.0"?>
            <D:propertyupdate xmlns:D="DAV:" xmlns:Z="http://example.com/z">
              <D:set><D:prop><Z:color>red &amp; <Z:b>bold</Z:b></Z:color><plain xmlns="">x</plain></D:prop></D:set>
              <D:remove><D:prop><Z:size/></D:prop></D:remove>
            </D:propertyupdate>
            """)
        #expect(changes.count == 3)
        #expect(changes[2] == .remove(Self.name("size", "http://example.com/z")))
        guard case .set(let name, let xml) = changes[0], case .set(let plain, let plainXML) = changes[1] else {
            Issue.record("\(changes)")
            return
        }
        #expect(name == Self.name("color", "http://example.com/z"))
        // Its own prefix and every namespace in scope declared on it: it reads alone.
        #expect(
            xml
                == #"<p:color xmlns:p="http://example.com/z" xmlns:D="DAV:" xmlns:Z="http://example.com/z">red &amp; <Z:b>bold</Z:b></p:color>"#
        )
        #expect(
            try DavXML.elements(xml).map(\.name) == [
                Self.name("color", "http://example.com/z"), Self.name("b", "http://example.com/z")
            ])
        #expect(plain == Self.name("plain", "") && plainXML.hasPrefix("<plain xmlns=\"\""))
        #expect(throws: XferError.self) { try DavXML.proppatch(#"<D:propfind xmlns:D="DAV:"/>"#) }
    }

    @Test(arguments: [
        "<D:propfind xmlns:D=\"DAV:\"><D:prop></D:propfind>",  // unbalanced
        "<D:propfind xmlns:D=\"DAV:\"><Q:prop/></D:propfind>",  // undeclared prefix
        "<D:propfind xmlns:D=\"DAV:\"><D:prop><x:a xmlns:x=\"\"/></D:prop></D:propfind>",  // a prefix bound to nothing
        "<propfind xmlns=\"DAV:\"><prop/>",  // never closed
        "<!DOCTYPE x [<!ENTITY a \"b\">]><propfind xmlns=\"DAV:\"/>",  // no DOCTYPE, no entities
        "<other xmlns=\"DAV:\"/>"  // not a propfind
    ])
    func aMalformedBodyIsABadRequest(_ body: String) {
        #expect(throws: XferError.self) { try DavXML.propfind(body) }
    }

    @Test func namesAndTextAreEscaped() {
        #expect(DavXML.escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c&apos;")
        #expect(
            DavRoutes.href(try! ContainerName("box"), "odd names/100% #1.txt", collection: false)
                == "/dav/box/odd%20names/100%25%20%231.txt")
    }

    func basic(_ token: String) -> String { "Basic " + Data("anyone:\(token)".utf8).base64EncodedString() }

    @Test func onlyAnAccountTokenSignsIn() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        try await fixture.application.test(.router) { client in
            try await client.execute(uri: "/dav/box/", method: HTTPRequest.Method("PROPFIND")!, headers: [:]) {
                response in
                #expect(response.status == .unauthorized)
                #expect(response.headers[.wwwAuthenticate]?.hasPrefix("Basic ") == true)
            }
            try await client.execute(
                uri: "/dav/box/", method: HTTPRequest.Method("PROPFIND")!,
                headers: [.authorization: basic(fixture.adminToken)]
            ) { response in
                #expect(response.status == .unauthorized, "the admin token has no documents")
            }
            try await client.execute(
                uri: "/dav/box/", method: HTTPRequest.Method("PROPFIND")!,
                headers: [.authorization: basic(fixture.token), HTTPField.Name("Depth")!: "1"]
            ) { response in
                #expect(response.status.code == 207)
            }
        }
    }

    @Test func aPutIsAVersionOfTheDocumentsScopeAndADeleteKeepsTheHistory() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let account = try await fixture.data.metadata.principal(tokenHash: TokenHash.hash(fixture.token))!.accountID
        let box = try ContainerName("box")
        let auth: HTTPFields = [.authorization: basic(fixture.token)]
        try await fixture.application.test(.router) { client in
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: auth, body: ByteBuffer(string: "one")
            ) { #expect($0.status == .created) }
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: auth, body: ByteBuffer(string: "two!")
            ) { #expect($0.status == .noContent) }
            let info = try await fixture.data.metadata.document(
                account: account, container: box, path: try DocumentPath("Documents/a.txt"), version: nil)
            #expect(info.version == 2 && info.size == 4 && info.device == "webdav" && info.baseVersion == 1)
            try await client.execute(uri: "/dav/box/a.txt", method: .get, headers: auth) { response in
                #expect(String(buffer: response.body) == "two!")
            }
            try await client.execute(
                uri: "/dav/box/a.txt", method: .get,
                headers: [.authorization: basic(fixture.token), .range: "bytes=1-2"]
            ) { response in
                #expect(response.status == .partialContent && String(buffer: response.body) == "wo")
            }
            // Conditional writes: a client that names what it saw never overwrites another version.
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put,
                headers: [.authorization: basic(fixture.token), .ifMatch: "\"stale\""],
                body: ByteBuffer(string: "lost?")
            ) { #expect($0.status == .preconditionFailed) }
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: [.authorization: basic(fixture.token), .ifNoneMatch: "*"],
                body: ByteBuffer(string: "lost?")
            ) { #expect($0.status == .preconditionFailed) }
            let etag = DavRoutes.etag(
                try await fixture.data.metadata.document(
                    account: account, container: box, path: try DocumentPath("Documents/a.txt"), version: nil))
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: [.authorization: basic(fixture.token), .ifMatch: etag],
                body: ByteBuffer(string: "two!")
            ) { #expect($0.status == .noContent) }
            #expect(
                try await fixture.data.metadata.document(
                    account: account, container: box, path: try DocumentPath("Documents/a.txt"), version: nil
                ).version == 3)
            try await client.execute(
                uri: "/dav/box/missing/b.txt", method: .put, headers: auth, body: ByteBuffer(string: "x")
            ) {
                #expect($0.status == .conflict, "no parent folder")
            }
            try await client.execute(
                uri: "/dav/box/../Data/x", method: .put, headers: auth, body: ByteBuffer(string: "x")
            ) {
                #expect($0.status.code >= 400 && $0.status.code < 500)
            }
            try await client.execute(uri: "/dav/box/a.txt", method: .delete, headers: auth) {
                #expect($0.status == .noContent)
            }
            let versions = try await fixture.data.metadata.versions(
                account: account, container: box, path: try DocumentPath("Documents/a.txt"))
            #expect(
                versions.versions.map(\.state).contains(.deleted) && versions.versions.count == 4,
                "the deletion is a version; the others stay")
            try await client.execute(uri: "/dav/box/a.txt", method: .get, headers: auth) {
                #expect($0.status == .notFound)
            }
        }
    }

    /// A move onto a folder that holds the source, a partial PUT, and names that begin with a
    /// combining mark (a Character comparison would join it to the "/") change nothing they
    /// should not.
    @Test func hostileCopiesMovesAndNamesLoseNothing() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let account = try await fixture.data.metadata.principal(tokenHash: TokenHash.hash(fixture.token))!.accountID
        let box = try ContainerName("box")
        let auth: HTTPFields = [.authorization: basic(fixture.token)]
        let mkcol = HTTPRequest.Method("MKCOL")!
        let move = HTTPRequest.Method("MOVE")!
        @Sendable func live(_ path: String) async throws -> Bool {
            let info = try? await fixture.data.metadata.document(
                account: account, container: box, path: try DocumentPath(path), version: nil)
            return info?.state == .current
        }
        try await fixture.application.test(.router) { client in
            try await client.execute(uri: "/dav/box/a", method: mkcol, headers: auth) { #expect($0.status == .created) }
            try await client.execute(uri: "/dav/box/a/b", method: mkcol, headers: auth) {
                #expect($0.status == .created)
            }
            try await client.execute(
                uri: "/dav/box/a/b/f.txt", method: .put, headers: auth, body: ByteBuffer(string: "f")
            ) { #expect($0.status == .created) }
            try await client.execute(
                uri: "/dav/box/a/x", method: .put, headers: auth, body: ByteBuffer(string: "plain")
            ) { #expect($0.status == .created) }
            try await client.execute(
                uri: "/dav/box/a/%CC%81x", method: .put, headers: auth, body: ByteBuffer(string: "marked")
            ) { #expect($0.status == .created) }
            // Onto the folder that holds it: refused, and all of a stays.
            try await client.execute(
                uri: "/dav/box/a/b", method: move,
                headers: [.authorization: basic(fixture.token), HTTPField.Name("Destination")!: "/dav/box/a"]
            ) {
                #expect($0.status == .forbidden)
            }
            let kept = [
                try await live("Documents/a/b/f.txt"), try await live("Documents/a/x"),
                try await live("Documents/a/\u{301}x")
            ]
            #expect(kept == [true, true, true])
            try await client.execute(
                uri: "/dav/box/a/x", method: .put,
                headers: [.authorization: basic(fixture.token), .contentRange: "bytes 0-1/5"],
                body: ByteBuffer(string: "PL")
            ) { #expect($0.status == .badRequest) }
            // The whole folder moved: both names arrive, each with its own bytes.
            try await client.execute(
                uri: "/dav/box/a", method: move,
                headers: [.authorization: basic(fixture.token), HTTPField.Name("Destination")!: "/dav/box/c"]
            ) {
                #expect($0.status == .created)
            }
            try await client.execute(uri: "/dav/box/c/x", method: .get, headers: auth) {
                #expect(String(buffer: $0.body) == "plain")
            }
            try await client.execute(uri: "/dav/box/c/%CC%81x", method: .get, headers: auth) {
                #expect(String(buffer: $0.body) == "marked")
            }
            let moved = [try await live("Documents/a/x"), try await live("Documents/c/b/f.txt")]
            #expect(moved == [false, true])
        }
    }

    @Test func withoutTheFeatureThereIsNoDav() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        var limits = ServerLimits()
        limits.features.remove(.webdav)
        try await Application(router: XferServer.router(data: fixture.data, limits: limits)).test(.router) { client in
            try await client.execute(
                uri: "/dav/box/a.txt", method: .put, headers: [.authorization: basic(fixture.token)],
                body: ByteBuffer(string: "x")
            ) { #expect($0.status == .notFound) }
        }
    }

    @Test func anEncryptedContainerIsRefused() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let account = try await fixture.data.metadata.principal(tokenHash: TokenHash.hash(fixture.token))!.accountID
        try await fixture.data.metadata.setContainerKey(
            account: account, container: try ContainerName("sealed"), wrapped: Array(repeating: 1, count: 40),
            previous: nil, keyID: "k1")
        try await fixture.application.test(.router) { client in
            try await client.execute(
                uri: "/dav/sealed/", method: HTTPRequest.Method("PROPFIND")!,
                headers: [.authorization: basic(fixture.token), HTTPField.Name("Depth")!: "0"]
            ) { response in
                #expect(response.status.code == 403 || response.status.code == 409)
                #expect(String(buffer: response.body).contains("end-to-end encrypted"))
            }
        }
    }
}
