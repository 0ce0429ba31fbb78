import XferCore
import XferProtocol

// WebDAV's dead properties (docs/WEBDAV.md), one rule for both backends.
extension SQLMetadataStore {
    public func deadProperties(account: Int64, container: ContainerName, paths: [String]) async throws -> [String:
        [DeadProperty]]
    {
        guard !paths.isEmpty else { return [:] }
        return try await read { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else {
                return [:]
            }
            var found: [String: [DeadProperty]] = [:]
            for batch in paths.batched(atMost: 200) {
                let marks = Array(repeating: "?", count: batch.count).joined(separator: ", ")
                let values: [SQLValue] = [.int(containerID)] + batch.map { .text($0) }
                for row in try tx.sql.rows(
                    "SELECT path, namespace, name, xml FROM dav_properties WHERE container_id = ? AND path IN (\(marks)) ORDER BY path, namespace, name",
                    values)
                {
                    found[try row.text("path"), default: []].append(
                        DeadProperty(
                            namespace: try row.text("namespace"), name: try row.text("name"),
                            xml: try row.text("xml")))
                }
            }
            return found
        }
    }

    public func patchDeadProperties(
        account: Int64, container: ContainerName, path: String, _ changes: [DeadPropertyChange]
    ) async throws {
        for case .set(let property) in changes where property.xml.utf8.count > DeadProperty.maximumBytes {
            throw XferError(.tooLarge, "a property's value is over \(DeadProperty.maximumBytes) bytes")
        }
        try await write { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: true) else { return }
            for change in changes {
                switch change {
                case .set(let property):
                    try tx.sql.rows(
                        """
                        INSERT INTO dav_properties (container_id, path, namespace, name, xml) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (container_id, path, namespace, name) DO UPDATE SET xml = excluded.xml
                        """, containerID, path, property.namespace, property.name, property.xml)
                case .remove(let namespace, let name):
                    try tx.sql.rows(
                        "DELETE FROM dav_properties WHERE container_id = ? AND path = ? AND namespace = ? AND name = ?",
                        containerID, path, namespace, name)
                }
            }
            try tx.checkDeadPropertyBounds(containerID, path: path)
            try tx.checkMetadataBudget(account: account)
        }
    }

    public func copyDeadProperties(
        account: Int64, container: ContainerName, from source: String, to destination: String, move: Bool
    ) async throws {
        try await write { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else { return }
            try tx.removeDeadProperties(containerID, below: destination)
            let (clause, values) = tx.paths(below: source)
            let rows = try tx.sql.rows(
                "SELECT path, namespace, name, xml FROM dav_properties WHERE container_id = ? AND \(clause)",
                [.int(containerID)] + values)
            if move { try tx.removeDeadProperties(containerID, below: source) }
            for row in rows {
                let path =
                    destination
                    + String(decoding: (try row.text("path")).utf8.dropFirst(source.utf8.count), as: UTF8.self)
                try tx.sql.rows(
                    """
                    INSERT INTO dav_properties (container_id, path, namespace, name, xml) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (container_id, path, namespace, name) DO UPDATE SET xml = excluded.xml
                    """, containerID, path, try row.text("namespace"), try row.text("name"), try row.text("xml"))
            }
            if !move {
                try tx.checkDeadPropertyBounds(containerID, path: nil)
                try tx.checkMetadataBudget(account: account)
            }
        }
    }

    public func removeDeadProperties(account: Int64, container: ContainerName, path: String) async throws {
        try await write { tx in
            guard let containerID = try tx.containerID(account: account, name: container, create: false) else { return }
            try tx.removeDeadProperties(containerID, below: path)
        }
    }
}

extension MetadataTransaction {
    /// `path` and every path below it (`path/…`), bytewise.
    func paths(below path: String) -> (String, [SQLValue]) {
        let bytewise = dialect.bytewise
        let prefix = path + "/"
        guard let upper = Self.successor(of: prefix) else {
            return ("(path = ? OR path\(bytewise) >= ?)", [.text(path), .text(prefix)])
        }
        return (
            "(path = ? OR (path\(bytewise) >= ? AND path\(bytewise) < ?))", [.text(path), .text(prefix), .text(upper)]
        )
    }

    func removeDeadProperties(_ containerID: Int64, below path: String) throws {
        let (clause, values) = paths(below: path)
        try sql.rows("DELETE FROM dav_properties WHERE container_id = ? AND \(clause)", [.int(containerID)] + values)
    }

    /// The bounds of ``DeadProperty``: per path (when given) and per container.
    func checkDeadPropertyBounds(_ containerID: Int64, path: String?) throws {
        if let path,
            (try sql.int("SELECT COUNT(*) FROM dav_properties WHERE container_id = ? AND path = ?", containerID, path)
                ?? 0)
                > Int64(DeadProperty.maximumPerPath)
        {
            throw XferError(
                .tooLarge,
                "a file or folder keeps at most \(DeadProperty.maximumPerPath) properties; nothing was changed")
        }
        guard
            let row = try sql.one(
                "SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(xml)), 0) AS bytes FROM dav_properties WHERE container_id = ?",
                containerID)
        else { return }
        if try row.int("n") > Int64(DeadProperty.maximumPerContainer)
            || row.int("bytes") > Int64(DeadProperty.maximumBytesPerContainer)
        {
            throw XferError(
                .tooLarge,
                "a container keeps at most \(DeadProperty.maximumPerContainer) properties of \(DeadProperty.maximumBytesPerContainer >> 20) MiB in all; nothing was changed"
            )
        }
    }
}
