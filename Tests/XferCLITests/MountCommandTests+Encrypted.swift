import Foundation
import Testing
import XferTestSupport

/// An end-to-end encrypted container mounted on a device holding its key: the server's listing
/// holds sizes, modes, times and symlinks sealed, so the mount shows each from its manifest.
extension MountCommandTests {
    @Test(
        "an end-to-end encrypted container mounts: true sizes, modes, times and symlinks; writes (a package's too) reach another device"
    )
    func encryptedContainerMounts() throws {
        let server = try ServerProcess()
        let made = try server.run(
            "container", "create", "vault", "--encrypted", environment: ["XFER_PASSPHRASE": "correct horse"])
        #expect(made.status == 0, "\(made.stderr)")
        let vault = ["XFER_CONTAINER": "vault"]
        let source = server.path("source")
        try shell(
            """
            set -e; mkdir -p '\(source)/Proj.pkg/sub'; echo hello > '\(source)/Proj.pkg/a.txt'
            chmod 640 '\(source)/Proj.pkg/a.txt'; : > '\(source)/empty'; ln -s target '\(source)/link'
            chmod 600 '\(source)/empty'; touch -d '2020-02-02 02:02:02' '\(source)/empty'
            """)
        try randomFile(source + "/big.bin", megabytes: 3, seed: 41)
        for name in ["Proj.pkg", "empty", "link", "big.bin"] {
            let push = try server.run(["push", source + "/" + name, "Documents/" + name, "-q"], environment: vault)
            #expect(push.status == 0, "\(push.stderr)")
        }
        let mount = try MountedContainer(server, arguments: ["--container", "vault"])
        let documents = mount.directory + "/Documents"
        for name in ["empty", "big.bin", "Proj.pkg/a.txt", "link"] {
            let format = "stat -c '%F %s %a %Y'"
            let mine = try shell("\(format) '\(documents)/\(name)'").output
            #expect(mine == (try shell("\(format) '\(source)/\(name)'").output), "\(name): \(mine)")
        }
        #expect(
            try shell("readlink '\(documents)/link' && find '\(documents)' -type l").output
                == "target\n\(documents)/link\n")
        #expect(try shell("cmp '\(documents)/big.bin' '\(source)/big.bin'").status == 0)

        #expect(try shell("echo written in the mount > '\(documents)/new.txt'").status == 0)
        #expect(
            try shell("echo more >> '\(documents)/Proj.pkg/a.txt' && mkdir '\(documents)/Proj.pkg/sub/in'").status == 0)
        #expect(try shell("stat -c %s '\(documents)/new.txt'").output == "21\n")
        try waitForQueue(server, "the upload did not finish")
        #expect(
            try shell("stat -c %s '\(documents)/new.txt'").output == "21\n", "the uploaded file shows its stored size")
        // Another device unlocks the container with the passphrase and gets the file.
        let other = ["XFER_STATE_DIR": server.path("other-state"), "XFER_CONTAINER": "vault"]
        let unlocked = try server.run(
            "key", "unlock", environment: other.merging(["XFER_PASSPHRASE": "correct horse"]) { $1 })
        #expect(unlocked.status == 0, "\(unlocked.stderr)")
        try FileManager.default.createDirectory(atPath: server.path("other"), withIntermediateDirectories: true)
        let synced = try server.run(["sync", server.path("other"), "--once"], environment: other)
        #expect(synced.status == 0, "\(synced.stderr)")
        #expect(try shell("cat '\(server.path("other"))/Documents/new.txt'").output == "written in the mount\n")
        #expect(
            try shell(
                "cat '\(server.path("other"))/Documents/Proj.pkg/a.txt' && test -d '\(server.path("other"))/Documents/Proj.pkg/sub/in'"
            )
            .output == "hello\nmore\n")
        #expect(try mount.stop().status == 0)

        // A device without the key is told how to get it, and mounts nothing.
        let locked = try server.run(
            ["mount", server.path("locked-mnt"), "--container", "vault"],
            environment: ["XFER_STATE_DIR": server.path("locked-state")])
        #expect(locked.status == 4 && locked.stderr.contains("xfer key unlock"), "\(locked.stderr)")
    }
}
