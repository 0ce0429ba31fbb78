import Foundation
import Testing
import XferCore

@testable import XferServer

/// SigV4 against AWS's published example, and S3 locations (the packed store over a real
/// endpoint is in `PackedChunkStoreTests`).
@Suite struct S3Tests {
    @Test func sigV4MatchesAWSsGetObjectExample() {
        // docs.aws.amazon.com, "Signature Calculations for the Authorization Header", GET Object.
        let signer = SigV4Signer(
            accessKey: "AKIAIOSFODNN7EXAMPLE", secretKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            region: "us-east-1")
        let headers = signer.sign(
            method: "GET", host: "examplebucket.s3.amazonaws.com", path: "/test.txt", query: [],
            headers: [("Range", "bytes=0-9")], payloadHash: SigV4Signer.payloadHash([]),
            date: Date(timeIntervalSince1970: 1_369_353_600))  // 2013-05-24T00:00:00Z
        let authorization = headers.first { $0.0 == "Authorization" }?.1
        #expect(
            authorization
                == "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        )
        #expect(SigV4Signer.encode("a b/c~d", slash: false) == "a%20b/c~d")
        #expect(SigV4Signer.encode("a/b=c", slash: true) == "a%2Fb%3Dc")
    }

    @Test func locationsAreParsedAndBadOnesExplained() throws {
        let environment = ["AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s"]
        let location = try S3Location(
            url: "s3://bucket/some/prefix/", endpoint: "http://127.0.0.1:7480/", environment: environment)
        #expect(
            location.bucket == "bucket" && location.prefix == "some/prefix/"
                && location.endpoint == "http://127.0.0.1:7480")
        #expect(try S3Location(url: "s3://b", endpoint: "http://x", environment: environment).prefix == "")
        #expect(throws: XferError.self) { try S3Location(url: "b/p", endpoint: "http://x", environment: environment) }
        #expect(throws: XferError.self) { try S3Location(url: "s3://b", endpoint: "http://x", environment: [:]) }
        #expect(throws: XferError.self) { try S3Location(url: "s3://b", endpoint: "ftp://x", environment: environment) }
    }
}
