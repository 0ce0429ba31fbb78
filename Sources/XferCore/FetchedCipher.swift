import CCrypto
import Foundation

/// An AES-256-GCM cipher fetched once; `EVP_CIPHER` objects are immutable and shareable.
struct FetchedCipher: @unchecked Sendable {  // immutable after init
    let cipher: OpaquePointer
}
