/// A password kept as scrypt of it under a random salt (share links' passwords), in one
/// self-describing text: `scrypt$logN$r$p$SALT$HASH` (hex).
public enum PasswordHash {
    /// The cost of a new hash: 2^15 × 8 × 128 bytes = 32 MiB, tens of milliseconds.
    public static let parameters = try! ScryptParameters(logN: 15, r: 8, p: 1)

    /// A new hash of `password`.
    /// - Throws: `invalid_configuration` for an empty password.
    public static func make(_ password: String, parameters: ScryptParameters = parameters) throws -> String {
        var random = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: 0...255, using: &random) }
        let hash = try Crypto.scrypt(Array(password.utf8), salt: salt, parameters: parameters, count: 32)
        return "scrypt$\(parameters.logN)$\(parameters.r)$\(parameters.p)$\(hex(salt))$\(hex(hash))"
    }

    /// Whether `password` is the one `stored` was made from (compared in constant time); a
    /// stored text that does not parse, or asks more than ``ScryptParameters`` allow, matches nothing.
    public static func verify(_ password: String, against stored: String) -> Bool {
        let fields = stored.split(separator: "$")
        guard fields.count == 6, fields[0] == "scrypt", let logN = UInt8(fields[1]), let r = UInt8(fields[2]),
            let p = UInt8(fields[3]),
            let parameters = try? ScryptParameters(logN: logN, r: r, p: p),
            let salt = bytes(fields[4]), let expected = bytes(fields[5]), !password.isEmpty,
            let hash = try? Crypto.scrypt(
                Array(password.utf8), salt: salt, parameters: parameters, count: expected.count)
        else {
            return false
        }
        var difference: UInt8 = 0
        for (a, b) in zip(hash, expected) { difference |= a ^ b }
        return difference == 0 && hash.count == expected.count
    }

    static func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    static func bytes(_ text: Substring) -> [UInt8]? {
        guard text.utf8.count % 2 == 0, text.utf8.count <= 256 else { return nil }
        var out: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            guard let byte = UInt8(text[index..<next], radix: 16) else { return nil }
            out.append(byte)
            index = next
        }
        return out
    }
}
