import Foundation
import Testing
import XferTestSupport

/// Two devices at once: a mount on one, `xfer sync --watch` on the other, each seeing what the
/// other does while both run.
extension MountCommandTests {
    /// Starts `xfer sync DIR --watch` as another device (a state directory of its own), its
    /// output in a file so that nothing it prints can fill a pipe and stop it.
    func watching(_ server: ServerProcess, _ name: String) throws -> (directory: String, daemon: ChildProcess) {
        let directory = server.path(name)
        try FileManager.default.createDirectory(atPath: directory + "/Documents", withIntermediateDirectories: true)
        let daemon = ChildProcess()
        daemon.executableURL = URL(fileURLWithPath: "/bin/bash")
        daemon.arguments = [
            "-c", "exec \"$0\" sync \"$1\" --watch > \"$1.log\" 2>&1", XferProcess.binary.path, directory
        ]
        daemon.environment = ProcessInfo.processInfo.environment.merging(server.environment) { $1 }.merging([
            "XFER_STATE_DIR": server.path(name + "-state")
        ]) { $1 }
        try daemon.run()
        return (directory, daemon)
    }

    @Test("a mount and a sync --watch daemon on another device converge while both run")
    func mountAndWatchingDeviceConverge() throws {
        let server = try ServerProcess()
        _ = try pushSample(server)
        let mount = try MountedContainer(server)
        let (other, daemon) = try watching(server, "other")
        defer {
            kill(daemon.processIdentifier, SIGTERM)
            daemon.waitUntilExit()
        }
        let mounted = mount.directory + "/Documents"
        let there = other + "/Documents"
        try eventually("cmp '\(mounted)/big.bin' '\(there)/big.bin'", "the daemon did not get what was pushed")

        // Written in the mount: the other device gets it; written there: the mount shows it.
        #expect(try shell("echo from the mount > '\(mounted)/m.txt'").status == 0)
        try eventually("test \"$(cat '\(there)/m.txt' 2>/dev/null)\" = 'from the mount'", "m.txt did not arrive")
        #expect(try shell("mkdir -p '\(there)/d' && echo from the daemon > '\(there)/d/w.txt'").status == 0)
        try eventually("test \"$(cat '\(mounted)/d/w.txt' 2>/dev/null)\" = 'from the daemon'", "w.txt did not show")

        // Each edits, renames and removes what the other wrote.
        #expect(try shell("echo edited in the mount >> '\(mounted)/d/w.txt'").status == 0)
        #expect(try shell("mv '\(there)/m.txt' '\(there)/renamed.txt'").status == 0)
        #expect(try shell("rm '\(mounted)/big.bin'").status == 0)
        try eventually("grep -q 'edited in the mount' '\(there)/d/w.txt'", "the edit did not arrive")
        try eventually(
            "test -f '\(mounted)/renamed.txt' && test ! -e '\(mounted)/m.txt' && test ! -e '\(there)/big.bin'",
            "the rename and the removal did not converge")
        try eventually(
            "diff -r --no-dereference '\(mounted)' '\(there)'", "the mount and the other device differ")
        let log = try shell("cat '\(other).log'").output
        #expect(daemon.isRunning, "the daemon exited: \(log)")
        #expect(try mount.stop().status == 0)
    }
}

/// Deletions while the server cannot be reached.
extension MountCommandTests {
    /// Pushes `Documents/NAME.txt` for each name, holding `text(NAME)`.
    func pushText(_ server: ServerProcess, _ names: [String], _ text: (String) -> String) throws {
        for name in names {
            try Data(text(name).utf8).write(to: URL(fileURLWithPath: server.path("\(name).txt")))
            let push = try server.run("push", server.path("\(name).txt"), "Documents/\(name).txt", "-q")
            #expect(push.status == 0, "\(push.stderr)")
        }
    }

    @Test(
        "rm, mv, mkdir, rmdir, ln -s and chmod while the server is down are queued, outlive a kill -9, and reach the server; a file changed elsewhere meanwhile is kept"
    )
    func offlineRemovalsAreQueued() throws {
        let server = try ServerProcess()
        try pushText(server, ["gone", "move", "changed", "kept"]) { "\($0)\n" }
        let mount = try MountedContainer(server, environment: ["XFER_RETRIES": "0"])
        let documents = mount.directory + "/Documents"
        #expect(try shell("cat '\(documents)/move.txt'").output == "move\n")  // cached: a rename copies it
        #expect(try shell("mkdir '\(documents)/perm'").status == 0)
        server.stopServer()
        let offline = try shell(
            """
            set -e; cd '\(documents)'; rm gone.txt changed.txt; mv move.txt moved.txt
            mkdir made; echo inside > made/in.txt; ln -s kept.txt link; mkdir brief; rmdir brief
            chmod 700 perm; ls; readlink link; stat -c %a perm
            """)
        #expect(
            offline.status == 0 && offline.output == "kept.txt\nlink\nmade\nmoved.txt\nperm\nkept.txt\n700\n",
            "\(offline.output)")
        kill(mount.process.processIdentifier, SIGKILL)
        mount.process.waitUntilExit()
        _ = try shell("fusermount3 -u -z '\(mount.directory)'")

        try server.startServer()
        // Another device changes one of the removed files before the queue reaches the server.
        try Data("changed elsewhere\n".utf8).write(to: URL(fileURLWithPath: server.path("changed.txt")))
        #expect(try server.run("push", server.path("changed.txt"), "Documents/changed.txt", "-q").status == 0)
        let again = try MountedContainer(server)
        let shown = again.directory + "/Documents"
        #expect(try shell("test ! -e '\(shown)/gone.txt'").status == 0, "a queued deletion showed again")
        try waitForQueue(server, "the queue was not sent")
        let listing = try server.run("ls", "Documents")
        for name in ["gone.txt", "move.txt"] {
            #expect(!listing.stdout.contains("Documents/\(name)"), "\(name) is still on the server: \(listing.stdout)")
        }
        try eventually("test \"$(cat '\(shown)/changed.txt')\" = 'changed elsewhere'", "the changed file was not kept")
        let other = try synced(server, "other")
        #expect(
            try shell("cd '\(other)/Documents' && ls && cat moved.txt made/in.txt && readlink link && stat -c %a perm")
                .output == "changed.txt\nkept.txt\nlink\nmade\nmoved.txt\nperm\nmove\ninside\nkept.txt\n700\n")
        #expect(try again.stop().status == 0)
    }
}

extension MountCommandTests {
    @Test("a rename that cannot fetch its file while the server is down leaves nothing a later write would take for it")
    func failedRenameLeavesNoStagingFile() throws {
        let server = try ServerProcess()
        try pushText(server, ["a", "b"]) { "\($0) as pushed\n" }
        let mount = try MountedContainer(server, environment: ["XFER_RETRIES": "0"])
        let documents = mount.directory + "/Documents"
        server.stopServer()
        #expect(try shell("mv '\(documents)/a.txt' '\(documents)/b.txt'").status != 0)  // a.txt was never read here
        try server.startServer()
        #expect(try shell("echo appended >> '\(documents)/b.txt'").status == 0)
        #expect(try shell("cat '\(documents)/b.txt'").output == "b as pushed\nappended\n")
        try waitForQueue(server, "the upload did not finish")
        let other = try synced(server, "other")
        #expect(
            try shell("cat '\(other)/Documents/a.txt' '\(other)/Documents/b.txt'").output
                == "a as pushed\nb as pushed\nappended\n")
        #expect(try mount.stop().status == 0)
    }
}

extension MountCommandTests {
    @Test(
        "mv over a file not uploaded yet gives it the moved bytes; a staging file a crash left unfilled is not taken for the file"
    )
    func renamesOverStagedFilesAndCrashLeftovers() throws {
        let server = try ServerProcess()
        try pushText(server, ["a", "b", "c"]) { "\($0) as pushed\n" }
        let mount = try MountedContainer(server, environment: ["XFER_RETRIES": "0"])
        let documents = mount.directory + "/Documents"
        #expect(try shell("cat '\(documents)/a.txt'").output == "a as pushed\n")
        server.stopServer()
        #expect(try shell("echo written offline > '\(documents)/b.txt'").status == 0)  // staged, queued
        #expect(
            try shell("mv '\(documents)/a.txt' '\(documents)/b.txt' && cat '\(documents)/b.txt'").output
                == "a as pushed\n")
        try server.startServer()
        try waitForQueue(server, "the queue was not sent")
        var other = try synced(server, "other")
        #expect(
            try shell("ls '\(other)/Documents' && cat '\(other)/Documents/b.txt'").output
                == "b.txt\nc.txt\na as pushed\n")
        #expect(try mount.stop().status == 0)

        // What a kill -9 in the middle of filling a staging file leaves: the file, no record.
        let key = try shell("printf %s Documents/c.txt | sha256sum | cut -c1-32").output.trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(
            try shell("printf 'half' > \"$(ls -d '\(server.path("state"))'/mount-writes/*)/\(key).data\"").status == 0)
        let again = try MountedContainer(server)
        #expect(try shell("echo appended >> '\(again.directory)/Documents/c.txt'").status == 0)
        #expect(try shell("cat '\(again.directory)/Documents/c.txt'").output == "c as pushed\nappended\n")
        try waitForQueue(server, "the upload did not finish")
        other = try synced(server, "other-2")
        #expect(try shell("cat '\(other)/Documents/c.txt'").output == "c as pushed\nappended\n")
        #expect(try again.stop().status == 0)
    }
}

extension MountCommandTests {
    @Test(
        "a file renamed or removed while its upload runs leaves no version at its old name (an editor's or git's lock file)"
    )
    func renamesDuringUploads() throws {
        let server = try ServerProcess()
        let mount = try MountedContainer(server)
        let race = mount.directory + "/Documents/race"
        try FileManager.default.createDirectory(atPath: race, withIntermediateDirectories: true)
        // Closed, then renamed or removed 0 to 90 ms later: some while their upload runs.
        let storm = try shell(
            """
            set -e; cd '\(race)'
            for i in $(seq 1 30); do echo "content $i" > f$i.lock; sleep 0.0$((i % 10)); mv f$i.lock f$i; done
            for i in $(seq 1 30); do echo "gone $i" > g$i.lock; sleep 0.0$((i % 10)); rm g$i.lock; done
            """)
        #expect(storm.status == 0, "\(storm.output)")
        try waitForQueue(server, "the uploads did not finish")
        let listing = try server.run("ls", "Documents/race")
        #expect(!listing.stdout.contains(".lock"), "\(listing.stdout)")
        #expect(try shell("ls '\(race)' | grep -c lock").output == "0\n")
        let other = try synced(server, "other")
        #expect(try shell("cat '\(other)/Documents/race/f17'").output == "content 17\n")
        #expect(try shell("ls '\(other)/Documents/race' | wc -l").output == "30\n")
        #expect(try mount.stop().status == 0)
    }
}
