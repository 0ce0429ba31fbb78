#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's open-file limit (`RLIMIT_NOFILE`), which bounds how many connections a
/// server can hold.
public enum DescriptorLimit {
    /// Raises the soft limit to the hard limit.
    /// - Returns: The soft limit now in force (what it was if it could not be raised).
    @discardableResult
    public static func raise() -> Int {
        var limit = rlimit()
        guard getrlimit(resourceKind, &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            #if canImport(Darwin)
                // macOS refuses more than OPEN_MAX for an unlimited hard limit.
                if raised.rlim_cur == RLIM_INFINITY { raised.rlim_cur = rlim_t(OPEN_MAX) }
            #endif
            if setrlimit(resourceKind, &raised) == 0 { limit = raised }
        }
        return Int(clamping: limit.rlim_cur)
    }

    #if canImport(Glibc)
        private static let resourceKind = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
        private static let resourceKind = RLIMIT_NOFILE
    #endif
}
