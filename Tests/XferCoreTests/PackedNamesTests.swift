import Testing

@testable import XferCore

/// Packed names compare as their bytes do, whatever they are compared with.
@Suite struct PackedNamesTests {
    @Test func namesCompareBytewiseWithNamesStringsAndAnySequence() {
        let words = ["", "a", "a/b", "a/b/c", "ab", "b", "é", "z", "\u{7F}", "a\u{0}"]
        var names = PackedNames()
        for word in words { names.append(word.utf8) }
        for (i, word) in words.enumerated() {
            for (j, other) in words.enumerated() {
                let precedes = Array(word.utf8).lexicographicallyPrecedes(Array(other.utf8))
                #expect(names[i].lexicographicallyPrecedes(names[j]) == precedes, "\(word) < \(other)")
                #expect(names[i].lexicographicallyPrecedes(other.utf8) == precedes)
                #expect(
                    names[i].lexicographicallyPrecedes(Array(other.utf8).lazy.map { $0 }) == precedes,
                    "element by element")
                #expect(names[i].elementsEqual(names[j]) == (i == j))
                #expect(names[i].elementsEqual(other.utf8) == (word == other))
                #expect(names[i].elementsEqual(Array(other.utf8).lazy.map { $0 }) == (word == other))
            }
            #expect(names.string(at: i) == word && Array(names[i]) == Array(word.utf8))
        }
        let sorted = words.sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
        var ordered = PackedNames()
        for word in sorted { ordered.append(word.utf8) }
        for (index, word) in sorted.enumerated() { #expect(ordered.index(of: word.utf8) == index) }
        #expect(ordered.index(of: "a/".utf8) == nil)
    }
}
