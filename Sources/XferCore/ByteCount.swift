/// A number of bytes, parsed from and printed as text people write ("64K", "1.5 GiB").
public struct ByteCount: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The number of bytes.
    public var value: Int64

    /// Wraps a byte count.
    /// - Parameter value: Bytes.
    public init(_ value: Int64) { self.value = value }

    /// Parses "65536", "64K", "64KiB", "64kb", "1.5G", "2 TiB". Units are powers of 1024.
    /// - Parameter text: The text.
    /// - Returns: `nil` if it is not a non-negative size that fits in 63 bits.
    public init?(parsing text: String) {
        let trimmed = text.filter { $0 != " " && $0 != "_" }
        let numberPart = trimmed.prefix { $0.isNumber || $0 == "." }
        var unit = trimmed.dropFirst(numberPart.count).lowercased()
        if unit.hasSuffix("ib") {
            unit.removeLast(2)
        } else if unit.hasSuffix("b") {
            unit.removeLast()
        }
        let shifts: [String: Int] = ["": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50]
        guard let shift = shifts[unit], let number = Double(numberPart), number >= 0 else { return nil }
        let bytes = (number * Double(Int64(1) << shift)).rounded()
        guard bytes < 9.2e18 else { return nil }
        value = Int64(bytes)
    }

    /// "0 B", "512 B", "64.0 KiB", "1.50 GiB": three significant digits, binary units.
    public var description: String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"]
        var amount = Double(value)
        var index = 0
        while abs(amount) >= 1024, index < units.count - 1 {
            amount /= 1024
            index += 1
        }
        if index == 0 { return "\(value) B" }
        let digits = amount >= 100 ? 0 : amount >= 10 ? 1 : 2
        return "\(Self.format(amount, fractionDigits: digits)) \(units[index])"
    }

    public static func < (lhs: ByteCount, rhs: ByteCount) -> Bool { lhs.value < rhs.value }

    /// Formats with a fixed number of fraction digits, without Foundation.
    static func format(_ number: Double, fractionDigits: Int) -> String {
        var scale = 1.0
        for _ in 0..<fractionDigits { scale *= 10 }
        let scaled = Int64((number * scale).rounded())
        if fractionDigits == 0 { return String(scaled) }
        let whole = scaled / Int64(scale)
        var fraction = String(abs(scaled) % Int64(scale))
        while fraction.count < fractionDigits { fraction = "0" + fraction }
        return "\(whole).\(fraction)"
    }
}
