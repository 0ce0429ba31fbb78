import FuzzSupport
import XferCore
import XferDav

/// `DavXML`, the WebDAV bodies a client sends: the scanner (`elements`) and what reads
/// PROPFIND, PROPPATCH and LOCK bodies with it; and the escaping of what goes back.
///
/// Every element has an XML name and a parent before it; a PROPFIND asks for distinct names,
/// at most 256; a property a PROPPATCH sets, and a LOCK's owner, are kept as text that stands
/// alone and is sent back to clients, so it must scan again to the same elements, in the same
/// namespaces; `unescape` undoes `escape` (of any text), whose output holds no
/// markup character.
enum DavXMLHarness {
    static let maximumChanges = 64

    static func run(_ bytes: [UInt8]) {
        // What the server does with a body: its bytes as UTF-8, invalid sequences replaced.
        let text = String(decoding: bytes, as: UTF8.self)
        // Of any text, marks after markup characters included: both work scalar by scalar.
        checkEscaping(text)
        guard case .success(let elements) = Fuzz.outcome("DavXML.elements", { try DavXML.elements(text) }) else { return }
        Fuzz.check(elements.count <= DavXML.maximumElements, "\(elements.count) elements, over the limit")
        for (index, element) in elements.enumerated() {
            Fuzz.check(!element.name.local.isEmpty && DavXML.isName(element.name.local), "an element named \(element.name.local)")
            if let parent = element.parentIndex {
                Fuzz.check(parent < index && elements[parent].name == element.parent, "element \(index) has a parent that is not before it")
            } else {
                Fuzz.check(element.parent == nil, "element \(index) has a parent name but no parent")
            }
        }
        if case .success(.properties(let names)) = Fuzz.outcome("DavXML.propfind", { try DavXML.propfind(text) }) {
            Fuzz.check(names.count <= 256 && Set(names).count == names.count, "a PROPFIND asks for \(names.count) names, some twice or too many")
        }
        if case .success(let changes) = Fuzz.outcome("DavXML.proppatch", { try DavXML.proppatch(text, maximumChanges: maximumChanges) }) {
            Fuzz.check(!changes.isEmpty && changes.count <= maximumChanges, "a PROPPATCH of \(changes.count) changes")
            for case .set(let name, let xml) in changes {
                checkStandsAlone(xml, as: name, original: elements, text: text)
            }
        }
        if case .success(let lock) = Fuzz.outcome("DavXML.lockinfo", { try DavXML.lockinfo(text) }), let owner = lock.owner {
            checkStandsAlone(owner, as: DavXML.Name(namespace: DavXML.dav, local: "owner"), original: elements, text: text)
        }
    }

    /// `xml`, an element kept whole, scans alone to the elements it held where it was sent.
    static func checkStandsAlone(_ xml: String, as name: DavXML.Name, original: [DavXML.Element], text: String) {
        let alone = Fuzz.must("the scan of a kept element \(xml.prefix(200))") { try DavXML.elements(xml) }
        Fuzz.check(alone.first?.name == name && alone.first?.parentIndex == nil, "a kept element scans as \(String(describing: alone.first?.name)), not \(name)")
        // The same element in the original: one of that name whose content is the kept one's
        // (two alike may differ in the namespaces in scope on them: any one must match).
        let content = String(xml[alone[0].content])
        let candidates = original.indices.filter { original[$0].name == name && String(text[original[$0].content]) == content }
        Fuzz.check(!candidates.isEmpty, "a kept element's content \(content.prefix(100)) is no element's in the body")
        let matches = candidates.contains { start in
            var subtree = [start]
            for index in (start + 1)..<original.count where original[index].parentIndex.map(subtree.contains) == true { subtree.append(index) }
            return subtree.map { original[$0].name } == alone.map(\.name)
        }
        Fuzz.check(matches, "a kept element \(xml.prefix(200)) scans to \(alone.map(\.name)), not to what it held where it was sent")
    }

    static func checkEscaping(_ text: String) {
        let escaped = DavXML.escape(text)
        Fuzz.check(!escaped.unicodeScalars.contains { "<>\"'".unicodeScalars.contains($0) }, "escape leaves markup in its output")
        Fuzz.check(DavXML.unescape(escaped) == text, "unescape does not undo escape")
    }

    static func seeds() throws -> [(name: String, bytes: [UInt8])] {
        let bodies: [(String, String)] = [
            ("propfind-allprop", #"<?xml version="1.0" encoding="utf-8"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>"#),
            ("propfind-propname", #"<propfind xmlns="DAV:"><propname/></propfind>"#),
            ("propfind-prop", """
                <?xml version="1.0" encoding="utf-8" ?>
                <D:propfind xmlns:D="DAV:" xmlns:Z="http://ns.example.com/z/">
                  <D:prop><D:getcontentlength/><D:getlastmodified/><D:resourcetype/><Z:color/><D:getetag/></D:prop>
                </D:propfind>
                """),
            ("propfind-empty", ""),
            ("proppatch", """
                <?xml version="1.0" encoding="utf-8" ?>
                <D:propertyupdate xmlns:D="DAV:" xmlns:Z="http://ns.example.com/standards/z39.50/">
                  <D:set><D:prop><Z:Authors><Z:Author>Jim Whitehead</Z:Author><Z:Author>Roy Fielding</Z:Author></Z:Authors></D:prop></D:set>
                  <D:remove><D:prop><Z:Copyright-Owner/></D:prop></D:remove>
                </D:propertyupdate>
                """),
            ("proppatch-default-ns", #"<propertyupdate xmlns="DAV:"><set><prop><color xmlns="http://example.com/c">red &amp; &lt;blue&gt; &#x263A;</color><nons xmlns="">x</nons></prop></set></propertyupdate>"#),
            ("proppatch-comment", "<D:propertyupdate xmlns:D='DAV:'><!-- a comment --><D:set><D:prop><q:a xmlns:q='urn:q'><q:b/>text\r\n</q:a></D:prop></D:set></D:propertyupdate>"),
            ("lockinfo-exclusive", """
                <?xml version="1.0" encoding="utf-8" ?>
                <D:lockinfo xmlns:D='DAV:'>
                  <D:lockscope><D:exclusive/></D:lockscope>
                  <D:locktype><D:write/></D:locktype>
                  <D:owner><D:href>http://example.org/~ejw/contact.html</D:href></D:owner>
                </D:lockinfo>
                """),
            ("lockinfo-shared", #"<lockinfo xmlns="DAV:"><lockscope><shared/></lockscope><locktype><write/></locktype><owner>litmus test suite</owner></lockinfo>"#),
            ("unicode", "<D:propfind xmlns:D=\"DAV:\"><D:prop><x:caf\u{e9} xmlns:x=\"urn:\u{1F600}\"/></D:prop></D:propfind>"),
        ]
        return bodies.map { ($0.0, Array($0.1.utf8)) }
    }
}

/// Called by libFuzzer once, before any input: writes the seeds and exits if asked to.
@_cdecl("LLVMFuzzerInitialize")
public func fuzzInitialize(_ argc: UnsafeMutablePointer<CInt>?, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>?) -> CInt {
    Fuzz.writeSeedsIfAsked(DavXMLHarness.seeds)
    return 0
}

/// Called by libFuzzer with each input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    DavXMLHarness.run(Fuzz.bytes(data, size))
    return 0
}
