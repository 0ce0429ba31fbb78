import Foundation
import XferCore

/// Text that reaches a terminal through this program is made inert first: anything a server
/// sent (an error message, a device name, a key) could hold escape sequences that clear the
/// screen, recolour it, retitle the window or fake a line of output. Every character a name
/// may not hold (``DocumentPathRules/isRefused(_:)``: controls, separators, bidirectional
/// formatting) except a tab is written as its JSON escape `\uXXXX`, which also keeps `--json`
/// output valid JSON.
enum TerminalText {
    /// `text` with every refused character escaped.
    static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var result = ""
        result.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            if needsEscape(scalar) {
                let hex = String(scalar.value, radix: 16, uppercase: false)
                result += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar != "\t" && DocumentPathRules.isRefused(scalar)
    }
}

/// Every `print` of the command-line tool: its items escaped (``TerminalText``), one line.
/// This shadows the standard library's within this module, so no command can forget it.
func print(_ items: Any..., separator: String = " ", terminator: String = "\n") {
    Swift.print(TerminalText.escape(items.map { "\($0)" }.joined(separator: separator)), terminator: terminator)
}

/// Writes `xfer: MESSAGE` as one line on standard error, escaped (``TerminalText``).
func printError(_ message: String) {
    FileHandle.standardError.write(Data("xfer: \(TerminalText.escape(message))\n".utf8))
}
