/// The xfer release this library belongs to.
public enum XferVersion {
    /// Semantic version of this build.
    public static let current = "0.1.0"
}
