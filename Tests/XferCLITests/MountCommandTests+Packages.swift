import Foundation
import Testing
import XferTestSupport

/// Writes inside a package through a mount: programs change files, directories and symlinks in
/// it, and the package goes up as one new version once it rests.
extension MountCommandTests {
    /// The same changes, made in `package` (a path, in a mount or on disk): a file appended to
    /// and its mode changed, a file made in a new directory, a file moved out of a directory
    /// which is then renamed, a file and an empty directory removed, a symlink made.
    static func changePackage(_ package: String) -> String {
        """
        set -e; cd '\(package)'; echo more >> a.txt; chmod 640 a.txt; mkdir new; echo made > new/c.txt
        mv sub/b.txt b2.txt; mv sub renamed; rm zero; rmdir empty; ln -s b2.txt l2; truncate -s 3 new/c.txt
        """
    }

    @Test("programs change a package through a mount; it goes up as one new version another device gets")
    func packageChangedThroughTheMount() throws {
        let server = try ServerProcess()
        let source = try pushSample(server)
        let mount = try MountedContainer(server)
        let package = mount.directory + "/Documents/Proj.pkg"
        // Not looked into yet, it is no empty directory either.
        #expect(try shell("rmdir '\(package)'").output.contains("Directory not empty"))
        let changed = try shell(Self.changePackage(package))
        #expect(changed.status == 0, "\(changed.output)")
        #expect(try shell(Self.changePackage(source + "/Proj.pkg")).status == 0)
        let shown = try shell("diff -r --no-dereference '\(source)/Proj.pkg' '\(package)'")
        #expect(shown.status == 0, "before the upload: \(shown.output)")
        // Out of the package, a rename is refused as across file systems (mv copies instead).
        let across = try shell(
            "python3 -c \"import os; os.rename('\(package)/a.txt', '\(mount.directory)/Documents/out')\"")
        #expect(across.output.contains("Invalid cross-device link"), "\(across.output)")
        try waitForQueue(server, "the package was not uploaded")
        let versions =
            try server.json(try server.run("versions", "Documents/Proj.pkg", "--json"))["versions"] as? [[String: Any]]
            ?? []
        #expect(versions.map { $0["state"] as? String ?? "" } == ["current", "superseded"], "one new version")
        let other = try synced(server, "other")
        let there = try shell("diff -r --no-dereference '\(source)/Proj.pkg' '\(other)/Documents/Proj.pkg'")
        #expect(there.status == 0, "on another device: \(there.output)")
        #expect(try shell("stat -c %a '\(other)/Documents/Proj.pkg/a.txt'").output == "640\n")
        let settled = try shell("diff -r --no-dereference '\(source)/Proj.pkg' '\(package)'")
        #expect(settled.status == 0, "after the upload: \(settled.output)")
        // Removed whole, it is deleted, and nothing sends it back.
        #expect(try shell("rm -r '\(package)'").status == 0)
        try waitForQueue(server, "the removal left something queued")
        #expect(try !server.run("ls").stdout.contains("Proj.pkg"))
        #expect(try mount.stop().status == 0)
    }

    @Test(
        "git commits and sqlite3 writes a database inside a package; another device gets a clean repository and database"
    )
    func programsWorkInsideAPackage() throws {
        let server = try ServerProcess()
        _ = try pushSample(server)
        let mount = try MountedContainer(server)
        let package = mount.directory + "/Documents/Proj.pkg"
        let worked = try shell(
            """
            set -e; cd '\(package)'; git init -q; git add -A; git -c user.name=t -c user.email=t@t commit -qm one
            echo two >> a.txt; git -c user.name=t -c user.email=t@t commit -qam two; git fsck --strict; git status --porcelain
            sqlite3 notes.db 'CREATE TABLE t (a); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 500) INSERT INTO t SELECT i FROM n; PRAGMA integrity_check;'
            """)
        #expect(worked.status == 0 && worked.output == "ok\n", "\(worked.output)")
        try waitForQueue(server, "the package was not uploaded")
        let other = try synced(server, "other")
        let there = try shell(
            "cd '\(other)/Documents/Proj.pkg' && git fsck --strict && git status --porcelain && git log --oneline | wc -l && sqlite3 notes.db 'PRAGMA integrity_check; SELECT count(*) FROM t;'"
        )
        #expect(there.status == 0 && there.output.hasSuffix("2\nok\n500\n"), "\(there.output)")
        #expect(try mount.stop().status == 0)
    }

    @Test(
        "a package opened for writing and closed unwritten shows other devices' versions again, and nothing is queued")
    func packageOpenedAndLeft() throws {
        let server = try ServerProcess()
        let source = try pushSample(server)
        let mount = try MountedContainer(server)
        let package = mount.directory + "/Documents/Proj.pkg"
        #expect(try shell("exec 3>>'\(package)/a.txt'; exec 3>&-").status == 0)
        try waitForQueue(server, "a package checked out and left unchanged stayed queued")
        #expect(try shell("echo theirs > '\(source)/Proj.pkg/theirs.txt'").status == 0)
        #expect(try server.run("push", source + "/Proj.pkg", "Documents/Proj.pkg", "-q").status == 0)
        try eventually("test -e '\(package)/theirs.txt'", "another device's version did not show")
        #expect(try mount.stop().status == 0)
    }

    @Test("a package changed and then the mount killed -9 is sent by the next mount, beside another device's version")
    func packageChangedBeforeAKill() throws {
        let server = try ServerProcess()
        let source = try pushSample(server)
        let mount = try MountedContainer(server)
        let package = mount.directory + "/Documents/Proj.pkg"
        #expect(try shell("echo mine > '\(package)/mine.txt' && echo edited > '\(package)/a.txt'").status == 0)
        kill(mount.process.processIdentifier, SIGKILL)  // within the package's quiet period: nothing sent
        mount.process.waitUntilExit()
        _ = try shell("fusermount3 -u -z '\(mount.directory)'")
        #expect(try shell("echo theirs > '\(source)/Proj.pkg/theirs.txt'").status == 0)
        let theirs = try server.run("push", source + "/Proj.pkg", "Documents/Proj.pkg", "-q")
        #expect(theirs.status == 0, "\(theirs.stderr)")
        let again = try MountedContainer(server)
        try waitForQueue(server, "the package was not sent by the next mount")
        let versions =
            try server.json(try server.run("versions", "Documents/Proj.pkg", "--json"))["versions"] as? [[String: Any]]
            ?? []
        let states = versions.map { $0["state"] as? String ?? "" }
        #expect(states.sorted() == ["conflict", "current", "superseded"], "both kept: \(states)")
        let shown = try shell("cat '\(again.directory)/Documents/Proj.pkg/'{mine,theirs}.txt 2>/dev/null")
        #expect(shown.output == "mine\n" || shown.output == "theirs\n", "one of the two shows: \(shown.output)")
        #expect(try again.stop().status == 0)
    }
}
