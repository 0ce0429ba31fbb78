/// Text made safe to stand inside XML or HTML markup, escaped scalar by scalar.
///
/// Swift compares strings by `Character`: a `<` that a combining mark follows (U+0301), or a
/// prepending character precedes (U+0600), is one `Character` with it and not equal to `<`,
/// yet every XML or HTML parser reads the `<`. Escaping by scalar leaves no such markup raw.
public enum MarkupText {
    /// `text` with `&`, `<`, `>`, `"` and `'` escaped; `apostrophe` is how `'` is written
    /// (`&apos;` in XML, `&#39;` in HTML, which has no `&apos;` before HTML5).
    public static func escaped(_ text: String, apostrophe: String = "&apos;") -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out.append(contentsOf: "&amp;".unicodeScalars)
            case "<": out.append(contentsOf: "&lt;".unicodeScalars)
            case ">": out.append(contentsOf: "&gt;".unicodeScalars)
            case "\"": out.append(contentsOf: "&quot;".unicodeScalars)
            case "'": out.append(contentsOf: apostrophe.unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
