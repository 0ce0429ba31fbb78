import Foundation
import Testing
import XferTestSupport

/// `xfer share create|list|revoke` against a real server: the link it prints opens the
/// document (page and download) for anyone, until it is revoked.
@Suite struct ShareCommandTests {
    @Test("xfer share makes a link that opens the document without a token, lists it, and revokes it")
    func makeListRevoke() throws {
        let server = try ServerProcess()
        let file = server.path("report.txt")
        try Data("quarterly numbers\n".utf8).write(to: URL(fileURLWithPath: file))
        #expect(try server.run("push", file, "Documents/report.txt", "-q").status == 0)
        let made = try server.run("share", "create", "Documents/report.txt", "--expires", "1d", "--json")
        #expect(made.status == 0, "\(made.stderr)")
        let link = try server.json(made)
        let url = try #require(link["url"] as? String)
        let id = try #require(link["id"] as? Int)
        #expect(try shell("curl -sf '\(url)/download'").output == "quarterly numbers\n")
        #expect(try shell("curl -sf '\(url)'").output.contains("report.txt"))
        let listed = try server.run("share", "list")
        #expect(listed.status == 0 && listed.stdout.contains("Documents/report.txt"), "\(listed.stdout)")
        #expect(try server.run("share", "revoke", String(id)).status == 0)
        #expect(try shell("curl -s -o /dev/null -w '%{http_code}' '\(url)'").output == "404")
        let again = try server.run("share", "revoke", String(id))
        #expect(again.status != 0 && again.stderr.contains("no share link \(id)"), "\(again.stderr)")
        #expect(try server.run("share", "list").stdout.contains("no share links"))
    }

    @Test("a link with a password asks for it; a bad span or a missing document is refused, and makes nothing")
    func passwordAndRefusals() throws {
        let server = try ServerProcess()
        let file = server.path("secret.txt")
        try Data("hidden\n".utf8).write(to: URL(fileURLWithPath: file))
        #expect(try server.run("push", file, "Documents/secret.txt", "-q").status == 0)
        let made = try server.run(
            ["share", "create", "Documents/secret.txt", "--password", "--expires", "0"],
            environment: ["XFER_SHARE_PASSWORD": "open sesame"])
        #expect(made.status == 0, "\(made.stderr)")
        let url = made.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(made.stderr.contains("until revoked") && made.stderr.contains("password"), "\(made.stderr)")
        #expect(try shell("curl -s -o /dev/null -w '%{http_code}' '\(url)/download'").output == "303")
        let tooLong = try server.run("share", "create", "Documents/secret.txt", "--expires", "400d")
        #expect(tooLong.status != 0 && tooLong.stderr.contains("365d"), "\(tooLong.stderr)")
        let missing = try server.run("share", "create", "Documents/none.txt")
        #expect(missing.status != 0 && missing.stderr.contains("no document"), "\(missing.stderr)")
        let listed = try server.json(try server.run("share", "list", "--json"))
        #expect((listed["shares"] as? [[String: Any]])?.count == 1, "only the first was made")
    }
}
