import Foundation
import Testing
import XferTestSupport

/// fio's own checks on a mount: what it writes, sequentially and at random offsets, it reads
/// back and verifies through the mount that wrote it, and again through a second mount with
/// a state directory of its own, whose every byte comes from the server.
extension MountCommandTests {
    /// fio jobs that write a pattern with a checksum in every block, one sequential and one at
    /// random offsets, and the read jobs that check it: fio verifies every block a read job
    /// reads against the header and checksum the write put there.
    static let fioJobs = [
        (write: "--name=sequential --filename=seq.dat --rw=write --bs=1M --size=96M", read: "--rw=read"),
        (write: "--name=random --filename=rand.dat --rw=randwrite --bs=8k --size=32M", read: "--rw=randread")
    ]

    /// Runs `job` in `directory` with fio's verification (a write job reads back what it wrote).
    func fio(_ job: String, in directory: String) throws -> (status: Int32, output: String) {
        try shell(
            "cd '\(directory)' && fio \(job) --ioengine=psync --fallocate=none --verify=crc32c --do_verify=1"
                + " --verify_fatal=1 --verify_state_save=0 --output-format=terse")
    }

    @Test(
        "fio writes with verify through a mount, sequential and random, and verifies it again through a fresh mount",
        .enabled(if: (try? shell("command -v fio").status) == 0, "fio is not installed (tools/setup.sh installs it)"))
    func fioVerifies() throws {
        let server = try ServerProcess()
        let mount = try MountedContainer(server)
        let documents = mount.directory + "/Documents"
        try FileManager.default.createDirectory(atPath: documents, withIntermediateDirectories: true)
        for job in Self.fioJobs {
            let written = try fio(job.write, in: documents)
            #expect(written.status == 0, "\(job): \(written.output)")
        }
        try waitForQueue(server, "uploads did not finish")
        #expect(try mount.stop().status == 0)

        let fresh = try MountedContainer(
            server, arguments: ["--read-only"], environment: ["XFER_STATE_DIR": server.path("fresh-state")])
        let before = try server.downloadedBytes()
        for job in Self.fioJobs {
            let verified = try fio(job.write + " " + job.read, in: fresh.directory + "/Documents")
            #expect(verified.status == 0, "\(job): \(verified.output)")
        }
        let moved = try server.downloadedBytes() - before
        #expect(moved >= 100 << 20, "verifying 128 MiB through a fresh mount moved \(moved) bytes")
        #expect(try fresh.stop().status == 0)
    }
}
