import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A child process for tests, spawned with `posix_spawn` directly: the subset of Foundation's
/// `Process` the suites use, under the same names. Foundation's `Process.run()` on Linux reads
/// `/proc/self/fd` with a 256-byte over-read that crashes a test run now and then
/// (swift-corelibs-foundation PR 5472, not in Swift 6.3.1); this one closes the child's other
/// descriptors with `posix_spawn_file_actions_addclosefrom_np` and reads nothing.
public final class ChildProcess: @unchecked Sendable {
    public var executableURL: URL?
    public var arguments: [String] = []
    /// The child's whole environment; the parent's when `nil`.
    public var environment: [String: String]?
    /// Each a `Pipe`, a `FileHandle` (`FileHandle.nullDevice` included) or `nil` (inherited).
    public var standardInput: Any?
    public var standardOutput: Any?
    public var standardError: Any?

    public private(set) var processIdentifier: pid_t = 0
    private let lock = NSLock()
    private var exitStatus: Int32?

    public init() {}

    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let closeFrom: CloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np").map {
        unsafeBitCast($0, to: CloseFrom.self)
    }

    public func run() throws {
        guard let executable = executableURL?.path else { throw POSIXError(.ENOENT) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        func wire(_ handle: Any?, to target: Int32, reading: Bool) {
            switch handle {
            case let pipe as Pipe:
                let end = reading ? pipe.fileHandleForReading : pipe.fileHandleForWriting
                posix_spawn_file_actions_adddup2(&actions, end.fileDescriptor, target)
            case let file as FileHandle where file === FileHandle.nullDevice:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", reading ? O_RDONLY : O_WRONLY, 0)
            case let file as FileHandle:
                posix_spawn_file_actions_adddup2(&actions, file.fileDescriptor, target)
            default:
                break
            }
        }
        wire(standardInput, to: 0, reading: true)
        wire(standardOutput, to: 1, reading: false)
        wire(standardError, to: 2, reading: false)
        // glibc ≥ 2.34 has it; Swift's Glibc module does not declare it, so it is looked up.
        guard let closeFrom = Self.closeFrom else { throw POSIXError(.ENOSYS) }
        _ = closeFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let variables =
            (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { variables.forEach { free($0) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, &attributes, argv, variables)
        guard result == 0 else { throw POSIXError(POSIXErrorCode(rawValue: result) ?? .EIO) }
        processIdentifier = pid
        // The child's ends of its pipes belong to it alone now: without this, reading to the
        // end of its output would wait for a writer that is this process.
        (standardInput as? Pipe)?.fileHandleForReading.closeFile()
        (standardOutput as? Pipe)?.fileHandleForWriting.closeFile()
        (standardError as? Pipe)?.fileHandleForWriting.closeFile()
    }

    /// Reaps the child if it has exited (`hang`: waits for it).
    private func reap(hang: Bool) -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let exitStatus { return exitStatus }
        guard processIdentifier > 0 else { return nil }
        var status: Int32 = 0
        while true {
            let answer = waitpid(processIdentifier, &status, hang ? 0 : WNOHANG)
            if answer == -1 && errno == EINTR { continue }
            guard answer == processIdentifier else { return nil }
            break
        }
        // As Process reports it: the exit code, or the signal that ended it.
        let signal = status & 0x7f
        exitStatus = signal == 0 ? (status >> 8) & 0xff : signal
        return exitStatus
    }

    public func waitUntilExit() { _ = reap(hang: true) }

    public var isRunning: Bool { processIdentifier > 0 && reap(hang: false) == nil }

    public var terminationStatus: Int32 { reap(hang: false) ?? -1 }

    /// SIGTERM.
    public func terminate() { if isRunning { kill(processIdentifier, SIGTERM) } }

    /// SIGINT.
    public func interrupt() { if isRunning { kill(processIdentifier, SIGINT) } }
}
