import XferCore
import XferProtocol

/// How values stored as text map to Swift types, the same for every backend. A value this
/// build does not know (a newer server's, a damaged row) is an error, never a guess: reading
/// an unknown state as "uploading" would hide a committed version.
enum Stored {
    /// A version's state.
    static func state(_ text: String) throws -> VersionState {
        guard let state = VersionState(rawValue: text) else {
            throw XferError(
                .internal, "the metadata store holds a version in state \"\(text)\", which this server does not know")
        }
        return state
    }

    /// A document's kind.
    static func kind(_ text: String) throws -> DocumentKind {
        guard let kind = DocumentKind(rawValue: text) else {
            throw XferError(
                .internal, "the metadata store holds a document of kind \"\(text)\", which this server does not know")
        }
        return kind
    }
}
