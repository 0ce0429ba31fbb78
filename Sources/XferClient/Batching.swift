import XferCore

/// One document's step within a batch: its own failure is its outcome, but what stops every
/// document (``XferError/stopsEveryDocument``) is thrown.
func documentOutcome<T>(_ body: () async throws -> T) async throws -> Result<T, any Error> {
    do {
        return .success(try await body())
    } catch let error as XferError where error.stopsEveryDocument {
        throw error
    } catch {
        return .failure(error)
    }
}
