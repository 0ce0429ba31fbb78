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

/// WebDAV against a hostile client (docs/SECURITY.md): a multistatus bounded whatever the
/// locks and members, locks bounded per path, markup escaped scalar by scalar, every body limit
/// answered with 413, and answers hardened as the web view's are. tools/suites/attack-suite.py drives
/// the same from outside, on a release build.
@Suite struct DavHardeningTests {
    func basic(_ token: String) -> String { "Basic " + Data("anyone:\(token)".utf8).base64EncodedString() }
    static let propfind = HTTPRequest.Method("PROPFIND")!
    static let sharedLock =
        #"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:shared/></D:lockscope><D:locktype><D:write/></D:locktype><D:owner>OWNER</D:owner></D:lockinfo>"#

    @Test func aFoldersLocksAppearOnceInADepthOneListingAndAPathHoldsFewLocks() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let auth: HTTPFields = [.authorization: basic(fixture.token)]
        try await fixture.application.test(.router) { client in
            for name in ["a.txt", "b.txt", "c.txt"] {
                try await client.execute(
                    uri: "/dav/box/\(name)", method: .put, headers: auth, body: ByteBuffer(string: name)
                ) { #expect($0.status == .created) }
            }
            for index in 0..<DavLock.maximumPerPath {
                try await client.execute(
                    uri: "/dav/box/", method: DavLockTests.lock, headers: auth,
                    body: ByteBuffer(string: Self.sharedLock.replacingOccurrences(of: "OWNER", with: "owner-\(index)"))
                ) {
                    #expect($0.status == .ok)
                }
            }
            try await client.execute(
                uri: "/dav/box/", method: DavLockTests.lock, headers: auth, body: ByteBuffer(string: Self.sharedLock)
            ) {
                #expect($0.status == .contentTooLarge, "one more shared lock on the same folder is refused")
            }
            var depthOne = auth
            depthOne[HTTPField.Name("Depth")!] = "1"
            try await client.execute(uri: "/dav/box/", method: Self.propfind, headers: depthOne) { response in
                #expect(response.status.code == 207)
                let xml = String(buffer: response.body)
                #expect(
                    xml.components(separatedBy: "owner-0").count - 1 == 1,
                    "the root's lock once, in the root's own answer")
                #expect(xml.components(separatedBy: "<D:response>").count - 1 == 4)
                #expect(xml.hasSuffix("</D:multistatus>\n"))
            }
            var depthZero = auth
            depthZero[HTTPField.Name("Depth")!] = "0"
            try await client.execute(uri: "/dav/box/a.txt", method: Self.propfind, headers: depthZero) { response in
                #expect(
                    String(buffer: response.body).contains("owner-3"),
                    "a member asked for alone shows the locks it inherits")
            }
        }
    }

    @Test func markupIsEscapedAndScannedScalarByScalar() throws {
        #expect(DavXML.escape("<\u{301}") == "&lt;\u{301}")
        #expect(DavXML.escape("\u{600}<&") == "\u{600}&lt;&amp;")
        #expect(throws: XferError.self, "a tag hidden behind a prepending mark") {
            try DavXML.elements(#"<D:a xmlns:D="DAV:">"# + "\u{600}<D:response/></D:a>")
        }
        #expect(throws: XferError.self, "a < that a combining mark follows") {
            try DavXML.elements(#"<D:a xmlns:D="DAV:">x"# + "<\u{301}/D:a>")
        }
        #expect(
            try DavXML.elements("<a xmlns=\"x\">caf\u{65}\u{301}\r\n</a>").count == 1,
            "marks on letters and CRLF are text")
    }

    @Test func aNameWithCombinedMarkupListsAsWellFormedXML() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let auth: HTTPFields = [.authorization: basic(fixture.token)]
        let name = "x\u{600}<y&\u{301}z.txt"
        let encoded = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        try await fixture.application.test(.router) { client in
            try await client.execute(
                uri: "/dav/box/\(encoded)", method: .put, headers: auth, body: ByteBuffer(string: "n")
            ) { #expect($0.status == .created) }
            var depthOne = auth
            depthOne[HTTPField.Name("Depth")!] = "1"
            try await client.execute(uri: "/dav/box/", method: Self.propfind, headers: depthOne) { response in
                let xml = String(buffer: response.body)
                #expect(!xml.unicodeScalars.split(separator: "<").contains { $0.first == "y" }, "no raw < before the y")
                #expect(xml.contains("\u{600}&lt;y&amp;\u{301}z.txt"))
            }
        }
    }

    @Test func bodiesPastTheirLimitAre413AndGetIsHardened() async throws {
        let fixture = try await RouteFixture.make()
        defer { fixture.remove() }
        let auth: HTTPFields = [.authorization: basic(fixture.token)]
        try await fixture.application.test(.router) { client in
            let big = ByteBuffer(
                string: "<D:propfind xmlns:D=\"DAV:\"><D:allprop/></D:propfind>"
                    + String(repeating: " ", count: DavXML.maximumBody))
            for method in [Self.propfind, HTTPRequest.Method("PROPPATCH")!, DavLockTests.lock] {
                try await client.execute(uri: "/dav/box/", method: method, headers: auth, body: big) {
                    #expect($0.status == .contentTooLarge, "\(method)")
                }
            }
            try await client.execute(
                uri: "/dav/box/page.html", method: .put, headers: auth,
                body: ByteBuffer(string: "<script>alert(1)</script>")
            ) {
                #expect($0.status == .created)
            }
            try await client.execute(uri: "/dav/box/page.html", method: .get, headers: auth) { response in
                #expect(response.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff")
                #expect(
                    response.headers[HTTPField.Name("Content-Security-Policy")!]?.contains("default-src 'none'") == true
                )
                #expect(response.headers[.contentDisposition]?.hasPrefix("attachment; filename=\"page.html\"") == true)
            }
            try await client.execute(uri: "/dav/box/none", method: .get, headers: auth) { response in
                #expect(
                    response.status == .notFound
                        && response.headers[HTTPField.Name("X-Content-Type-Options")!] == "nosniff", "errors too")
            }
        }
    }
}
