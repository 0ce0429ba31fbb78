import Foundation
import XferCore

extension SealingKeys {
    /// Makes a new random key and writes it to a new key file at `path` (mode 0600, fsynced),
    /// never over an existing file: a key file overwritten is data lost.
    /// - Returns: The key written.
    /// - Throws: `already_exists` if `path` exists; `io` if it cannot be written.
    public static func createKeyFile(at path: String) throws -> SealingKey {
        var info = stat()
        guard lstat(path, &info) != 0 else {
            throw XferError(
                .alreadyExists,
                "\(path) exists; a key file is never overwritten (its key may still seal data). Choose another name")
        }
        let key = SealingKey.generate()
        do {
            try PrivateFiles.writeSecret(keyFileText(key), to: path, replacing: false)
        } catch let error as XferError where (error.cause as? SystemErrno)?.rawValue == EEXIST {
            throw XferError(
                .alreadyExists,
                "\(path) exists; a key file is never overwritten (its key may still seal data). Choose another name")
        }
        return key
    }
}
