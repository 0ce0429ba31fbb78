import Foundation
import Testing
import XferCore
import XferProtocol

@testable import XferServer

/// What each part of a web upload form starts, decided from the fields before it (no server):
/// the session's token first, then at most eight fields, then files named into the folder.
@Suite struct WebUploadPartTests {
    static let token = "t0ken"

    static func part(_ name: String, _ filename: String? = nil, after fields: [String: String]) throws
        -> WebRoutes.UploadPart
    {
        try WebRoutes.uploadPart(named: name, filename: filename, after: fields, csrf: token)
    }

    static func code(_ body: () throws -> WebRoutes.UploadPart) -> XferError.Code? {
        do {
            _ = try body()
            return nil
        } catch let error as XferError {
            return error.code
        } catch {
            return nil
        }
    }

    @Test func theTokenComesFirstAndMustBeTheSessions() {
        #expect(throws: Never.self) { try Self.part("csrf", after: [:]) }
        #expect(Self.code { try Self.part("folder", after: [:]) } == .forbidden)
        #expect(Self.code { try Self.part("file", "a.txt", after: [:]) } == .forbidden)
        #expect(Self.code { try Self.part("folder", after: ["csrf": "other"]) } == .forbidden)
        #expect(Self.code { try Self.part("file", "a.txt", after: ["folder": ""]) } == .forbidden, "no token")
    }

    @Test func fieldsAndFilesAreToldApart() throws {
        let fields = ["csrf": Self.token, "folder": "Documents/in/"]
        #expect(try Self.part("folder", after: ["csrf": Self.token]) == .field("folder"))
        #expect(try Self.part("file", nil, after: fields) == .field("file"), "a file part without a file name")
        #expect(try Self.part("file", "", after: fields) == .nothing, "an empty file input")
        #expect(
            try Self.part("file", "C:\\Users\\me\\a.txt", after: fields)
                == .file(try DocumentPath("Documents/in/a.txt")))
        #expect(try Self.part("file", "dir/b.txt", after: fields) == .file(try DocumentPath("Documents/in/b.txt")))
        #expect(Self.code { try Self.part("file", "x", after: ["csrf": Self.token, "folder": "/abs/"]) } == .badRequest)
        #expect(Self.code { try Self.part("file", "..", after: fields) } == .invalidPath)
    }

    @Test func atMostEightFieldsComeBeforeTheFiles() throws {
        var fields = ["csrf": Self.token, "folder": "Documents/"]
        for index in 1...6 { fields["f\(index)"] = "" }
        #expect(Self.code { try Self.part("more", after: fields) } == .badRequest)
        #expect(try Self.part("file", "a", after: fields) == .file(try DocumentPath("Documents/a")))
    }
}
