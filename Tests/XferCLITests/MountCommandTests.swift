import Foundation
import Testing
import XferTestSupport

/// `xfer mount` running as a child process against a ``ServerProcess``, on a directory of its own.
final class MountedContainer {
    let directory: String
    let process: ChildProcess

    /// Mounts (with extra `arguments` and `environment`) and waits until the kernel shows the mount.
    init(_ server: ServerProcess, arguments: [String] = [], environment: [String: String] = [:]) throws {
        directory = server.path("mnt-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        process = try server.start(["mount", directory] + arguments, environment: environment)
        let deadline = Date().addingTimeInterval(30)
        while !Self.isMounted(directory) {
            guard process.isRunning, Date() < deadline else {
                throw MountTestError.notMounted(Self.output(process.standardError))
            }
            usleep(20_000)
        }
    }

    /// Whether the kernel has a mount at `path`.
    static func isMounted(_ path: String) -> Bool {
        guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
        return table.split(separator: "\n").contains { line in
            let fields = line.split(separator: " ")
            return fields.count > 4 && fields[4] == path
        }
    }

    /// Stops the mount with `signal` (or, given none, `fusermount3 -u`) and waits for it to end.
    /// - Returns: Its exit status and what it printed on stderr.
    func stop(signal: Int32? = SIGTERM) throws -> (status: Int32, stderr: String) {
        if let signal {
            kill(process.processIdentifier, signal)
        } else {
            #expect(try shell("fusermount3 -u '\(directory)'").status == 0)
        }
        process.waitUntilExit()
        return (process.terminationStatus, Self.output(process.standardError))
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGTERM) }
        process.waitUntilExit()
        if Self.isMounted(directory) { _ = try? shell("fusermount3 -u -z '\(directory)'") }
    }

    static func output(_ pipe: Any?) -> String {
        guard let pipe = pipe as? Pipe else { return "" }
        return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}

enum MountTestError: Error {
    case notMounted(String)
}

/// Runs `command` with bash; its status and standard output and error together.
@discardableResult
func shell(_ command: String) throws -> (status: Int32, output: String) {
    let child = ChildProcess()
    child.executableURL = URL(fileURLWithPath: "/bin/bash")
    child.arguments = ["-c", "{ " + command + "\n} 2>&1"]
    let output = Pipe()
    child.standardOutput = output
    try child.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    child.waitUntilExit()
    return (child.terminationStatus, text)
}

@Suite(.serialized) struct MountCommandTests {
    /// A tree of what a container holds: a package with a subdirectory, an empty directory, a
    /// symlink and an empty file; a large file; a symlink document; a Data/ document.
    func pushSample(_ server: ServerProcess) throws -> String {
        let source = server.path("source")
        try shell(
            """
            set -e; mkdir -p '\(source)/Proj.pkg/sub' '\(source)/Proj.pkg/empty'
            echo hello > '\(source)/Proj.pkg/a.txt'; printf 'deep' > '\(source)/Proj.pkg/sub/b.txt'
            : > '\(source)/Proj.pkg/zero'; chmod 600 '\(source)/Proj.pkg/sub/b.txt'
            ln -s a.txt '\(source)/Proj.pkg/link'; ln -s Proj.pkg '\(source)/alias'
            """)
        try randomFile(source + "/big.bin", megabytes: 5, seed: 11)
        for (path, name) in [
            ("Proj.pkg", "Documents/Proj.pkg"), ("big.bin", "Documents/big.bin"), ("alias", "Documents/alias"),
            ("Proj.pkg/a.txt", "Data/settings.txt")
        ] {
            let push = try server.run("push", source + "/" + path, name, "-q")
            #expect(push.status == 0, "\(push.stderr)")
        }
        return source
    }

    @Test("programs list and copy out of a mount what was pushed: ls -lR, cp -a, rsync -a, tar")
    func programsReadTheMount() throws {
        let server = try ServerProcess()
        let source = try pushSample(server)
        let mount = try MountedContainer(server, arguments: ["--read-only"])
        let root = mount.directory
        let listing = try shell("ls -lR '\(root)'")
        #expect(listing.status == 0 && listing.output.contains("big.bin") && listing.output.contains("settings.txt"))
        #expect(try shell("readlink '\(root)/Documents/alias'").output == "Proj.pkg\n")
        #expect(try shell("stat -c %a '\(root)/Documents/Proj.pkg/sub/b.txt'").output == "600\n")
        #expect(
            try shell("test -d '\(root)/Documents/Proj.pkg/empty' && test ! -s '\(root)/Documents/Proj.pkg/zero'")
                .status == 0)
        let copy = server.path("copy")
        let rsynced = server.path("rsynced")
        #expect(try shell("cp -a '\(root)/Documents' '\(copy)'").status == 0)
        #expect(try shell("rsync -a '\(root)/Documents/' '\(rsynced)/'").status == 0)
        for target in [copy, rsynced] {
            let diff = try shell(
                "diff -r --no-dereference '\(source)/Proj.pkg' '\(target)/Proj.pkg' && cmp '\(source)/big.bin' '\(target)/big.bin'"
            )
            #expect(diff.status == 0, "\(diff.output)")
        }
        #expect(try shell("tar -C '\(root)/Documents' -cf - Proj.pkg | tar -tf - | grep -c .").output == "7\n")
        #expect(try shell("cmp '\(root)/Data/settings.txt' '\(source)/Proj.pkg/a.txt'").status == 0)
        #expect(try shell("touch '\(root)/Documents/new' || echo refused").output.contains("Read-only file system"))
        let stopped = try mount.stop()
        #expect(stopped.status == 0 && !MountedContainer.isMounted(root), "\(stopped.stderr)")
        #expect(stopped.stderr.contains("chunks fetched"))
    }

    @Test("a read at an offset moves about what it covers; reading it again moves nothing")
    func readsFetchWhatTheyCover() throws {
        let server = try ServerProcess()
        try randomFile(server.path("large.bin"), megabytes: 48, seed: 21)
        #expect(try server.run("push", server.path("large.bin"), "Documents/large.bin", "-q").status == 0)
        let mount = try MountedContainer(server)
        let file = mount.directory + "/Documents/large.bin"
        let before = try server.downloadedBytes()
        #expect(try shell("dd if='\(file)' of='\(server.path("piece"))' bs=1M skip=20 count=1 status=none").status == 0)
        let moved = try server.downloadedBytes() - before
        #expect(moved >= 1 << 20 && moved < 3 << 20, "a 1 MiB read moved \(moved) bytes")
        #expect(
            try shell(
                "cmp '\(server.path("piece"))' <(dd if='\(server.path("large.bin"))' bs=1M skip=20 count=1 status=none)"
            ).status == 0)
        #expect(try shell("cmp '\(file)' '\(server.path("large.bin"))'").status == 0)
        let total = try server.downloadedBytes() - before
        #expect(total < 50 << 20, "reading 48 MiB moved \(total) bytes")
        // Mounted again (nothing in memory), the file comes from the on-disk cache.
        #expect(try mount.stop().status == 0)
        let again = try MountedContainer(server)
        #expect(try shell("cmp '\(again.directory)/Documents/large.bin' '\(server.path("large.bin"))'").status == 0)
        #expect(try server.downloadedBytes() - before == total)
    }

    @Test("another device's push shows within a second; an open file keeps the version it opened")
    func changesShowAndOpenFilesKeepTheirVersion() throws {
        let server = try ServerProcess()
        try randomFile(server.path("v1.bin"), megabytes: 3, seed: 31)
        try randomFile(server.path("v2.bin"), megabytes: 3, seed: 32)
        #expect(try server.run("push", server.path("v1.bin"), "Documents/doc.bin", "-q").status == 0)
        let mount = try MountedContainer(server)
        let file = mount.directory + "/Documents/doc.bin"
        let open = try #require(FileHandle(forReadingAtPath: file))
        let head = try open.read(upToCount: 4096)
        try server.waitForParkedPolls()
        #expect(try server.run("push", server.path("v2.bin"), "Documents/doc.bin", "-q").status == 0)
        #expect(try server.run("push", server.path("v1.bin"), "Documents/more/new.bin", "-q").status == 0)
        let pushed = Date()
        while try shell(
            "cmp -s '\(file)' '\(server.path("v2.bin"))' && test -f '\(mount.directory)/Documents/more/new.bin'"
        ).status != 0 {
            #expect(Date().timeIntervalSince(pushed) < 5, "the mount did not show the new version")
            guard Date().timeIntervalSince(pushed) < 5 else { break }
            usleep(20_000)
        }
        let shown = Date().timeIntervalSince(pushed)
        #expect(shown < 1.5, "the new version showed after \(shown) s")
        let rest = try open.readToEnd() ?? Data()
        #expect((head ?? Data()) + rest == (try Data(contentsOf: URL(fileURLWithPath: server.path("v1.bin")))))
        try open.close()
    }

    @Test("fusermount3 -u ends the mount cleanly; a mount point that is not a directory is refused")
    func unmountAndRefusals() throws {
        let server = try ServerProcess()
        _ = try pushSample(server)
        let mount = try MountedContainer(server)
        let stopped = try mount.stop(signal: nil)
        #expect(stopped.status == 0, "\(stopped.stderr)")
        let refused = try server.run("mount", server.path("no/such/dir"))
        #expect(refused.status != 0 && refused.stderr.contains("could not mount"), "\(refused.stderr)")
        let interrupted = try MountedContainer(server)
        #expect(try interrupted.stop(signal: SIGINT).status == 0)
        #expect(!MountedContainer.isMounted(interrupted.directory))
    }
}

extension MountCommandTests {
    @Test("a pinned document opens and reads while the server is down; status says remote, cached or pinned")
    func pinning() throws {
        let server = try ServerProcess()
        for name in ["a", "b", "c"] {
            try randomFile(server.path("\(name).bin"), megabytes: 2, seed: UInt64(name.utf8.first!))
            #expect(try server.run("push", server.path("\(name).bin"), "Documents/\(name).bin", "-q").status == 0)
        }
        let mount = try MountedContainer(server, environment: ["XFER_RETRIES": "0"])
        let root = mount.directory
        let pinned = try server.run("mount", "pin", root + "/Documents/a.bin")
        #expect(pinned.status == 0 && pinned.stdout.contains("pinned Documents/a.bin v1"), "\(pinned.stderr)")
        #expect(try shell("cat '\(root)/Documents/b.bin' > /dev/null").status == 0)
        let status = try server.run("status", root)
        #expect(status.status == 0, "\(status.stderr)")
        for line in ["pinned  Documents/a.bin", "cached  Documents/b.bin", "remote  Documents/c.bin"] {
            #expect(status.stdout.contains(line), "\(status.stdout)")
        }
        let json = try server.json(try server.run("mount", "status", "Documents/", "--json"))
        #expect((json["documents"] as? [[String: Any]])?.count == 3)
        server.stopServer()
        #expect(try shell("cmp '\(root)/Documents/a.bin' '\(server.path("a.bin"))'").status == 0)
        #expect(try shell("cat '\(root)/Documents/c.bin' > /dev/null").output.contains("Input/output error"))
        try server.startServer()
        // Back once the server answers again (on a loaded machine the first read may still
        // meet the old connection's failure): within 30 s.
        let back = try shell(
            "for i in $(seq 1 60); do cmp '\(root)/Documents/c.bin' '\(server.path("c.bin"))' && exit 0; sleep 0.5; done; exit 1"
        )
        #expect(back.status == 0, "\(back.output)")
        let unpinned = try server.run("mount", "unpin", "Documents/a.bin")
        #expect(unpinned.status == 0 && unpinned.stdout.contains("unpinned Documents/a.bin"))
        #expect(try server.run("status", root).stdout.contains("cached  Documents/a.bin"))
    }
}

extension MountCommandTests {
    @Test("git clones a repository out of a mount and fsck passes; sqlite3 checks a database in it")
    func gitAndSQLiteReadTheMount() throws {
        let server = try ServerProcess()
        let repository = server.path("repo")
        let database = server.path("notes.db")
        let made = try shell(
            """
            set -e; git init -q '\(repository)'; cd '\(repository)'
            for i in $(seq 1 40); do echo "line $i" > "f$i.txt"; git add "f$i.txt"
              git -c user.name=t -c user.email=t@t commit -qm "c$i"; done
            git repack -adq; git gc -q
            sqlite3 '\(database)' 'CREATE TABLE t (a, b); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) INSERT INTO t SELECT i, randomblob(100) FROM n; CREATE INDEX ta ON t (a);'
            """)
        #expect(made.status == 0, "\(made.output)")
        #expect(try server.run("push", repository, "Documents/repo", "-q").status == 0)
        #expect(try server.run("push", database, "Documents/notes.db", "-q").status == 0)
        let mount = try MountedContainer(server)
        let clone = server.path("clone")
        let cloned = try shell(
            "git clone -q '\(mount.directory)/Documents/repo' '\(clone)' && cd '\(clone)' && git fsck --strict && git status --porcelain && git log --oneline | wc -l"
        )
        #expect(cloned.status == 0 && cloned.output.hasSuffix("40\n"), "\(cloned.output)")
        let checked = try shell(
            "sqlite3 'file:\(mount.directory)/Documents/notes.db?immutable=1' 'PRAGMA integrity_check; SELECT count(*) FROM t;'"
        )
        #expect(checked.output == "ok\n5000\n", "\(checked.output)")
    }
}

/// Writes through a mount, checked from another device's copy of the server.
extension MountCommandTests {
    /// Waits until `check` (a shell command) passes, at most 60 s.
    func eventually(_ check: String, _ comment: Comment? = nil) throws {
        let deadline = Date().addingTimeInterval(60)
        while try shell(check).status != 0 {
            guard Date() < deadline else {
                Issue.record(comment ?? "\(check) did not pass within 60 s")
                return
            }
            usleep(100_000)
        }
    }

    /// Waits until the mount's queue (`STATE/mount-writes`) is empty: everything sent.
    func waitForQueue(_ server: ServerProcess, _ comment: Comment) throws {
        try eventually("test -z \"$(ls -A '\(server.path("state"))'/mount-writes/* 2>/dev/null)\"", comment)
    }

    /// The server's copy of the container, as another device syncs it into `name`.
    func synced(_ server: ServerProcess, _ name: String) throws -> String {
        let copy = server.path(name)
        try? FileManager.default.removeItem(atPath: copy)
        try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: true)
        let sync = try server.run(
            ["sync", copy, "--once"], environment: ["XFER_STATE_DIR": server.path(name + "-state")])
        #expect(sync.status == 0, "\(sync.stderr)")
        return copy
    }

    @Test("cp -a, rsync -a and tar write into a mount; another device gets the same tree")
    func programsWriteTheMount() throws {
        let server = try ServerProcess()
        let source = try pushSample(server)
        try shell("rm -rf '\(source)/Proj.pkg/empty'")  // (an empty directory in a tree copied in is kept too, below)
        let mount = try MountedContainer(server)
        let root = mount.directory
        #expect(
            try shell("mkdir -p '\(root)/Documents/in' && cp -a '\(source)/Proj.pkg' '\(root)/Documents/in/copied'")
                .status == 0)
        #expect(try shell("rsync -a '\(source)/Proj.pkg/' '\(root)/Documents/in/rsynced/'").status == 0)
        #expect(
            try shell(
                "tar -C '\(source)' -cf - Proj.pkg | tar -C '\(root)/Documents/in' -xf - && mkdir '\(root)/Documents/in/empty'"
            ).status == 0)
        #expect(try shell("diff -r --no-dereference '\(source)/Proj.pkg' '\(root)/Documents/in/copied'").status == 0)
        try waitForQueue(server, "uploads did not finish")
        let other = try synced(server, "other")
        for copy in ["copied", "rsynced", "Proj.pkg"] {
            let diff = try shell("diff -r --no-dereference '\(source)/Proj.pkg' '\(other)/Documents/in/\(copy)'")
            #expect(diff.status == 0, "\(copy): \(diff.output)")
        }
        #expect(try shell("test -d '\(other)/Documents/in/empty'").status == 0)
        #expect(try shell("stat -c %a '\(other)/Documents/in/copied/sub/b.txt'").output == "600\n")
        #expect(try mount.stop().status == 0)
    }

    @Test("a file renamed over another replaces it; an unlinked file is deleted; chmod makes a version")
    func renamesAndRemovals() throws {
        let server = try ServerProcess()
        _ = try pushSample(server)
        let mount = try MountedContainer(server)
        let documents = mount.directory + "/Documents"
        #expect(try shell("echo first > '\(documents)/a.txt' && echo second > '\(documents)/b.txt'").status == 0)
        #expect(try shell("mv '\(documents)/a.txt' '\(documents)/b.txt' && rm '\(documents)/big.bin'").status == 0)
        #expect(
            try shell(
                "chmod 600 '\(documents)/Proj.pkg' 2>/dev/null; touch '\(documents)/c' && chmod 640 '\(documents)/c'"
            ).status == 0)
        let replaced = try shell("ls -la '\(documents)'; test ! -e '\(documents)/a.txt' && cat '\(documents)/b.txt'")
        #expect(replaced.output.hasSuffix("\nfirst\n") && replaced.status == 0, "\(replaced.output)")
        // A file renamed while open: what is written after the rename lands at its new name.
        let moved = try shell(
            "exec 3>'\(documents)/open.txt'; echo a >&3; mv '\(documents)/open.txt' '\(documents)/moved.txt'; echo b >&3; exec 3>&-"
        )
        #expect(moved.status == 0, "\(moved.output)")
        try waitForQueue(server, "uploads did not finish")
        let listing = try server.run("ls")
        #expect(
            !listing.stdout.contains("Documents/a.txt") && !listing.stdout.contains("Documents/big.bin"),
            "\(listing.stdout)")
        let other = try synced(server, "other")
        #expect(try shell("cat '\(other)/Documents/b.txt'").output == "first\n")
        #expect(try shell("stat -c %a '\(other)/Documents/c'").output == "640\n")
        #expect(
            try shell("cat '\(other)/Documents/moved.txt' && test ! -e '\(other)/Documents/open.txt'").output
                == "a\nb\n")
    }

    @Test(
        "git clones into a mount (fsck and status clean there and on another device); sqlite3 builds a database in it")
    func gitAndSQLiteWriteTheMount() throws {
        let server = try ServerProcess()
        let repository = server.path("repo")
        #expect(
            try shell(
                """
                set -e; git init -q '\(repository)'; cd '\(repository)'
                for i in $(seq 1 15); do echo "line $i" > "f$i.txt"; git add "f$i.txt"
                  git -c user.name=t -c user.email=t@t commit -qm "c$i"; done
                """
            ).status == 0)
        let mount = try MountedContainer(server)
        let documents = mount.directory + "/Documents"
        try FileManager.default.createDirectory(atPath: documents, withIntermediateDirectories: true)
        let cloned = try shell(
            "git clone -q '\(repository)' '\(documents)/clone' && cd '\(documents)/clone' && git fsck --strict && git status --porcelain && git log --oneline | wc -l"
        )
        #expect(cloned.status == 0 && cloned.output.hasSuffix("15\n"), "\(cloned.output)")
        let built = try shell(
            "sqlite3 '\(documents)/notes.db' 'CREATE TABLE t (a, b); WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3000) INSERT INTO t SELECT i, randomblob(200) FROM n; CREATE INDEX ta ON t (a); PRAGMA integrity_check;'"
        )
        #expect(built.output == "ok\n", "\(built.output)")
        try waitForQueue(server, "uploads did not finish")
        let other = try synced(server, "other")
        let there = try shell(
            "cd '\(other)/Documents/clone' && git fsck --strict && git status --porcelain && sqlite3 '\(other)/Documents/notes.db' 'PRAGMA integrity_check; SELECT count(*) FROM t;'"
        )
        #expect(there.status == 0 && there.output.hasSuffix("ok\n3000\n"), "\(there.output)")
    }

    @Test("files closed before a kill -9 of the mount are uploaded by the next mount")
    func killedMountLosesNothingClosed() throws {
        let server = try ServerProcess()
        _ = try pushSample(server)
        // Offline while writing: the server is stopped, so the closed files can only be queued.
        let mount = try MountedContainer(server, environment: ["XFER_RETRIES": "0"])
        server.stopServer()
        #expect(
            try shell(
                "mkdir -p '\(mount.directory)/Documents' 2>/dev/null; for i in $(seq 1 20); do echo \"file $i\" > '\(mount.directory)/Data/f'$i.txt || exit 1; done"
            ).status == 0)
        kill(mount.process.processIdentifier, SIGKILL)
        mount.process.waitUntilExit()
        _ = try shell("fusermount3 -u -z '\(mount.directory)'")
        try server.startServer()
        let again = try MountedContainer(server)
        try waitForQueue(server, "the queue was not uploaded")
        let other = try synced(server, "other")
        #expect(try shell("cat '\(other)'/Data/f*.txt | wc -l").output == "20\n")
        #expect(try again.stop().status == 0)
    }
}

extension ServerProcess {
    /// The server's `xfer_download_bytes_total`: bytes of chunk frames it sent.
    func downloadedBytes() throws -> Int {
        let admin = try String(contentsOfFile: path("data/admin-token"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let scrape = try shell(
            "curl -sf -H 'Authorization: Bearer \(admin)' \(scheme)://127.0.0.1:\(port)/metrics | grep '^xfer_download_bytes_total '"
        )
        return Int(
            Double(scrape.output.split(separator: " ").last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")
                ?? -1)
    }
}
